// Signals: one that follows others (and a timeout), a bound for one backend request, waiting for an abort.
import { BackendError } from "./errors.ts";
import { MAX_DELAY, NEVER, now, timer } from "./time.ts";

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

/**
 * Set (`true`) on a backend that cannot abort a request once it is sent (a client the user
 * passes: redis, postgres): the core hands it no signal and stops waiting at the bound itself
 * ({@link Bounded.race}), which is all an abort could do there, without the cost of an
 * AbortSignal per request. Registered (`Symbol.for`), so two copies of the package agree. @internal
 */
export const RACED: unique symbol = Symbol.for("leasehold.raced");

// Workers keep a timer in the invocation that set it, and drop it when that invocation ends: one
// timer shared by the requests of two invocations would die with the first. There each request
// has a timer of its own.
const ownTimers =
  (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent === "Cloudflare-Workers";

// Every request in flight with a finite bound, earliest first: a binary heap on `at`. One timer
// serves them all, due at the earliest bound or before; it is cleared when the last one settles.
const heap: Bounded[] = [];
let due = NEVER;
let armed: ReturnType<typeof setTimeout> | undefined;

function swap(i: number, j: number): void {
  const a = heap[i]!;
  const b = heap[j]!;
  heap[i] = b;
  b.i = i;
  heap[j] = a;
  a.i = j;
}

/** Moves heap[i] up or down to its place. */
function sift(i: number): void {
  for (let p: number; i > 0 && heap[(p = (i - 1) >> 1)]!.at > heap[i]!.at; i = p) swap(i, p);
  for (let m = i; ; i = m) {
    const l = 2 * i + 1;
    if (l < heap.length && heap[l]!.at < heap[m]!.at) m = l;
    if (l + 1 < heap.length && heap[l + 1]!.at < heap[m]!.at) m = l + 1;
    if (m === i) return;
    swap(i, m);
  }
}

/** Arms the timer for the earliest bound, unless one is already due at or before it. */
function arm(): void {
  const at = heap[0]?.at ?? NEVER;
  if (at >= due) return;
  clearTimeout(armed);
  due = at;
  // Not unref'ed: the requests it bounds keep the process alive anyway; cleared with the last
  // one. A delay past what setTimeout takes fires early, and `fire` arms again.
  armed = setTimeout(fire, Math.min(at - now(), MAX_DELAY));
}

/** Aborts every request whose bound has passed (by the clock: a timer may fire early), then re-arms. */
function fire(): void {
  due = NEVER;
  const t = now();
  while (heap[0] && heap[0].at <= t) heap[0].expire();
  arm();
}

/**
 * The bound of one backend request ({@link requestSignal}): `race` its promise (or hand the
 * backend `signal`), `done()` when it settled, `abort(reason)` to end it early.
 */
export class Bounded {
  /** When the bound passes (monotonic ms), and the place in the heap (−1: not in it). @internal */
  at: number;
  /** @internal */
  i = -1;
  private ctrl: AbortController | undefined;
  private ended = false;
  private why: unknown;
  private settle: ((reason: unknown) => void) | undefined;
  private raced = false;
  private stop: (() => void) | undefined;

  constructor(
    private readonly name: string,
    private readonly op: string,
    private readonly ms: number,
    private readonly parent?: AbortSignal | undefined,
  ) {
    this.at = now() + (ms || 0); // NaN counts as 0, as for timer()
    if (ms !== NEVER) {
      if (ownTimers) this.stop = timer(ms, () => this.expire(), true);
      else {
        this.i = heap.push(this) - 1;
        sift(this.i);
        arm();
      }
    }
    if (parent?.aborted) this.abort(parent.reason);
    else parent?.addEventListener("abort", this, { once: true });
  }

  /** The request's signal, made when first read (already aborted, with the reason, if it ended). */
  get signal(): AbortSignal {
    if (!this.ctrl) {
      this.ctrl = new AbortController();
      if (this.ended) this.ctrl.abort(this.why);
    }
    return this.ctrl.signal;
  }

  /** The signal to hand `backend`: none for one the core races instead ({@link RACED}). */
  signalFor(backend: object): AbortSignal | undefined {
    if (!(backend as { [RACED]?: boolean })[RACED]) return this.signal;
    this.raced = true;
    return undefined;
  }

  /**
   * The request's `promise`, bounded: when the backend was handed no signal ({@link signalFor}),
   * settles like it or rejects with the reason as soon as the request is aborted; otherwise the
   * promise itself (the backend honours the signal).
   */
  race<T>(promise: Promise<T>): Promise<T> {
    if (!this.raced) return promise;
    return new Promise<T>((resolve, reject) => {
      promise.then(resolve, reject);
      if (this.ended) reject(this.why);
      else this.settle = reject;
    });
  }

  /** The request settled: its bound and its listener go. */
  done(): void {
    this.stop?.();
    const i = this.i;
    if (i >= 0) {
      this.i = -1;
      const last = heap.pop()!;
      if (last !== this) {
        heap[i] = last;
        last.i = i;
        sift(i);
      }
      if (!heap.length) {
        clearTimeout(armed);
        due = NEVER;
      }
    }
    this.parent?.removeEventListener("abort", this);
  }

  /** Ends the request early with `reason` (the first reason stays). */
  abort(reason: unknown): void {
    if (!this.ended) {
      this.ended = true;
      this.why = reason;
    }
    // Ended early: the bound goes too (a backend that ignores the signal must not keep it armed).
    this.done();
    this.ctrl?.abort(this.why);
    this.settle?.(this.why);
  }

  /** The bound passed: aborts with a retryable "no answer" error. @internal */
  expire(): void {
    this.abort(noAnswer(this.name, this.op, this.ms));
  }

  /** The parent signal aborted (an EventListener object: no closure per request). @internal */
  handleEvent(): void {
    this.abort(this.parent!.reason);
  }
}

/**
 * The bound of one backend request: aborts with `parent`, or `ms` after now with a retryable
 * "no answer" {@link BackendError} (never later than that, but for the timer's own lateness).
 * Call `done()` afterwards. Made for every request, so it stays cheap: no timer of its own (one
 * timer serves every request in flight; on Workers each has one), no AbortSignal until `signal`
 * is read, at most one listener (on `parent`).
 */
export function requestSignal(backend: string, op: string, ms: number, parent?: AbortSignal): Bounded {
  return new Bounded(backend, op, ms, parent);
}

/** The retryable error of a request `op` that got no answer within `ms`. */
export function noAnswer(backend: string, op: string, ms: number): BackendError {
  return new BackendError(`${op} got no answer within ${Math.round(ms)} ms`, { backend, retryable: true });
}

/**
 * Settles like `promise`, or rejects with `signal.reason` as soon as `signal` aborts, whichever
 * comes first (the promise goes on, its result unused).
 */
export function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
