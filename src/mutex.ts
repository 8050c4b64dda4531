// createMutex: tryAcquire, acquire with backoff, run, holder; a face over the engine (engine.ts),
// as createSemaphore is. Leader election is election.ts, over a Mutex.
import type { Backend } from "./backend.ts";
import { core, inspectKey, isLease, keyAttempt, observe, runWith, waitFor } from "./engine.ts";
import type { Lease } from "./lease.ts";
import { checkSignal, cores, optionsOf } from "./options.ts";
import type { AcquireOptions, MutexOptions } from "./types.ts";

/**
 * A distributed mutex on one lock name. Create it with {@link createMutex}; elect a leader on it
 * with {@link createElection}.
 */
export interface Mutex {
  /** The lock name. */
  readonly name: string;
  /** The lease duration in ms (the `ttl` option or its default). */
  readonly ttl: number;
  /** The identity `holder()` reports for this mutex's leases (the `owner` option or a random UUID). */
  readonly owner: string;
  /**
   * One attempt: resolves a {@link Lease}, or `null` when someone else holds the lock (`await using`
   * accepts null). Rejects with a {@link BackendError} when the backend fails or does not answer
   * within the ttl, and with `signal.reason` when aborted.
   */
  tryAcquire(options?: { signal?: AbortSignal }): Promise<Lease | null>;
  /**
   * Waits until the lock is free and takes it. Retries with jittered backoff (≤ `retryDelay`,
   * never longer than the holder's remaining time when the backend reports it), also through
   * retryable backend failures, which go to `onError` or, without it, to `console.error` (the
   * first at once, then at most every 30 s). Rejects with a {@link LockTimeoutError} after
   * `timeout` (its `cause` the backend's last failure, if any), with `signal.reason` on abort,
   * and with a non-retryable {@link BackendError} at once (refused credentials, a permission the
   * runtime refused).
   */
  acquire(options?: AcquireOptions): Promise<Lease>;
  /**
   * Acquires, runs `fn` with the lease's signal, releases in `finally`, and returns `fn`'s
   * value. When `fn` throws, rejects with that error, never with a release error.
   */
  run<T>(fn: (signal: AbortSignal, lease: Lease) => T | Promise<T>, options?: AcquireOptions): Promise<T>;
  /**
   * The current holder's owner and token, or null. Advisory: it may change right after. Rejects
   * with a retryable {@link BackendError} when the backend does not answer within max(ttl/5, 1 s).
   */
  holder(options?: { signal?: AbortSignal }): Promise<{ owner: string; token: number } | null>;
}

/**
 * Creates a mutex on `options.name` in `backend`. Checks every option now and throws a
 * `TypeError` or `RangeError` naming the option and its valid values.
 *
 * @param backend Where the lock lives: `memory()`, `upstash(...)`, `azureBlob(...)` or your own.
 * @param options The lock name and timing; see {@link MutexOptions}.
 * @returns A {@link Mutex}. Creating it does no I/O.
 *
 * @example Run a job on one instance at a time
 * ```ts
 * import { createMutex } from "leasehold";
 * import { memory } from "leasehold/memory";
 *
 * declare function writeReport(job: { signal: AbortSignal; fence: number }): Promise<void>; // your job
 *
 * const mutex = createMutex(memory(), { name: "nightly-report" });
 * await using lease = await mutex.acquire({ timeout: 10_000 });
 * await writeReport({ signal: lease.signal, fence: lease.token }); // your job, fenced
 * ```
 */
export function createMutex(backend: Backend, options: MutexOptions): Mutex {
  const o = core(backend, options);
  const { name, ttl, owner } = o;
  const acquireOnce = observe(o, keyAttempt(o, name));
  const acquire = (options?: AcquireOptions): Promise<Lease> => waitFor(o, name, options, acquireOnce, true);

  const holder: Mutex["holder"] = async (options) => {
    const { signal } = optionsOf("holder", options);
    checkSignal("holder", signal);
    const info = await inspectKey(o, name, signal);
    return info ? { owner: info.owner, token: info.token } : null;
  };
  const mutex: Mutex = {
    name,
    ttl,
    owner,
    async tryAcquire(options) {
      const { signal } = optionsOf("tryAcquire", options);
      checkSignal("tryAcquire", signal);
      signal?.throwIfAborted();
      const result = await acquireOnce(signal);
      return isLease(result) ? result : null;
    },
    acquire,
    run: (fn, opts) => runWith(acquire, fn, opts),
    holder,
  };
  cores.set(mutex, o);
  return mutex;
}
