// The error mapping the backends share, one helper per kind of failure: a reply of an unexpected
// shape, a Redis error reply worth another try, and a client call given up on at an abort.
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
