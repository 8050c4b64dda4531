// Signals: one that follows others (and a timeout), a bound for one backend request, waiting for an abort.
import { BackendError } from "./errors.ts";
import { NEVER, timer } from "./time.ts";

/**
 * An AbortSignal that aborts as soon as any of `parents` aborts (with its reason) or, when `ms`
 * is finite, after `ms` (with `reason()`). Call `done()` when finished so no timer or listener stays.
 */
export function linkedSignal(
  parents: readonly (AbortSignal | undefined)[],
  ms: number = NEVER,
  reason: () => unknown = () => undefined,
): { signal: AbortSignal; done: () => void } {
  const ctrl = new AbortController();
  const cancel = timer(ms, () => ctrl.abort(reason()));
  // The first parent found aborted gives the reason (a controller aborts once).
  const detach = parents.map((parent) => {
    const onAbort = () => ctrl.abort(parent?.reason);
    if (parent?.aborted) onAbort();
    else parent?.addEventListener("abort", onAbort, { once: true });
    return () => parent?.removeEventListener("abort", onAbort);
  });
  return {
    signal: ctrl.signal,
    done: () => {
      cancel();
      for (const off of detach) off();
    },
  };
}

/** Resolves (never rejects) when `signal` aborts. */
export function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
}

/** The signal of one request, bounded in time: `done()` when finished, `abort(reason)` to end it early. */
export interface Bounded {
  signal: AbortSignal;
  done: () => void;
  abort: (reason: unknown) => void;
}

/**
 * A signal for one backend request: aborts with `parent`, or after `ms` with a retryable
 * "no answer" {@link BackendError}. Call `done()` afterwards; `abort(reason)` ends it early. One controller, one timer and at
 * most one listener: it is made for every request, so it stays cheap.
 */
export function requestSignal(backend: string, op: string, ms: number, parent?: AbortSignal): Bounded {
  const ctrl = new AbortController();
  // Not unref'ed: the request it bounds keeps the process alive anyway, and unref has a cost on Node.
  const cancel = timer(ms, () => ctrl.abort(noAnswer(backend, op, ms)), true);
  // Ended early: the timer goes too (a backend that ignores the signal must not keep it armed).
  const abort = (reason: unknown) => {
    cancel();
    ctrl.abort(reason);
  };
  if (!parent) return { signal: ctrl.signal, done: cancel, abort };
  const onAbort = () => abort(parent.reason);
  if (parent.aborted) onAbort();
  else parent.addEventListener("abort", onAbort, { once: true });
  return {
    signal: ctrl.signal,
    done: () => {
      cancel();
      parent.removeEventListener("abort", onAbort);
    },
    abort,
  };
}

/** The retryable error of a request `op` that got no answer within `ms`. */
export function noAnswer(backend: string, op: string, ms: number): BackendError {
  return new BackendError(`${op} got no answer within ${Math.round(ms)} ms`, { backend, retryable: true });
}

/**
 * Settles like `promise`, or rejects with `signal.reason` as soon as `signal` aborts, whichever
 * comes first (the promise goes on, its result unused, a rejection of it handled).
 */
export function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) {
      promise.catch(() => {});
      return reject(signal.reason);
    }
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
