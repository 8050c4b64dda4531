// Every timing formula of the core in one place: the guard, the stop margin's default, renewal,
// backoff, the election's pause and request bounds. docs/DESIGN.md §4 says why each is what it
// is; tests import these instead of recomputing them.
import { jitter } from "./time.ts";

/** The default stop margin: min(1 000 ms, ttl / 5). */
export function defaultStopMargin(ttl: number): number {
  return Math.min(1_000, ttl / 5);
}

/**
 * How long before `t_send + ttl` the local deadline falls: 1 % of the ttl for clock-rate
 * differences, 2 ms for timer granularity, and the stop margin for the holder to wind down.
 */
export function guardOf(ttl: number, stopMargin: number): number {
  return Math.ceil(0.01 * ttl) + 2 + stopMargin;
}

/** How far a background renewal's delay strays from ttl / 3: ±10 %. */
const RENEWAL_SPREAD = 0.1;

/** The next background renewal: every ttl / 3, jittered by ±10 %. */
export function renewalDelay(ttl: number): number {
  return jitter(ttl / 3, RENEWAL_SPREAD);
}

/**
 * The earliest and the latest {@link renewalDelay} of a lease of `ttl`: ttl / 3 − 10 % and
 * ttl / 3 + 10 %. For tests that wait for a renewal, or stop just before one.
 */
export function renewalWindow(ttl: number): { earliest: number; latest: number } {
  return { earliest: (ttl / 3) * (1 - RENEWAL_SPREAD), latest: (ttl / 3) * (1 + RENEWAL_SPREAD) };
}

/**
 * The first background renewal of a lease: anywhere from 10 % to 110 % of ttl / 3 after its
 * acquire was sent, never later than {@link renewalDelay} allows. Leases acquired together (a
 * service taking its thousands at start) so renew spread over a whole period from the start,
 * rather than together ever after with only ±10 % between them.
 */
export function firstRenewalDelay(ttl: number): number {
  return (ttl / 3) * (0.1 + Math.random());
}

/**
 * When a lease whose deadline is `deadline` renews next: `delay` (default ttl / 3 ± 10 %) after
 * the send time of the request that set that deadline (deadline − (ttl − guard)), not after its
 * reply, and never before `at` (now). A grant that arrived late (a hand-over late in a held
 * request, a slow reply) thus renews at once rather than after its deadline.
 */
export function renewalAt(
  deadline: number,
  ttl: number,
  guard: number,
  at: number,
  delay: number = renewalDelay(ttl),
): number {
  return Math.max(at, deadline - (ttl - guard) + delay);
}

/**
 * `at` moved back onto the grid of min(200 ms, ttl / 50) on the monotonic clock: a batched lease's
 * renewal comes up to that much early, never late, and the leases of one backend due in one cell
 * of the grid renew together (one wake-up of the event loop, one request).
 */
export function onGrid(at: number, ttl: number): number {
  return at - (at % Math.min(200, ttl / 50));
}

/** The time a renewal request may take: min(ttl / 5, time left to the deadline). */
export function renewalBound(ttl: number, left: number): number {
  return Math.min(ttl / 5, left);
}

/** The time a release or an inspect request may take: max(ttl / 5, 1 s). */
export function quietBound(ttl: number): number {
  return Math.max(ttl / 5, 1_000);
}

/**
 * How often, at most, `acquire()` without `onError` prints that its backend keeps failing: the
 * first failure at once, then one line per 30 s (docs/DESIGN.md §4.7). Never a flood.
 */
export const FAILURE_REPORT_INTERVAL = 30_000;

/** Exponential backoff: 25 ms doubling with each failure, never above `cap`. */
export function backoff(failures: number, cap: number): number {
  return Math.min(cap, 25 * 2 ** Math.min(failures, 30));
}

/** The pause between two acquire attempts: the backoff capped by retryDelay, jittered into [0.6, 1]×. */
export function waitDelay(failures: number, retryDelay: number): number {
  return jitter(0.8 * backoff(failures, retryDelay), 0.25);
}

/**
 * The pause of an election's `lead` loop after a term, or after a campaign that failed: about
 * the mutex's `retryDelay` (at least 1 ms), jittered by ±25 %, so that waiting followers get
 * their turn and a task that returns at once cannot spin the loop (docs/DESIGN.md §8).
 */
export function campaignDelay(retryDelay: number): number {
  return jitter(Math.max(retryDelay, 1), 0.25);
}

/** The pause after a failed renewal: the backoff capped by ttl / 10, jittered by ±10 %. */
export function renewalRetryDelay(failures: number, ttl: number): number {
  return jitter(backoff(failures, ttl / 10), 0.1);
}

/**
 * How long a contender must see a holder's record version unchanged before taking the lock over
 * on a store without expiry (docs/DESIGN.md §14): the holder's ttl plus the clock-rate margin of
 * the guard, ceil(1 % of ttl) + 2 ms. The holder's deadline lies at least that margin before.
 */
export function observedWait(ttl: number): number {
  return ttl + guardOf(ttl, 0);
}

/**
 * How long a backend with `acquireQueued` may hold one waiting request open: min(ttl / 4, 10 s),
 * and never past `left` (the time to the caller's timeout). Well below the attempt's own bound
 * (ttl − guard > ttl / 2), so the answer, or the hand-over, arrives within it.
 */
export function queueHold(ttl: number, left: number): number {
  return Math.floor(Math.min(ttl / 4, 10_000, left));
}
