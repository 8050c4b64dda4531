// The mutex a command runs under (exec --limit: a semaphore): the CLI's options turned into
// createMutex's, with the stop margin that leaves the command time to be stopped before the lock
// can expire.

import type { Backend } from "../src/backend.ts";
import { createMutex, createSemaphore, isLockError, type MutexOptions } from "../src/index.ts";
import type { Options } from "./args.ts";
import { messageOf, UsageError } from "./output.ts";
import { RedisLoginRefused } from "./resp.ts";
import { killSlack } from "./supervise.ts";

export function mutexFor(o: Options, backend: Backend) {
  return lockFor(o, (options) => createMutex(backend, options));
}

/** exec's lock: the mutex, or with --limit a semaphore seen through the same calls. */
export function execLockFor(o: Options, backend: Backend) {
  return lockFor(o, (options) =>
    o.limit === undefined ? createMutex(backend, options) : semaphoreLock(backend, options, o.limit),
  );
}

function lockFor<L>(o: Options, make: (options: MutexOptions) => L) {
  const slack = killSlack(o.ttl);
  const grace = o.grace ?? Math.min(5_000, Math.floor(o.ttl / 4));
  if (o.grace !== undefined && grace + slack >= o.ttl / 2) {
    throw new UsageError(
      `--grace must be less than ttl/2 - ${slack} = ${o.ttl / 2 - slack} ms with --ttl ${o.ttl}: the command must be stopped before the lock can expire`,
    );
  }
  try {
    // The signal aborts grace + slack before the lock could expire on the backend: time for a
    // SIGTERM, the grace period and a SIGKILL before anyone else can take the lock.
    const mutex = make({
      name: o.name,
      ttl: o.ttl,
      owner: o.owner,
      retryDelay: o.retryDelay,
      stopMargin: grace + slack,
    });
    // Heartbeats to the watchdog: often enough that a renewal reaches it long before the deadline
    // it holds (renewals come every ttl/3; the deadline is about ttl away).
    const beat = Math.max(20, Math.min(1_000, Math.floor(o.ttl / 10)));
    return { mutex, grace, beat };
  } catch (error) {
    const text = messageOf(error).replace(/^create(Mutex|Semaphore): /, "");
    throw new UsageError(
      text.replace(/^(ttl|name|owner|retryDelay)\b/, (f) => `--${f.replace("retryDelay", "retry-delay")}`),
    );
  }
}

/**
 * A semaphore seen through the calls exec makes of a mutex; holder() describes the full
 * semaphore's holders.
 */
function semaphoreLock(backend: Backend, options: MutexOptions, limit: number) {
  const sem = createSemaphore(backend, { ...options, limit });
  return {
    acquire: sem.acquire,
    tryAcquire: sem.tryAcquire,
    /** The holders of every permit, described: a semaphore has no one token to show. */
    async holder(): Promise<{ owner: string } | null> {
      const held = await sem.holders();
      if (held.length === 0) return null;
      const owners = held.map((h) => `${h.owner} (slot ${h.slot}, token ${h.token})`);
      return { owner: `all ${limit} permits: ${owners.join(", ")}` };
    },
  };
}

/** Whether an error means the backend failed (rather than the lock being taken). */
export function backendFailed(error: unknown): boolean {
  return isLockError(error) && (error.code === "ERR_BACKEND" || error.code === "ERR_BACKEND_AUTH");
}

/**
 * The library's fix for a missing container or lock table (`pass createContainer: true`), in the
 * words of the command line (`pass --create-container`).
 */
const MISSING: readonly (readonly [option: RegExp, flag: string])[] = [
  [/\bpass createContainer: true\b/, "pass --create-container"],
  [/\bpass createTable: true\b/, "pass --create-table"],
];

/** An error's message as the command line says it: the fix a flag gives named by that flag. */
export function describe(error: unknown): string {
  return MISSING.reduce((text, [option, flag]) => text.replace(option, flag), messageOf(error));
}

/**
 * Whether a backend failure is configuration no retry fixes (exit 2): credentials refused, a
 * missing Azure container or lock table (the backend's message names the fix), or a refused login
 * of the CLI's own clients (a Redis database that does not exist, AUTH to a server without a
 * password; the PostgreSQL client reports its own as refused credentials).
 */
export function misconfigured(error: unknown): boolean {
  if (isLockError(error) && error.code === "ERR_BACKEND_AUTH") return true;
  if (
    isLockError(error) &&
    "retryable" in error &&
    error.retryable === false &&
    MISSING.some(([option]) => option.test(error.message))
  )
    return true;
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++)
    if (e.name === RedisLoginRefused.NAME) return true;
  return false;
}
