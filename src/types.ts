// The public option types that createMutex and createSemaphore share (and options.ts checks), apart
// from both so that the option checks, the engine and the two faces all import them one way.
import type { LockEvent } from "./events.ts";

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

/** Options of `acquire` and `run`: a mutex's ({@link MutexAcquireOptions} adds the mode) and a semaphore's. */
export interface AcquireOptions {
  /** Aborts the wait; `acquire` then rejects with `signal.reason`. */
  signal?: AbortSignal;
  /**
   * Give up after this many ms and reject with a {@link LockTimeoutError}. A number ≥ 0;
   * default: wait until the signal aborts. A positive timeout bounds the whole wait, requests in
   * flight included. `0` means "do not wait": exactly one attempt, bounded like `tryAcquire()`'s,
   * that takes a free lock and rejects with the timeout error when it is taken. When the backend
   * failed or never answered since its last answer, the timeout's `cause` is that
   * {@link BackendError}, and its message quotes it.
   */
  timeout?: number;
  /**
   * Called with each retryable failure while waiting (a network error, a 5xx, no answer within
   * the attempt's bound); the wait goes on. When it throws, `acquire` rejects with that error.
   * With it, the caller decides alone and nothing is printed. Without it, a failure that is
   * retried is printed with `console.error` (one line naming the backend, the lock and the
   * error, no secret): the first at once, then at most one line every 30 s while the failures go
   * on. Either way the last failure is the `cause` of a timeout.
   */
  onError?: (error: unknown) => void;
}

/** A lease's mode: `"exclusive"` (one lease per name) or `"shared"` (readers beside readers; docs/DESIGN.md §18). */
export type LockMode = "shared" | "exclusive";

/** The mode option of a mutex's `acquire`, `tryAcquire` and `run`. */
export interface ModeOption {
  /**
   * `"exclusive"` (the default) or `"shared"`: any number of shared leases, or one exclusive
   * lease, per name at any instant. Once an exclusive `acquire` waits, new shared requests wait
   * behind it. `"shared"` needs a backend that can hold shared leases (`capabilities(backend).shared`);
   * another refuses it at the call with a TypeError naming the backend (docs/DESIGN.md §18).
   */
  mode?: LockMode;
}

/** Options of {@link Mutex.acquire} and {@link Mutex.run}: {@link AcquireOptions} and the mode. */
export interface MutexAcquireOptions extends AcquireOptions, ModeOption {}
