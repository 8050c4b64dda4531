// Signals: one that follows others (and a timeout), a bound for one backend request, waiting for an abort.
import { BackendError } from "./errors.ts";
import { MAX_DELAY, NEVER, now, timer } from "./time.ts";

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
// has a timer of its own, and leases renew alone (src/lease.ts). @internal
export const ownTimers: boolean =
  (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent === "Cloudflare-Workers";

// Every request in flight with a finite bound (unordered: a request leaves by swapping with the
// last). One timer serves them all: due at the earliest bound or before (a request that settles
// leaves it armed; when it fires, it aborts the requests whose bound has passed and is armed for
// the earliest left), cleared when the last request settles.
const live: Bounded[] = [];
let due = NEVER;
let armed: ReturnType<typeof setTimeout> | undefined;

/** Arms the timer for `at`, unless it is due by then already. */
function arm(at: number): void {
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
  // From the end: a request that leaves swaps in one already seen.
  for (let i = live.length; i--; ) if (live[i] && live[i]!.at <= t) live[i]!.expire();
  let next = NEVER;
  for (const b of live) next = Math.min(next, b.at);
  arm(next);
}

/**
 * The bound of one backend request ({@link requestSignal}): hand the backend `signalFor(backend)`
 * and wait for `race(its promise)`, `done()` when it settled, `abort(reason)` to end it early.
 */
export class Bounded {
  /** When the bound passes (monotonic ms), and the place in `live` (−1: not in it). @internal */
  at: number;
  /** @internal */
  i = -1;
  #ctrl: AbortController | undefined;
  #ended = false;
  #why: unknown;
  #settle: ((reason: unknown) => void) | undefined;
  #raced = false;
  #stop: (() => void) | undefined;
  #reason: () => unknown;
  #parents: readonly (AbortSignal | undefined)[];

  /** Aborts as soon as one of `parents` aborts (with its reason), or after `ms` with `reason()`. */
  constructor(parents: readonly (AbortSignal | undefined)[], ms: number, reason: () => unknown) {
    this.#reason = reason;
    this.#parents = parents;
    this.at = now() + (ms || 0); // NaN counts as 0, as for timer()
    if (ms !== NEVER) {
      if (ownTimers) this.#stop = timer(ms, () => this.expire(), true);
      else {
        this.i = live.push(this) - 1;
        arm(this.at);
      }
    }
    // The first parent found aborted gives the reason.
    for (const p of parents)
      if (p?.aborted) this.abort(p.reason);
      else p?.addEventListener("abort", this, { once: true });
  }

  /** The request's signal, made when first read (already aborted, with the reason, if it ended). */
  get signal(): AbortSignal {
    if (!this.#ctrl) {
      this.#ctrl = new AbortController();
      if (this.#ended) this.#ctrl.abort(this.#why);
    }
    return this.#ctrl.signal;
  }

  /** The signal to hand `backend`: none for one the core races instead ({@link RACED}). */
  signalFor(backend: object): AbortSignal | undefined {
    if (!(backend as { [RACED]?: boolean })[RACED]) return this.signal;
    this.#raced = true;
    return undefined;
  }

  /**
   * The request's `promise`, bounded: when the backend was handed no signal ({@link signalFor}),
   * settles like it or rejects with the reason as soon as the request is aborted; otherwise the
   * promise itself (the backend honours the signal). `always`: races whatever the backend got.
   */
  race<T>(promise: Promise<T>, always?: boolean): Promise<T> {
    return !(always || this.#raced)
      ? promise
      : new Promise<T>((resolve, reject) => {
          promise.then(resolve, reject);
          if (this.#ended) reject(this.#why);
          else this.#settle = reject;
        });
  }

  /** The request settled: its bound and its listener go. */
  done(): void {
    this.#stop?.();
    const i = this.i;
    if (i >= 0) {
      this.i = -1;
      const last = live.pop()!;
      if (last !== this) {
        live[i] = last;
        last.i = i;
      }
      if (!live.length) {
        clearTimeout(armed);
        due = NEVER;
      }
    }
    for (const p of this.#parents) p?.removeEventListener("abort", this);
  }

  /** Ends the request early with `reason` (the first reason stays). */
  abort(reason: unknown): void {
    if (!this.#ended) {
      this.#ended = true;
      this.#why = reason;
    }
    // Ended early: the bound goes too (a backend that ignores the signal must not keep it armed).
    this.done();
    this.#ctrl?.abort(this.#why);
    this.#settle?.(this.#why);
  }

  /** The bound passed: aborts with `reason()`. @internal */
  expire(): void {
    this.abort(this.#reason());
  }

  /** A parent aborted (an EventListener object: no closure per request). @internal */
  handleEvent(event: Event): void {
    this.abort((event.target as AbortSignal).reason);
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
  return new Bounded([parent], ms, () => noAnswer(backend, op, ms));
}

/**
 * An AbortSignal that aborts as soon as any of `parents` aborts (with its reason) or, when `ms`
 * is finite, after `ms` (with `reason()`). Call `done()` when finished so no timer or listener stays.
 */
export function linkedSignal(
  parents: readonly (AbortSignal | undefined)[],
  ms: number = NEVER,
  reason: () => unknown = () => undefined,
): { signal: AbortSignal; done: () => void } {
  const b = new Bounded(parents, ms, reason);
  return { signal: b.signal, done: () => b.done() };
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
  const b = new Bounded([signal], NEVER, () => {});
  return b.race(promise, true).finally(() => b.done());
}
