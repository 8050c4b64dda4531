// The engine that createMutex and createSemaphore share: one acquire request on one key (with its
// observed-expiry state), the lease of a granted request, the events of an attempt, the wait of
// acquire(), and run(). mutex.ts and semaphore.ts are its two faces; it knows neither.
import {
  type AcquireAnyResult,
  type AcquireRequest,
  type AcquireResult,
  type Backend,
  canShare,
  type FireHolder,
  type HolderInfo,
} from "./backend.ts";
import { BackendError, explain, fenceExhausted, LockTimeoutError } from "./errors.ts";
import { codeOf, emitter, failure } from "./events.ts";
import { createLease, type Lease, quietRequest, releaseNonce } from "./lease.ts";
import {
  type Core,
  checkFunction,
  checkMs,
  checkMutexOptions,
  checkSignal,
  isNumber,
  optionsOf,
} from "./options.ts";
import { linkedSignal, noAnswer, requestSignal } from "./signals.ts";
import { NEVER, now, sleep } from "./time.ts";
import { FAILURE_REPORT_INTERVAL, observedWait, queueHold, quietBound, waitDelay } from "./timing.ts";
import type { AcquireOptions, MutexAcquireOptions, MutexOptions } from "./types.ts";
import { listen } from "./wake.ts";

/** The checked options of createMutex (or of `where`) and the emitter of their observer. @internal */
export function core(backend: Backend, options: MutexOptions, where?: string): Core {
  const o: Core = checkMutexOptions(backend, options, where);
  o.emit = emitter(o.onEvent, o.name, o.owner);
  return o;
}

/**
 * What one attempt answers: a lease (`L`: a mutex's {@link Lease}, a semaphore's permit), or that
 * it was refused (and when to try again, if known). @internal
 */
export type Attempt<L extends Lease = Lease> = L | Refusal;

/** A refused attempt: when to try again, if known, or the fire's runner when it is done (§17). @internal */
export interface Refusal {
  retryAfter?: number;
  done?: FireHolder;
}

/**
 * One attempt: `queue` asks a backend with `acquireQueued` to hold it open in line (§4.7); `n` is
 * its number within an acquire that started at `start` (for the events). @internal
 */
export type AttemptFn<L extends Lease = Lease> = (
  signal?: AbortSignal,
  queue?: { waiter: string; hold: number },
  n?: number,
  start?: number,
) => Promise<Attempt<L>>;

/**
 * A refused attempt's answer: the backend's `retryAfter` when it is a number of ms ≥ 0, and
 * the done record's runner when it answered one (`done`, {@link FireRecord}). @internal
 */
export function refused(result: AcquireResult | AcquireAnyResult | undefined): Refusal {
  if (result?.ok !== false) return {};
  const done = "done" in result ? result.done : undefined;
  if (typeof done?.owner === "string" && Number.isSafeInteger(done.token))
    return { done: { owner: done.owner, token: done.token } };
  const after = result.retryAfter;
  return isNumber(after) && after >= 0 ? { retryAfter: after } : {};
}

/** Whether an attempt got a lease. @internal */
export const isLease = <L extends Lease>(r: Attempt<L>): r is L => "token" in r;

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
    const request: AcquireRequest = { key, owner, nonce, ttl, signal: bounded.signalFor(backend) };
    if (seen && now() - seen.since >= seen.wait) request.takeover = seen.version;
    // The waiting call's id: a place in line (§4.7), or a writer's waiting mark (§18).
    if (queue) request.waiter = queue.waiter;
    const tSend = now();
    let result: Awaited<ReturnType<Backend["acquire"]>>;
    try {
      // A held-open request's t_send is when it was sent, before the lock was handed over: the
      // deadline rule of §4.2 holds unchanged (earlier is safe).
      result = await bounded.race(
        queue && backend.acquireQueued
          ? backend.acquireQueued({ ...request, ...queue })
          : backend.acquire(request),
      );
    } catch (error) {
      // The request may have been applied (no answer, a lost reply, a 5xx): free what we may hold.
      if (!(error instanceof BackendError && !error.retryable)) releaseInBackground(o, key, nonce);
      throw error;
    } finally {
      bounded.done();
    }
    if (result?.ok !== true) {
      if (result?.ok === false && result.done) return refused(result);
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
export function observe<L extends Lease>(o: Core, attempt: AttemptFn<L>): AttemptFn<L> {
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
            emit(
              r.done
                ? { ...tried, latency, outcome: "done", token: r.done.token }
                : { ...tried, latency, outcome: "taken", retryAfter: r.retryAfter },
            );
            return r;
          }
          emit({ ...tried, latency, outcome: "granted", token: r.token });
          emit({
            type: "acquired",
            token: r.token,
            waited: now() - start,
            attempts: n,
            mode: o.mode ?? "exclusive",
          });
          return r;
        } catch (error) {
          emit({ ...tried, latency: now() - sent, outcome: "error", ...failure(error) });
          throw error;
        }
      };
}

/**
 * acquire()'s report of the failures it retries when the caller passed no `onError`: one line to
 * `console.error` naming the backend, the lock, the error with its causes (the library's errors
 * carry no secret) and how long it goes on; the first failure at once, then at most one line
 * per {@link FAILURE_REPORT_INTERVAL}, counting the failures in between. @internal
 */
export function failureReporter(
  backend: string,
  what: string,
  timeout: number | undefined,
): (error: unknown) => void {
  let last = Number.NEGATIVE_INFINITY;
  let count = 0;
  return (error) => {
    count++;
    if (now() - last < FAILURE_REPORT_INTERVAL) return;
    last = now();
    const until =
      timeout === undefined ? "until it gets the lock (no timeout)" : `until its timeout of ${timeout} ms`;
    const since = count > 1 ? `${count} failures since the last report; ` : "";
    console.error(
      `[leasehold] [${backend}] acquire "${what}" failed: ${explain(error, backend)}; retrying ${until} ` +
        `(${since}printed at most every ${FAILURE_REPORT_INTERVAL / 1000} s; pass onError to handle failures yourself)`,
    );
    count = 0;
  };
}

/** How many times one wait listens again after its watch ended without it (§19). */
const RELISTEN = 3;

/**
 * acquire(): attempts until one gets a lease, with jittered backoff (never longer than a
 * `retryAfter`), through retryable failures, until the timeout or the signal (docs/DESIGN.md
 * §4.7). `what` names the lock in the timeout's message; `queued`: whether to wait in line on a
 * backend with `acquireQueued`, or as a writer marked waiting on one with `acquireShared` (§18;
 * `what` is then the lock's key, whose mark a give-up removes). `watched`: the key whose releases
 * end a pause early on a backend with `watch` (§19). @internal
 */
export async function waitFor<L extends Lease>(
  o: Core,
  what: string,
  options: MutexAcquireOptions | undefined,
  attempt: AttemptFn<L>,
  queued: boolean,
  watched?: string,
): Promise<L> {
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
    // The message says why when the backend is to blame, so that an outage does not read as a
    // held lock; the cause is that error itself.
    const why = cause === undefined ? "" : `: the backend failed (the cause): ${explain(cause, backendName)}`;
    return new LockTimeoutError(`could not acquire "${what}" within ${timeout} ms${why}`, { cause });
  };
  // Without onError, a retried failure is printed: nobody waits in silence. Made at the first
  // failure: an acquire that never fails pays nothing for it.
  let print: ((error: unknown) => void) | undefined;
  // timeout 0 is one attempt, bounded like tryAcquire's; any other timeout bounds everything,
  // requests in flight included, through a signal that follows the caller's. Without one, the
  // caller's signal (if any) is all there is to follow: no second signal to make and listen to.
  const outer = timeout ? linkedSignal([signal], end - now(), timedOut) : undefined;
  const bound = outer ? outer.signal : signal;
  // One place in line for every attempt of this call, on a backend that queues waiters.
  const waiter =
    queued && (backend.acquireQueued || canShare(backend)) && timeout !== 0 ? crypto.randomUUID() : undefined;
  // Whether an attempt that carried the waiter may have left its mark or place: refused, or sent
  // and not answered. Only then does a give-up send the request that removes it.
  let marked = false;
  // Wake on release (§19): after the first refusal, a waiter on a backend that can tell of
  // releases listens for this key's (until the wait ends; src/wake.ts); a release then ends its
  // pause, or the next pause when it came during an attempt. A backend that keeps a line needs none.
  // A watch that ends without the waiter (it failed, did not listen in time, or its connection was
  // lost) is started again after the next attempt, up to RELISTEN times in one wait.
  const watching = watched !== undefined && !backend.acquireQueued && backend.watch !== undefined;
  let unlisten: (() => void) | undefined;
  let listens = 0;
  let woken = false;
  let nap: AbortController | undefined;
  const wake = () => {
    woken = true;
    nap?.abort();
  };
  try {
    for (let failures = 0; ; failures++) {
      let wait = waitDelay(failures, retryDelay);
      woken = false;
      pending = true;
      attempts++;
      // Every attempt carries the waiter, the last one too: a grant removes the mark the earlier
      // ones left (§18). A line needs a hold of at least 1 ms; without one, the attempt is plain.
      const hold = waiter ? queueHold(ttl, end - now()) : 0;
      const queue = waiter && (hold >= 1 || !backend.acquireQueued) ? { waiter, hold } : undefined;
      try {
        const result = await attempt(bound, queue, attempts, start);
        if (isLease(result)) return result;
        if (queue) marked = true;
        answered = true;
        lastError = undefined;
        if (result.retryAfter !== undefined) wait = Math.min(wait, Math.max(1, result.retryAfter));
      } catch (error) {
        if (queue && !(error instanceof BackendError && !error.retryable)) marked = true;
        if (bound?.aborted) throw bound.reason;
        if (!(error instanceof BackendError && error.retryable)) throw error;
        answered = false;
        lastError = error;
        onError?.(error);
      } finally {
        pending = false;
      }
      // A waiting writer's mark lasts its ttl: it comes back within ttl/2, so that readers never
      // slip in between two attempts, whatever retryDelay is (§18).
      if (marked) wait = Math.min(wait, ttl / 2);
      // Never sleep past the timeout, and never sleep after giving up.
      if (now() >= end) throw timedOut();
      // This attempt failed and another follows (a failure that ends the wait is its cause).
      if (lastError !== undefined && !onError) {
        print ??= failureReporter(backendName, what, timeout);
        print(lastError);
      }
      if (watching && answered && !unlisten && listens++ <= RELISTEN)
        unlisten = listen(backend, watched!, ttl, {
          wake,
          shared: options?.mode === "shared",
          lost: () => {
            unlisten = undefined;
          },
        });
      if (woken) continue;
      if (!unlisten) {
        await sleep(Math.min(wait, end - now()), bound);
        continue;
      }
      // A pause that a release ends early.
      nap = new AbortController();
      const napping = linkedSignal([bound, nap.signal]);
      try {
        await sleep(Math.min(wait, end - now()), napping.signal);
      } catch (error) {
        if (!woken || bound?.aborted) throw error;
      } finally {
        napping.done();
        nap = undefined;
      }
    }
  } catch (error) {
    // A writer that gives up lets the readers in at once rather than after its mark's ttl (§18).
    const unmark = backend.releaseShared;
    if (marked && unmark)
      quietRequest(backend, ttl, (s) => unmark.call(backend, { key: what, nonce: waiter!, signal: s })).catch(
        () => {},
      );
    emit?.({ type: "acquire-failed", waited: now() - start, attempts, code: codeOf(error) });
    throw error;
  } finally {
    outer?.done();
    unlisten?.();
  }
}

/** The backend's holder of `key`, bounded by max(ttl/5, 1 s). @internal */
export async function inspectKey(o: Core, key: string, signal?: AbortSignal): Promise<HolderInfo | null> {
  const bounded = requestSignal(o.backend.name, "inspect", quietBound(o.ttl), signal);
  try {
    return await bounded.race(o.backend.inspect({ key, signal: bounded.signalFor(o.backend) }));
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
