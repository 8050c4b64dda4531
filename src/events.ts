// Lock events: the type an `onEvent` observer receives, and the one helper that calls it. Every
// emission site reads `emit?.({ ... })`: without an observer `emit` is undefined, so the event
// object is never built (optional calls skip their arguments) and nothing else runs.
import { now } from "./time.ts";
import type { LockMode } from "./types.ts";

/**
 * What an event says, by `type` (all durations in ms on the monotonic clock, fractional):
 * - `acquiring`: `acquire()` (or `run()`) started waiting for the lock.
 * - `attempt`: one acquire request answered, or failed, after `latency` ms; `attempt` counts from
 *   1 within one `acquire()` (always 1 for `tryAcquire()`). `outcome` is `granted` (with the
 *   lease's `token`), `taken` (someone else holds it; `retryAfter`: ms until the holder's lease
 *   expires, when the backend says; a grant answered too late to be used counts as taken, with
 *   `retryAfter` 0), `done` (`runOnce`: the fire is recorded as done; `token`: its runner's), or
 *   `error` (`code` and `retryable`; see {@link LockEventCode}). `runOnce`'s events carry the
 *   mutex's name, not the fire's key.
 * - `acquired`: a lease was taken, after `waited` ms since the acquire started and `attempts`
 *   attempts (also for `tryAcquire()`); `mode`: `"shared"` or `"exclusive"` (a permit's).
 * - `acquire-failed`: `acquire()` rejected after `waited` ms and `attempts` attempts: `code` is
 *   `ERR_LOCK_TIMEOUT` after its timeout, the `BackendError`'s code when one was not retryable, or
 *   the abort reason's code or name (`AbortError`, `TimeoutError`) when its signal aborted.
 * - `renewed`: a renewal succeeded after `latency` ms; `margin`: ms left to the new local deadline.
 * - `renew-failed`: a renewal failed (`code`, `retryable`); `margin`: ms left to the local deadline,
 *   by which a renewal must succeed or the lease is lost. Not emitted when the renewal showed the
 *   lease lost: `lost` says so.
 * - `lost`: the lease was lost; its signal aborted with a `LeaseLostError`. `reason`: `deadline`
 *   (the local deadline passed without a successful renewal), `late` (a renewal was answered only
 *   after the deadline), `gone` (the backend says the lock is no longer ours: it expired there or
 *   someone else holds it), `stalled` (the event loop stalled past `stopMargin`; the lease is
 *   released too).
 * - `released`: `release()` (or `await using`) ended a lease that was not lost, `held` ms after its
 *   acquire request was sent; the release request follows. Each lease ends with exactly one
 *   `lost` or `released`.
 * - `elected` / `deposed`: a {@link createElection} `lead` loop on this mutex became leader with
 *   the lease `token`, or stopped leading (after the lease's `lost` or `released`).
 */
export type LockEventBody =
  | { type: "acquiring" }
  | ({ type: "attempt"; attempt: number; latency: number } & (
      | { outcome: "granted"; token: number }
      | { outcome: "taken"; retryAfter: number | undefined }
      | { outcome: "done"; token: number }
      | { outcome: "error"; code: LockEventCode; retryable: boolean }
    ))
  | { type: "acquired"; token: number; waited: number; attempts: number; mode: LockMode }
  | { type: "acquire-failed"; waited: number; attempts: number; code: LockEventCode }
  | { type: "renewed"; token: number; latency: number; margin: number }
  | { type: "renew-failed"; token: number; code: LockEventCode; retryable: boolean; margin: number }
  | { type: "lost"; token: number; reason: LossReason }
  | { type: "released"; token: number; held: number }
  | { type: "elected"; token: number }
  | { type: "deposed"; token: number };

/** Why a lease was lost, in a `lost` event: see {@link LockEventBody}. */
export type LossReason = "deadline" | "late" | "gone" | "stalled";

/**
 * What an error is, in an event: the stable `code` of a leasehold error (`ERR_BACKEND`,
 * `ERR_BACKEND_AUTH`, `ERR_LOCK_TIMEOUT`, …), else the error's own string `code`, else its `name`
 * (`AbortError`, `TimeoutError`, `TypeError`), else `"unknown"`. Never a message: messages may
 * quote a URL or a reply.
 */
export type LockEventCode = string;

/**
 * An event reported to the `onEvent` observer of {@link createMutex}: the lock `name`, this
 * mutex's `owner`, `at` (monotonic ms, `performance.now()`, when it happened) and the fields of
 * its `type` (see {@link LockEventBody}). Events carry names, owners, tokens, codes and numbers,
 * never an error message, a URL or a credential.
 */
export type LockEvent = { name: string; owner: string; at: number } & LockEventBody;

/** Reports one event, without `name`, `owner` and `at` (the emitter adds them). @internal */
export type Emit = (event: LockEventBody) => void;

/**
 * The emitter for an observer, or `undefined` when there is none (so that `emit?.({...})` builds
 * nothing). An observer that throws is ignored: the lock goes on. @internal
 */
export function emitter(
  onEvent: ((event: LockEvent) => void) | undefined,
  name: string,
  owner: string,
): Emit | undefined {
  return (
    onEvent &&
    ((event) => {
      try {
        // Completed in place (each emit passes a fresh object), not copied: on V8 a spread of
        // events of several kinds takes the slow path, 4 µs per event where this takes 0.2
        // (issue 29).
        onEvent(Object.assign(event, { name, owner, at: now() }));
      } catch {}
    })
  );
}

/** The {@link LockEventCode} of `error`. @internal */
export function codeOf(error: unknown): LockEventCode {
  const e = error as { code?: unknown; name?: string } | undefined;
  return (typeof e?.code === "string" ? e.code : e?.name) ?? "unknown";
}

/** An event's `code` and `retryable` for a failed request (retryable: a retryable `BackendError`). @internal */
export function failure(error: unknown): { code: LockEventCode; retryable: boolean } {
  return {
    code: codeOf(error),
    retryable: (error as { retryable?: unknown } | undefined)?.retryable === true,
  };
}
