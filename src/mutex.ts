// createMutex: tryAcquire, acquire with backoff, run, holder. Leader election is election.ts, over a Mutex.
import type { Backend, HolderInfo } from "./backend.ts";
import { BackendError, fenceExhausted, LockTimeoutError } from "./errors.ts";
import { codeOf, type Emit, emitter, failure, type LockEvent } from "./events.ts";
import { createLease, type Lease, releaseNonce } from "./lease.ts";
import {
  type CheckedMutexOptions,
  checkFunction,
  checkMs,
  checkMutexOptions,
  checkSignal,
  isNumber,
  optionsOf,
} from "./options.ts";
import { linkedSignal, noAnswer, requestSignal } from "./signals.ts";
import { NEVER, now, sleep } from "./time.ts";
import { observedWait, queueHold, quietBound, waitDelay } from "./timing.ts";

/** Options of {@link createMutex}. All durations are milliseconds. */
export interface MutexOptions {
  /**
   * The lock name, shared by every instance that must exclude the others. 1–255 characters:
   * letters, digits and `- _ . : / @ +`; it must not start or end with `/` or `.`, nor contain `//`
   * or a `.` or `..` segment (URLs would collapse them in a blob name).
   * It becomes the Redis key or blob name (after the backend's prefix).
   */
  name: string;
  /**
   * How long a lease lives on the backend without renewal, in ms. An integer from 10 to
   * 2 147 483 647, within the backend's own range (Azure: 15 000–60 000). Default 15 000.
   */
  ttl?: number;
  /**
   * The identity `holder()` reports: 1–256 characters (UTF-16 code units, as `length` counts) of
   * well-formed Unicode without control characters (U+0000–U+001F, U+007F–U+009F). Every backend
   * stores it and `holder()` gives it back exactly. Default: a random UUID.
   */
  owner?: string;
  /** Renew the lease in the background every ttl/3 (±10 %) until released. Default true. */
  renew?: boolean;
  /**
   * The longest pause between two acquire attempts while waiting, in ms; pauses grow from
   * 25 ms up to it, jittered. A finite number ≥ 0. Default 1 000.
   */
  retryDelay?: number;
  /**
   * How long before the lease could expire on the backend the holder's signal aborts, in ms, so
   * that work can stop in time. ≥ 0 and < ttl / 2. Default min(1 000, ttl / 5).
   */
  stopMargin?: number;
  /**
   * An observer of this mutex's events: acquire started, each attempt and its outcome, acquired
   * (with the time waited), acquire failed, renewed (latency, margin left), renew failed, lost
   * (why), released, and the leadership of a {@link createElection} on it (see {@link LockEvent}).
   * Called synchronously; an observer that throws is ignored (the lock goes on), and one that
   * returns a promise must handle its own rejections. Without it, no event is built.
   */
  onEvent?: (event: LockEvent) => void;
}

/** Options of {@link Mutex.acquire} and {@link Mutex.run}. */
export interface AcquireOptions {
  /** Aborts the wait; `acquire` then rejects with `signal.reason`. */
  signal?: AbortSignal;
  /**
   * Give up after this many ms and reject with a {@link LockTimeoutError}. A number ≥ 0;
   * default: wait until the signal aborts. A positive timeout bounds the whole wait, requests in
   * flight included. `0` means "do not wait": exactly one attempt, bounded like `tryAcquire()`'s,
   * that takes a free lock and rejects with the timeout error when it is taken. When the backend
   * failed or never answered since its last answer, the timeout's `cause` is that
   * {@link BackendError}.
   */
  timeout?: number;
  /**
   * Called with each retryable failure while waiting (a network error, a 5xx, no answer within
   * the attempt's bound); the wait goes on. When it throws, `acquire` rejects with that error.
   * Default: none (the failures are still the `cause` of a timeout).
   */
  onError?: (error: unknown) => void;
}

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
  /** The longest pause between acquire attempts, in ms (the `retryDelay` option or its default). */
  readonly retryDelay: number;
  /** How long before the lease could expire its signal aborts, in ms (`stopMargin` or its default). */
  readonly stopMargin: number;
  /** The `onEvent` observer, if any; {@link createElection} reports leadership through it. */
  readonly onEvent?: ((event: LockEvent) => void) | undefined;
  /**
   * One attempt: resolves a {@link Lease}, or `null` when someone else holds the lock (`await using`
   * accepts null). Rejects with a {@link BackendError} when the backend fails or does not answer
   * within the ttl, and with `signal.reason` when aborted.
   */
  tryAcquire(options?: { signal?: AbortSignal }): Promise<Lease | null>;
  /**
   * Waits until the lock is free and takes it. Retries with jittered backoff (≤ `retryDelay`,
   * never longer than the holder's remaining time when the backend reports it), also through
   * retryable backend failures. Rejects with a {@link LockTimeoutError} after `timeout`, with
   * `signal.reason` on abort, and with a non-retryable {@link BackendError} at once.
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
  const { name, ttl, retryDelay, stopMargin, owner, onEvent } = o;
  const acquireOnce = observe(o, keyAttempt(o, name));
  const acquire = (options?: AcquireOptions): Promise<Lease> => waitFor(o, name, options, acquireOnce, true);

  const holder: Mutex["holder"] = async (options) => {
    const { signal } = optionsOf("holder", options);
    checkSignal("holder", signal);
    const info = await inspectKey(o, name, signal);
    return info ? { owner: info.owner, token: info.token } : null;
  };
  return {
    name,
    ttl,
    owner,
    retryDelay,
    stopMargin,
    onEvent,
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
}

// What createMutex and createSemaphore share: one acquire request on one key (with its observed-
// expiry state), the lease of a granted request, the wait of acquire(), and run().

/** A mutex's or semaphore's checked options, with its backend, guard and event emitter. @internal */
export type Core = CheckedMutexOptions & { emit?: Emit | undefined };

/** The checked options of createMutex (or of `where`) and the emitter of their observer. @internal */
export function core(backend: Backend, options: MutexOptions, where?: string): Core {
  const o: Core = checkMutexOptions(backend, options, where);
  o.emit = emitter(o.onEvent, o.name, o.owner);
  return o;
}

/** What one attempt answers: a lease, or that it was refused (and when to try again, if known). @internal */
export type Attempt = Lease | { retryAfter?: number };

/**
 * One attempt: `queue` asks a backend with `acquireQueued` to hold it open in line (§4.7); `n` is
 * its number within an acquire that started at `start` (for the events). @internal
 */
export type AttemptFn = (
  signal?: AbortSignal,
  queue?: { waiter: string; hold: number },
  n?: number,
  start?: number,
) => Promise<Attempt>;

/** A refused attempt's answer: the backend's `retryAfter` when it is a number of ms ≥ 0. @internal */
export function refused(result: { ok: boolean; retryAfter?: number } | undefined): { retryAfter?: number } {
  const after = result?.ok === false ? result.retryAfter : undefined;
  return isNumber(after) && after >= 0 ? { retryAfter: after } : {};
}

/** Whether an attempt got a lease. @internal */
export const isLease = (r: Attempt): r is Lease => "token" in r;

/** Frees, in the background, a lock we may have taken without knowing it (the reply was lost). @internal */
export function releaseInBackground(o: Core, key: string, nonce: string): void {
  releaseNonce(o.backend, key, nonce, o.ttl).catch(() => {});
}

/**
 * The lease of an acquire request on `key` that the backend granted with `token`, sent at
 * `tSend`: refused (and freed) when the token is no safe integer (a positive integer past the
 * safe range: the fence counter is exhausted, non-retryable), the answer came after the lease's
 * deadline, or the caller aborted meanwhile. @internal
 */
export function granted(
  o: Core,
  key: string,
  nonce: string,
  token: unknown,
  tSend: number,
  signal?: AbortSignal,
): Lease | { retryAfter: number } {
  const { backend, ttl, guard } = o;
  if (!Number.isSafeInteger(token)) {
    releaseInBackground(o, key, nonce);
    // An integer past the safe range: the store's counter went past it (docs/DESIGN.md §5.1).
    if (Number.isInteger(token) && (token as number) > 0) throw fenceExhausted(backend.name, key);
    throw new BackendError("acquire answered without a valid fencing token", {
      backend: backend.name,
      retryable: false,
    });
  }
  if (now() >= tSend + ttl - guard) {
    // Answered so late that the lease would already be past its deadline.
    releaseInBackground(o, key, nonce);
    return { retryAfter: 0 };
  }
  if (signal?.aborted) {
    releaseInBackground(o, key, nonce);
    throw signal.reason;
  }
  return createLease(o, key, nonce, token as number, tSend);
}

/**
 * The attempts on one key: each is one acquire request, bounded by the time after which its
 * lease would be born dead. On a backend with observed expiry (docs/DESIGN.md §14) it keeps the
 * holder's record version it saw, from when (read after the answer that showed it), and how long
 * it must stay unchanged. @internal
 */
export function keyAttempt(o: Core, key: string): AttemptFn {
  const { backend, owner, ttl, guard } = o;
  const backendName = backend.name;
  const observed = backend.expiry === "observed";
  let seen: { version: string; since: number; wait: number } | undefined;
  return async (signal, queue) => {
    const nonce = crypto.randomUUID();
    const bounded = requestSignal(backendName, "acquire", ttl - guard, signal);
    const request: Parameters<Backend["acquire"]>[0] = { key, owner, nonce, ttl, signal: bounded.signal };
    if (seen && now() - seen.since >= seen.wait) request.takeover = seen.version;
    const tSend = now();
    let result: Awaited<ReturnType<Backend["acquire"]>>;
    try {
      // A held-open request's t_send is when it was sent, before the lock was handed over: the
      // deadline rule of §4.2 holds unchanged (earlier is safe).
      result = await (queue && backend.acquireQueued
        ? backend.acquireQueued({ ...request, ...queue })
        : backend.acquire(request));
    } catch (error) {
      // The request may have been applied (no answer, a lost reply, a 5xx): free what we may hold.
      if (!(error instanceof BackendError && !error.retryable)) releaseInBackground(o, key, nonce);
      throw error;
    } finally {
      bounded.done();
    }
    if (result?.ok !== true) {
      if (observed) {
        const { version, ttl: held } = result?.ok === false ? result : {};
        if (typeof version !== "string" || !(isNumber(held) && held > 0)) {
          throw new BackendError("acquire was refused without the holder's version and ttl", {
            backend: backendName,
            retryable: false,
          });
        }
        if (seen?.version !== version) seen = { version, since: now(), wait: observedWait(held) };
        return { retryAfter: Math.max(0, seen.since + seen.wait - now()) };
      }
      return refused(result);
    }
    seen = undefined;
    return granted(o, key, nonce, result.token, tSend, signal);
  };
}

/**
 * `attempt`, reporting each attempt and, when granted, the acquisition to the observer of `o`.
 * Without an observer it is `attempt` itself: nothing is added per operation. @internal
 */
export function observe(o: Core, attempt: AttemptFn): AttemptFn {
  const { emit } = o;
  return !emit
    ? attempt
    : async (signal, queue, n = 1, start = now()) => {
        const sent = now();
        const tried = { type: "attempt", attempt: n } as const;
        try {
          const r = await attempt(signal, queue);
          const latency = now() - sent;
          if (!isLease(r)) {
            emit({ ...tried, latency, outcome: "taken", retryAfter: r.retryAfter });
            return r;
          }
          emit({ ...tried, latency, outcome: "granted", token: r.token });
          emit({ type: "acquired", token: r.token, waited: now() - start, attempts: n });
          return r;
        } catch (error) {
          emit({ ...tried, latency: now() - sent, outcome: "error", ...failure(error) });
          throw error;
        }
      };
}

/**
 * acquire(): attempts until one gets a lease, with jittered backoff (never longer than a
 * `retryAfter`), through retryable failures, until the timeout or the signal (docs/DESIGN.md
 * §4.7). `what` names the lock in the timeout's message; `queued`: whether to wait in line on a
 * backend with `acquireQueued`. @internal
 */
export async function waitFor(
  o: Core,
  what: string,
  options: AcquireOptions | undefined,
  attempt: AttemptFn,
  queued: boolean,
): Promise<Lease> {
  const { backend, ttl, retryDelay, emit } = o;
  const backendName = backend.name;
  const { signal, timeout, onError } = optionsOf("acquire", options);
  checkSignal("acquire", signal);
  checkMs("acquire", "timeout", timeout, true);
  checkFunction("acquire", "onError", onError);
  signal?.throwIfAborted();
  const start = now();
  const end = start + (timeout ?? NEVER);
  emit?.({ type: "acquiring" });
  let attempts = 0;
  // Whether the backend answered since the last failure, and whether a request is out now.
  let lastError: unknown;
  let answered = false;
  let pending = false;
  const timedOut = () => {
    const silent = lastError === undefined && pending && !answered;
    const cause = silent ? noAnswer(backendName, "acquire", now() - start) : lastError;
    return new LockTimeoutError(`could not acquire "${what}" within ${timeout} ms`, { cause });
  };
  // timeout 0 is one attempt, bounded like tryAcquire's; any other timeout bounds everything,
  // requests in flight included, through a signal that follows the caller's. Without one, the
  // caller's signal (if any) is all there is to follow: no second signal to make and listen to.
  const outer = timeout ? linkedSignal([signal], end - now(), timedOut) : undefined;
  const bound = outer ? outer.signal : signal;
  // One place in line for every attempt of this call, on a backend that queues waiters.
  const waiter = queued && backend.acquireQueued && timeout !== 0 ? crypto.randomUUID() : undefined;
  try {
    for (let failures = 0; ; failures++) {
      let wait = waitDelay(failures, retryDelay);
      pending = true;
      attempts++;
      try {
        const hold = waiter ? queueHold(ttl, end - now()) : 0;
        const queue = waiter && hold >= 1 ? { waiter, hold } : undefined;
        const result = await attempt(bound, queue, attempts, start);
        if (isLease(result)) return result;
        answered = true;
        lastError = undefined;
        if (result.retryAfter !== undefined) wait = Math.min(wait, Math.max(1, result.retryAfter));
      } catch (error) {
        if (bound?.aborted) throw bound.reason;
        if (!(error instanceof BackendError && error.retryable)) throw error;
        answered = false;
        lastError = error;
        onError?.(error);
      } finally {
        pending = false;
      }
      // Never sleep past the timeout, and never sleep after giving up.
      if (now() >= end) throw timedOut();
      await sleep(Math.min(wait, end - now()), bound);
    }
  } catch (error) {
    emit?.({ type: "acquire-failed", waited: now() - start, attempts, code: codeOf(error) });
    throw error;
  } finally {
    outer?.done();
  }
}

/** The backend's holder of `key`, bounded by max(ttl/5, 1 s). @internal */
export async function inspectKey(o: Core, key: string, signal?: AbortSignal): Promise<HolderInfo | null> {
  const bounded = requestSignal(o.backend.name, "inspect", quietBound(o.ttl), signal);
  try {
    return await o.backend.inspect(key, bounded.signal);
  } finally {
    bounded.done();
  }
}

/** run(): acquires, runs `fn`, releases in `finally`; `fn`'s error wins over a release error. @internal */
export async function runWith<L extends Lease, T>(
  acquire: (options?: AcquireOptions) => Promise<L>,
  fn: (signal: AbortSignal, lease: L) => T | Promise<T>,
  options?: AcquireOptions,
): Promise<T> {
  const lease = await acquire(options);
  let value: Awaited<T>;
  try {
    value = await fn(lease.signal, lease);
  } catch (error) {
    await lease.release().catch(() => {});
    throw error;
  }
  await lease.release();
  return value;
}
