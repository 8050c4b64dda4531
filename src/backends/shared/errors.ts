// The error mapping the backends share, one helper per kind of failure: a reply of an unexpected
// shape, a Redis error reply worth another try, a permission the runtime refused, and a client
// call given up on at an abort.
import { BackendError } from "../../errors.ts";
import { abortable } from "../../signals.ts";

/**
 * The retryable error for a reply of an unexpected shape: `unexpected reply: <the reply as JSON,
 * cleaned by \`clean\` of secrets, 120 characters>`. Without `clean`, `reply` is a description of
 * what is wrong (with no secret in it), quoted as it is. `noun` names the reply (`"rows"`).
 */
export function malformed(
  backend: string,
  reply: unknown,
  clean?: (text: string) => string,
  status?: number,
  noun = "reply",
): BackendError {
  const text = clean ? clean(JSON.stringify(reply) ?? String(reply)).slice(0, 120) : reply;
  return new BackendError(`unexpected ${noun}: ${text}`, {
    backend,
    ...(status && { status }),
    retryable: true,
  });
}

/**
 * Redis' own transient states, at the start of an error reply (its code first): another try may
 * succeed (a failover, a resharding, a busy script).
 */
export const REDIS_TRANSIENT: RegExp = /^(LOADING|BUSY|TRYAGAIN|MASTERDOWN|CLUSTERDOWN|READONLY|MOVED|ASK)\b/;

/** The names of a runtime's refused permission: Deno 2's `NotCapable`, Deno 1's `PermissionDenied`. */
const PERMISSION = new Set(["NotCapable", "PermissionDenied"]);

/**
 * When `error` (or one of its causes, 4 deep) is the runtime refusing a permission (Deno run
 * without `--allow-net`), the fix to name: no retry can grant it, so it must not be retried.
 * `undefined` for any other error.
 */
export function permissionFix(error: unknown): string | undefined {
  for (let e = error, depth = 0; e instanceof Error && depth <= 4; e = e.cause, depth++) {
    if (!PERMISSION.has(e.name)) continue;
    // Deno names the flag ("run again with the --allow-net flag"); net is what backends need.
    const flag = /--allow-[a-z-]+/.exec(e.message)?.[0] ?? "--allow-net";
    const only = flag === "--allow-net" ? ` (or ${flag}=<host> for this host only)` : "";
    return `a permission of the runtime is missing, and no retry can grant it: run Deno with ${flag}${only}`;
  }
  return undefined;
}

/**
 * Waits for a call already sent through a client the user passes (redis, postgres), or until
 * `signal` aborts. An abort rejects with the signal's reason: the call goes on, its outcome no
 * one's now (`abortable` keeps it handled). Any other error becomes `failure(error)`; a
 * {@link BackendError} is passed on as it is.
 */
export async function abortableCall<T>(
  running: Promise<T>,
  signal: AbortSignal | undefined,
  failure: (error: unknown) => BackendError,
): Promise<T> {
  try {
    return await (signal ? abortable(running, signal) : running);
  } catch (error) {
    if (signal?.aborted && error === signal.reason) throw error;
    throw error instanceof BackendError ? error : failure(error);
  }
}
