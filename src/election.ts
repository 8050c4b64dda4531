// Leader election over a mutex: the lead loop, leadership changes, health. Its own function, so an
// app that only locks does not ship it.

import type { Lease } from "./lease.ts";
import type { Mutex } from "./mutex.ts";
import { check, checkFunction, checkMs, checkSignal, cores, optionsOf } from "./options.ts";
import { aborted, linkedSignal } from "./signals.ts";
import { sleep, within } from "./time.ts";
import { campaignDelay } from "./timing.ts";

/**
 * A change in leadership, as {@link Election.watch} reports it.
 * - `elected`: this mutex's `lead` loop became leader, with this token.
 * - `deposed`: this mutex's `lead` loop stopped leading (lost, task ended, or shutting down).
 * - `leader`: the holder seen on the backend changed (null: nobody). Advisory: read by polling,
 *   it may be stale by the time you see it and may skip short terms.
 */
export type LeadershipChange =
  | { type: "elected"; owner: string; token: number }
  | { type: "deposed"; owner: string; token: number; reason: unknown }
  | { type: "leader"; leader: { owner: string; token: number } | null };

/** Options of {@link Election.lead}. */
export interface LeadOptions {
  /** Stops the loop: the task's signal aborts, the lease is released, `lead` resolves. */
  signal?: AbortSignal;
  /**
   * Called with every error of the loop: a task that threw, a backend that failed or did not
   * answer while campaigning (each retryable failure, as it happens), a failed release. Default:
   * `console.error`. The loop goes on after a backoff. When `onError` itself throws, the loop
   * stops as if `signal` aborted (the task's signal aborts, the lease is released) and `lead`
   * then rejects with that error.
   */
  onError?: (error: unknown) => void;
  /**
   * After `signal` aborts, how long to wait for the task to settle before releasing the lease
   * anyway, in ms (the task's signal is aborted by then, so it is no longer the holder).
   * Default: the mutex's `stopMargin`.
   */
  stopTimeout?: number;
}

/** What {@link Election.health} reports. */
export interface Health {
  /**
   * false when this instance believes it leads but its local deadline has passed, or when its
   * `lead` loop is campaigning and the backend's latest answer was a failure (or none).
   */
  healthy: boolean;
  /** Whether the `lead` loop holds a lease whose signal is not aborted. */
  leading: boolean;
  /** ms until the leader's local deadline, when leading. */
  msLeft?: number;
  /** Why it is unhealthy. */
  reason?: string;
}

/** Options of {@link Election.watch}. */
export interface WatchOptions {
  /** Ends the iteration. */
  signal?: AbortSignal;
  /** How often to read the current holder from the backend, in ms. Default: the mutex's `retryDelay`. */
  interval?: number;
}

/** Leader election on one {@link Mutex}. Create it with {@link createElection}. */
export interface Election {
  /**
   * The election loop: campaign (wait for the lock), run `task` with a signal that aborts when
   * the lease is lost or `options.signal` aborts, release when the task ends or the lease is
   * lost, and, after a pause of about the mutex's `retryDelay` (so waiting followers get their
   * turn), campaign again, until `options.signal` aborts. A task that throws is reported to
   * `onError` and the loop goes on. Resolves only after the last task has settled and its lease
   * is released.
   */
  lead(task: (signal: AbortSignal, lease: Lease) => unknown, options?: LeadOptions): Promise<void>;
  /** Whether this election's `lead` loop holds a lease whose signal has not aborted. */
  readonly isLeader: boolean;
  /**
   * This instance's view of its own leadership: unhealthy when it believes it leads but its
   * local deadline has passed (a stalled event loop). Wire it to a liveness probe.
   */
  health(): Health;
  /**
   * An async iterator of leadership changes: this instance elected or deposed (exact; up to 1 024
   * unread are kept), and the holder seen on the backend, polled every `interval` ms (advisory: it
   * may be stale and may skip short terms). Ends when `options.signal` aborts or the loop breaks.
   */
  watch(options?: WatchOptions): AsyncIterableIterator<LeadershipChange>;
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

const report = (error: unknown): void => console.error("[leasehold] lead:", error);

/**
 * Leader election on `mutex`: every instance runs the same `lead` loop; one leads at a time, and
 * a follower takes over within one ttl when the leader dies, or about one `retryDelay` after it
 * stops. Create one election per mutex (its `isLeader`, `health()` and `watch()` report that
 * election's own `lead` loop).
 *
 * @param mutex The lock to campaign for, from {@link createMutex}.
 * @returns An {@link Election}. Creating it does no I/O.
 * @throws {TypeError} When `mutex` is not a Mutex.
 *
 * @example Run a job on the leader only
 * ```ts
 * import { createElection, createMutex } from "leasehold";
 * import { memory } from "leasehold/memory";
 *
 * declare function consume(signal: AbortSignal): Promise<void>; // your job
 *
 * const election = createElection(createMutex(memory(), { name: "billing-consumer" }));
 * await election.lead((signal) => consume(signal), { signal: AbortSignal.timeout(60_000) });
 * ```
 */
export function createElection(mutex: Mutex): Election {
  const m = mutex;
  // The mutex's checked options (retryDelay, stopMargin, its onEvent's emitter), which it keeps
  // to itself; a Mutex that createMutex did not make has none.
  const c = cores.get(m);
  check(c !== undefined, "createElection:", "mutex must be a Mutex from createMutex");
  const listeners = new Set<(change: LeadershipChange) => void>();
  const emit = (change: LeadershipChange): void => {
    for (const listener of listeners) listener(change);
  };
  // The mutex's onEvent observer, if any, hears of leadership too.
  const note = c.emit;
  let current: Lease | undefined;
  /** The failure of the latest campaign attempt, cleared when the backend answers. */
  let failing: unknown;
  const backoff = (signal?: AbortSignal) => sleep(campaignDelay(c.retryDelay), signal).catch(() => {});

  return {
    get isLeader() {
      return current !== undefined && !current.signal.aborted;
    },

    health() {
      if (!current || current.signal.aborted) {
        return failing === undefined
          ? { healthy: true, leading: false }
          : {
              healthy: false,
              leading: false,
              reason: `campaigning, but the backend fails: ${messageOf(failing)}`,
            };
      }
      const msLeft = current.expiresAt - Date.now();
      return msLeft > 0
        ? { healthy: true, leading: true, msLeft }
        : {
            healthy: false,
            leading: true,
            msLeft,
            reason: `leading ${-msLeft} ms past the local deadline: the event loop is stalled or timers are not running`,
          };
    },

    async lead(task, options) {
      const o = optionsOf("lead", options);
      check(typeof task === "function", "lead:", "task must be a function");
      checkSignal("lead", o.signal);
      checkFunction("lead", "onError", o.onError);
      checkMs("lead", "stopTimeout", o.stopTimeout, true);
      const { onError = report, stopTimeout = c.stopMargin } = o;
      // The loop's own stop: the caller's signal, or an onError that threw.
      const stop = new AbortController();
      const end = linkedSignal([o.signal, stop.signal]);
      const signal = end.signal;
      let thrown: { error: unknown } | undefined;
      const tell = (error: unknown): void => {
        if (thrown) return;
        try {
          onError(error);
        } catch (fatal) {
          thrown = { error: fatal };
          stop.abort(fatal);
        }
      };
      const campaignError = (error: unknown): void => {
        failing = error;
        tell(error);
      };
      try {
        while (!signal.aborted) {
          let lease: Lease;
          try {
            lease = await m.acquire({ signal, onError: campaignError });
          } catch (error) {
            if (signal.aborted) break;
            campaignError(error);
            await backoff(signal);
            continue;
          }
          failing = undefined;
          current = lease;
          emit({ type: "elected", owner: lease.owner, token: lease.token });
          note?.({ type: "elected", token: lease.token });
          const scope = linkedSignal([lease.signal, signal]);
          const settled = (async () => task(scope.signal, lease))().then(
            () => false,
            (error: unknown) => {
              // Rejecting with the signal's own reason is how a task says "I stopped as asked".
              if (!(scope.signal.aborted && error === scope.signal.reason)) tell(error);
              return true;
            },
          );
          // Wait for the task to end, or for the lease to be lost, or, on shutdown, for the task to
          // stop within stopTimeout; then release, so that a follower can lead.
          const ended = await Promise.race([settled, aborted(scope.signal).then(() => undefined)]);
          if (ended === undefined && !lease.signal.aborted) await within(settled, stopTimeout);
          current = undefined;
          await lease.release().catch(tell);
          scope.done();
          emit({ type: "deposed", owner: lease.owner, token: lease.token, reason: lease.signal.reason });
          note?.({ type: "deposed", token: lease.token });
          // Never campaign again (or return) while this instance's task still runs. Then pause about
          // retryDelay, whether the task threw or returned: waiting followers get their turn, and a
          // task that returns at once cannot spin the loop.
          await settled;
          if (signal.aborted) break;
          await backoff(signal);
        }
      } finally {
        failing = undefined;
        end.done();
      }
      if (thrown) throw thrown.error;
    },

    watch(options) {
      const { signal, interval = c.retryDelay } = optionsOf("watch", options);
      checkSignal("watch", signal);
      checkMs("watch", "interval", interval);
      const stop = new AbortController();
      const end = linkedSignal([stop.signal, signal]);
      const queue: LeadershipChange[] = [];
      const waiters: (() => void)[] = [];
      const wake = (): void => {
        for (const resolve of waiters.splice(0)) resolve();
      };
      const push = (change: LeadershipChange): void => {
        // Consecutive reads of the backend collapse into the newest one; for a consumer that falls
        // behind, older reads go first. This instance's elected/deposed are kept (up to 1 024).
        if (change.type === "leader" && queue.at(-1)?.type === "leader") queue.pop();
        queue.push(change);
        if (queue.length > 64) {
          const oldRead = queue.findIndex((c) => c.type === "leader");
          if (oldRead >= 0 && oldRead < queue.length - 1) queue.splice(oldRead, 1);
          else if (queue.length > 1_024) queue.shift();
        }
        wake();
      };
      listeners.add(push);
      end.signal.addEventListener(
        "abort",
        () => {
          listeners.delete(push);
          end.done();
          wake();
        },
        { once: true },
      );
      (async () => {
        let seen: string | undefined;
        while (!end.signal.aborted) {
          try {
            const leader = await m.holder({ signal: end.signal });
            const key = leader ? `${leader.token}` : "none";
            if (key !== seen) {
              seen = key;
              push({ type: "leader", leader });
            }
          } catch {
            // Advisory reads: a failed poll is retried at the next interval.
          }
          await sleep(Math.max(interval, 1), end.signal).catch(() => {});
        }
      })();
      const iterator: AsyncIterableIterator<LeadershipChange> = {
        async next() {
          while (queue.length === 0 && !end.signal.aborted) {
            await new Promise<void>((resolve) => waiters.push(resolve));
          }
          const value = queue.shift();
          return value ? { value, done: false } : { value: undefined, done: true };
        },
        async return() {
          stop.abort();
          return { value: undefined, done: true };
        },
        [Symbol.asyncIterator]() {
          return iterator;
        },
      };
      return iterator;
    },
  };
}
