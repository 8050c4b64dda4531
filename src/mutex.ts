// createMutex: tryAcquire, acquire with backoff, run, holder; a face over the engine (engine.ts),
// as createSemaphore is. Leader election is election.ts, over a Mutex.
import { type Backend, canShare, type QueuedAcquireRequest, type SharedLocks } from "./backend.ts";
import {
  type AttemptFn,
  core,
  inspectKey,
  isLease,
  keyAttempt,
  observe,
  runWith,
  waitFor,
} from "./engine.ts";
import type { Lease } from "./lease.ts";
import { type Core, check, checkSignal, cores, kind, optionsOf } from "./options.ts";
import type { ModeOption, MutexAcquireOptions, MutexOptions } from "./types.ts";

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
   * within the ttl, and with `signal.reason` when aborted. `mode: "shared"` takes a shared lease
   * ({@link ModeOption}); it never waits, so it leaves no writer waiting.
   */
  tryAcquire(options?: { signal?: AbortSignal } & ModeOption): Promise<Lease | null>;
  /**
   * Waits until the lock is free and takes it. Retries with jittered backoff (≤ `retryDelay`,
   * never longer than the holder's remaining time when the backend reports it), also through
   * retryable backend failures, which go to `onError` or, without it, to `console.error` (the
   * first at once, then at most every 30 s). Rejects with a {@link LockTimeoutError} after
   * `timeout` (its `cause` the backend's last failure, if any), with `signal.reason` on abort,
   * and with a non-retryable {@link BackendError} at once (refused credentials, a permission the
   * runtime refused). `mode: "shared"` takes a shared lease ({@link ModeOption}); an exclusive
   * acquire that waits makes new shared requests wait behind it (docs/DESIGN.md §18).
   */
  acquire(options?: MutexAcquireOptions): Promise<Lease>;
  /**
   * Acquires (in `options.mode`), runs `fn` with the lease's signal, releases in `finally`, and
   * returns `fn`'s value. When `fn` throws, rejects with that error, never with a release error.
   */
  run<T>(
    fn: (signal: AbortSignal, lease: Lease) => T | Promise<T>,
    options?: MutexAcquireOptions,
  ): Promise<T>;
  /**
   * The current holder's owner and token, or null; held in shared mode, the newest reader's, with
   * `readers` the number of live shared leases. Advisory: it may change right after. Rejects
   * with a retryable {@link BackendError} when the backend does not answer within max(ttl/5, 1 s).
   */
  holder(options?: {
    signal?: AbortSignal;
  }): Promise<{ owner: string; token: number; readers?: number } | null>;
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
  // The shared attempts, made at the first shared call: the engine over the shared view (§18).
  let sharedOnce: AttemptFn | undefined;
  /** The attempt of `mode`, checked: the exclusive one, or the shared one on a backend that can. */
  const attemptOf = (where: string, mode: unknown): AttemptFn => {
    if (mode === undefined || mode === "exclusive") return acquireOnce;
    if (mode !== "shared") {
      const got = typeof mode === "string" ? JSON.stringify(mode) : kind(mode);
      check(
        false,
        `${where}:`,
        `mode must be "shared" or "exclusive", got ${got}`,
        typeof mode === "string" ? RangeError : TypeError,
      );
    }
    if (sharedOnce) return sharedOnce;
    const so = sharedCore(o, where);
    sharedOnce = observe(so, keyAttempt(so, name));
    return sharedOnce;
  };
  const acquire = async (options?: MutexAcquireOptions): Promise<Lease> => {
    const attempt = attemptOf("acquire", optionsOf("acquire", options).mode); // a rejection, not a throw
    // A reader never marks a writer waiting: a reader's attempts are `queued` only on a backend
    // that keeps a line, where it waits in it with the writers (§18).
    return waitFor(
      o,
      name,
      options,
      attempt,
      attempt === acquireOnce || backend.acquireQueued !== undefined,
      name,
    );
  };

  const holder: Mutex["holder"] = async (options) => {
    const { signal } = optionsOf("holder", options);
    checkSignal("holder", signal);
    const info = await inspectKey(o, name, signal);
    if (!info) return null;
    const { owner, token, readers } = info;
    return readers ? { owner, token, readers } : { owner, token };
  };
  const mutex: Mutex = {
    name,
    ttl,
    owner,
    async tryAcquire(options) {
      const { signal, mode } = optionsOf("tryAcquire", options);
      checkSignal("tryAcquire", signal);
      const attempt = attemptOf("tryAcquire", mode);
      signal?.throwIfAborted();
      const result = await attempt(signal);
      return isLease(result) ? result : null;
    },
    acquire,
    run: (fn, opts) => runWith(acquire, fn, opts),
    holder,
  };
  cores.set(mutex, o);
  return mutex;
}

/**
 * The mutex's checked options over the shared view of its backend: a lease made with them takes,
 * renews and releases with `acquireShared`, `renewShared` and `releaseShared` (docs/DESIGN.md §18).
 * A TypeError from `where` naming the backend when it has not the three.
 */
function sharedCore(o: Core, where: string): Core {
  const b = o.backend;
  const { acquireShared, renewShared, releaseShared } = b as Required<SharedLocks>;
  check(
    canShare(b),
    `${where}:`,
    `the ${b.name} backend cannot hold shared leases (${b.expiry === "observed" ? 'it expires locks by observation, expiry "observed"' : "it lacks acquireShared, renewShared or releaseShared"}); mode "shared" needs one that can`,
  );
  const view: Backend = {
    name: b.name,
    ...(b.expiry ? { expiry: b.expiry } : {}),
    acquire: (r) => acquireShared.call(b, r),
    // A backend's line serves readers too: a waiting reader's attempts go to acquireShared with
    // its waiter id and hold.
    ...(b.acquireQueued ? { acquireQueued: (r: QueuedAcquireRequest) => acquireShared.call(b, r) } : {}),
    renew: (r) => renewShared.call(b, r),
    release: (r) => releaseShared.call(b, r),
    inspect: (r) => b.inspect(r),
  };
  return { ...o, backend: view, mode: "shared" };
}
