// runOnce: a scheduled job runs once per fire across the fleet (docs/DESIGN.md §17). A face over
// the engine (engine.ts), like mutex.ts: one attempt, or acquire()'s wait with `standby`, on the
// fire's own key; the backend's optional `complete` (FireRecord) records the fire as done.
import type { Backend, CompleteRequest, FireHolder } from "./backend.ts";
import { isLease, keyAttempt, observe, runWith, waitFor } from "./engine.ts";
import { BackendError, LeaseLostError } from "./errors.ts";
import { type Lease, quietRequest } from "./lease.ts";
import type { Mutex } from "./mutex.ts";
import {
  type Core,
  check,
  checkBackendRange,
  checkFunction,
  checkMs,
  checkSignal,
  cores,
  isNumber,
  kind,
  optionsOf,
  textProblem,
} from "./options.ts";
import { MAX_DELAY, now, sleep, within } from "./time.ts";
import { backoff, quietBound } from "./timing.ts";

/** What identifies one fire: epoch ms (a safe integer), a valid Date, or a string id. */
export type Fire = number | Date | string;

/** Options of {@link runOnce}. */
export interface OnceOptions {
  /**
   * How long the record of a completed fire lasts, in ms: an integer from 1 to 2 147 483 647
   * (about 24.8 days). While it lasts, every `runOnce` of that fire answers `ran: false` at once.
   * Default 86 400 000 (24 h): instances that fire one tick seconds to hours apart (clock skew,
   * roll-outs, a host that was down) still find it, and so do daily cron jobs. Keep it longer than
   * the spread of your instances' fires, and shorter than the time after which the same fire id
   * should run again.
   */
  retain?: number;
  /**
   * When the fire is running elsewhere: `false` (default) answers `ran: false, reason: "running"`
   * at once; `true` waits until it is done (then `ran: false, reason: "done"`) or its runner's
   * lease is lost (then runs it here, with a greater token).
   */
  standby?: boolean;
  /** With `standby`: the longest wait in ms, after which it rejects with `LockTimeoutError`. */
  timeout?: number;
  /**
   * With `standby`: called with each retryable failure while waiting, as `Mutex.acquire`'s
   * `onError` is; with it nothing is printed, without it a retried failure is printed with
   * `console.error` (the first at once, then at most every 30 s).
   */
  onError?: (error: unknown) => void;
  /**
   * Aborts taking the fire's lock (the attempt, or the standby's wait), as `mutex.run`'s does; once
   * `fn` runs, stop it through the lease's signal or your own.
   */
  signal?: AbortSignal;
}

/** What {@link runOnce} resolves. */
export type OnceResult<T> =
  | {
      /** `fn` ran here and the fire is recorded as done. */
      ran: true;
      /** What `fn` resolved. */
      value: T;
      /** The fencing token of the lease `fn` ran under. */
      token: number;
    }
  | {
      /** `fn` did not run here. */
      ran: false;
      /** `"done"`: the fire completed (here or elsewhere) within `retain`; `"running"`: it runs elsewhere now. */
      reason: "done" | "running";
      /** With `"done"`: who completed it, and its lease's token. */
      by?: FireHolder;
    };

/** The default `retain`: 24 hours. */
const DAY = 86_400_000;
/** The longest fire string, in UTF-16 code units. */
const MAX_FIRE = 128;
/** The longest lock key (a lock name's limit). */
const MAX_KEY = 255;
/**
 * A fire id's characters kept as they are in the key; any other (`:` too, so the key's last
 * `:fire:` is where the name ends, src/slots.ts counterOf, and an id never makes the key look like
 * a semaphore's slot) is `+` and its UTF-8 bytes in hex.
 */
const PLAIN = /[A-Za-z0-9_@-]/;

const FIRE_RULE = `fire must be an integer number of epoch ms, a valid Date, or a string of 1-${MAX_FIRE} characters (UTF-16 code units) of well-formed Unicode without control characters`;

/**
 * The canonical id of `fire`: a number and a Date as the epoch ms in decimal (so a Date and its
 * number name the same fire), a string as it is. Throws a TypeError or RangeError naming what is
 * valid. @internal
 */
export function fireId(fire: unknown): string {
  const at = "runOnce:";
  if (typeof fire === "number") {
    check(Number.isSafeInteger(fire), at, `${FIRE_RULE}, got the number ${fire}`, RangeError);
    return String(fire);
  }
  if (fire instanceof Date) {
    const ms = fire.getTime();
    check(Number.isSafeInteger(ms), at, `${FIRE_RULE}, got an invalid Date`, RangeError);
    return String(ms);
  }
  check(typeof fire === "string", at, `${FIRE_RULE}, got ${kind(fire)}`);
  const wrong = textProblem(fire, MAX_FIRE);
  check(wrong === undefined, at, `${FIRE_RULE}, got ${wrong}`, RangeError);
  return fire as string;
}

const hex = (bytes: Uint8Array): string =>
  Array.from(bytes, (b) => b.toString(16).toUpperCase().padStart(2, "0")).join("");

/**
 * The lock key of `fire` for the mutex named `name`: `name:fire:<id>`, the id's characters other
 * than letters, digits and `_ @ -` written as `+` and their UTF-8 bytes in hex (so the key is a
 * valid lock name, two ids never share a key, and the id holds no `:`). When that is longer than 255 characters (a
 * lock name's limit), `name:fire@<SHA-256 of the id, hex>`; a name too long for that is a
 * RangeError. @internal
 */
export async function fireKey(name: string, fire: unknown): Promise<string> {
  const id = fireId(fire);
  const utf8 = new TextEncoder();
  let plain = "";
  for (const c of id) plain += PLAIN.test(c) ? c : `+${hex(utf8.encode(c)).replace(/(..)(?!$)/g, "$1+")}`;
  const key = `${name}:fire:${plain}`;
  if (key.length <= MAX_KEY) return key;
  const hashed = `${name}:fire@${hex(new Uint8Array(await crypto.subtle.digest("SHA-256", utf8.encode(id))))}`;
  check(
    hashed.length <= MAX_KEY,
    "runOnce:",
    `the mutex's name must be at most ${MAX_KEY - (hashed.length - name.length)} characters for a fire id whose key is longer than ${MAX_KEY}, got ${name.length}`,
    RangeError,
  );
  return hashed;
}

/** Ends a standby's wait when it finds the fire done (waitFor rethrows it at once). */
class FireDone extends Error {
  readonly code = "done";
  constructor(readonly by: FireHolder) {
    super("the fire is done");
  }
}

/**
 * Runs `fn` once for `fire` across every instance that calls it with the same mutex name and
 * fire: the first to take the fire's own lock (a key derived from the mutex's name and the fire)
 * runs `fn(signal, lease)` under a lease renewed and fenced like any other, and on success the
 * backend replaces that lease with a record of the completed fire, kept `retain` ms. A call that
 * finds the record answers `{ ran: false, reason: "done", by }` in one request; one that finds
 * the fire running answers `{ ran: false, reason: "running" }`, or with `standby: true` waits
 * until it is done or its runner's lease is lost (a crash, a partition, a pause), and then runs
 * it itself with a greater token.
 *
 * When `fn` throws or its lease is lost, the fire is not recorded: a standby or a later call runs
 * it again. A record that fails retryably is sent again until the lease's deadline. On a store that expires locks by observation (deno-kv, dynamodb: docs/DESIGN.md §14)
 * a crashed runner's fire is taken over only by a standby, whose wait watches it for a ttl; a call
 * without `standby` answers `running` until then. `fn`'s error is rethrown; a lease lost before the record was written rejects with
 * {@link LeaseLostError} (the fire may have to run again: fence its effects with `lease.token`).
 * Needs a backend with `complete`: every built-in one (memory, upstash, redis, postgres, deno-kv,
 * cloudflare, dynamodb, azure-blob, and a quorum whose members all have it); on another it throws
 * a TypeError naming the backend.
 *
 * @param mutex Whose name the fire's key derives from, and whose ttl, owner and timing its lease takes.
 * @param fire The fire's id, the same on every instance: epoch ms, a Date, or a string such as
 *   `"2026-11-24"`; see {@link nearestTick} for a scheduler that gives no fire time.
 * @param fn The job; stop when `signal` aborts.
 * @param options `retain`, `standby`, `timeout`, `signal`; see {@link OnceOptions}.
 *
 * @example A cron job that runs once per tick on any number of hosts
 * ```ts
 * import { createMutex, nearestTick, runOnce } from "leasehold";
 * import { memory } from "leasehold/memory";
 *
 * declare function sendDigest(signal: AbortSignal, fence: number): Promise<number>; // your job
 *
 * const mutex = createMutex(memory(), { name: "hourly-digest" });
 * const result = await runOnce(mutex, nearestTick(3_600_000), (signal, lease) => sendDigest(signal, lease.token));
 * console.log(result.ran ? `sent ${result.value}` : `skipped: ${result.reason}`);
 * ```
 */
export async function runOnce<T>(
  mutex: Mutex,
  fire: Fire,
  fn: (signal: AbortSignal, lease: Lease) => T | Promise<T>,
  options?: OnceOptions,
): Promise<OnceResult<Awaited<T>>> {
  const at = "runOnce:";
  const o = cores.get(mutex as object);
  check(o !== undefined, at, "mutex must be a Mutex made by createMutex");
  const { backend } = o;
  const complete = backend.complete;
  check(
    typeof complete === "function",
    at,
    `the ${backend.name} backend cannot record a completed fire (it has no complete method); runOnce needs one that can: every built-in backend, a quorum only when all its members can and their retainRanges overlap (docs/once.md)`,
  );
  check(typeof fn === "function", at, `fn must be a function, got ${kind(fn)}`);
  const { retain = DAY, standby = false, timeout, signal, onError } = optionsOf("runOnce", options);
  check(
    Number.isSafeInteger(retain) && retain >= 1 && retain <= MAX_DELAY,
    at,
    `retain must be an integer number of ms from 1 to ${MAX_DELAY}, got ${isNumber(retain) ? retain : kind(retain)}`,
    typeof retain === "number" ? RangeError : TypeError,
  );
  checkBackendRange(at, "retain", retain, backend.retainRange, backend.name);
  check(typeof standby === "boolean", at, "standby must be a boolean");
  checkMs("runOnce", "timeout", timeout, true);
  checkSignal("runOnce", signal);
  checkFunction("runOnce", "onError", onError);
  const key = await fireKey(o.name, fire);
  signal?.throwIfAborted();

  // The engine over the backend as it is, except for one release: the lease's own, once `fn`
  // succeeded, is sent as `complete` (the lease ends locally first, as a release does, so no
  // renewal races the record). `granted`: the nonce of the last grant, the lease's.
  let granted: string | undefined;
  let finishing: string | undefined;
  let completed: boolean | undefined;
  // The last release sent for an attempt (the engine gives back what an unanswered acquire may
  // have taken): a failed attempt waits for it, below.
  let givingBack: Promise<void> | undefined;
  const through: Backend = {
    name: backend.name,
    ...(backend.expiry ? { expiry: backend.expiry } : {}),
    async acquire(r) {
      const result = await backend.acquire(r);
      if (result?.ok === true) granted = r.nonce;
      return result;
    },
    renew: (r) => backend.renew(r),
    async release(r) {
      if (r.nonce !== finishing) {
        givingBack = backend.release(r);
        return givingBack;
      }
      completed = await complete.call(backend, { ...r, retain });
    },
    inspect: (r) => backend.inspect(r),
  };
  // A standby wakes when the fire is recorded done or its runner lets go (§19).
  if (backend.watch) through.watch = backend.watch.bind(backend);
  const run: Core = { ...o, backend: through };
  const attempt = observe(run, keyAttempt(run, key));

  let lease: Lease;
  if (standby) {
    try {
      lease = await waitFor(
        run,
        `fire ${key}`,
        {
          ...(signal ? { signal } : {}),
          ...(timeout !== undefined ? { timeout } : {}),
          ...(onError ? { onError } : {}),
        },
        async (s, q, n, start) => {
          const r = await attempt(s, q, n, start);
          if (!isLease(r) && r.done) throw new FireDone(r.done);
          return r;
        },
        false,
        key,
      );
    } catch (error) {
      if (error instanceof FireDone) return { ran: false, reason: "done", by: error.by };
      throw error;
    }
  } else {
    let r: Awaited<ReturnType<typeof attempt>>;
    try {
      r = await attempt(signal);
    } catch (error) {
      // An acquire whose answer was lost may have taken the fire's lock: the engine gives it back
      // in the background. Wait for that (bounded like a release) before rejecting, so a retry of
      // this call finds the fire free, not `running` on its own grant, and runs it.
      await within(givingBack ?? Promise.resolve(), quietBound(o.ttl));
      throw error;
    }
    if (!isLease(r))
      return r.done ? { ran: false, reason: "done", by: r.done } : { ran: false, reason: "running" };
    lease = r;
  }

  // run()'s release after `fn`: a plain one when `fn` threw or the lease was lost meanwhile (the
  // fire stays runnable), `complete` when it succeeded on a lease still held.
  const held = lease;
  let value!: Awaited<T>;
  // When `fn` succeeded: the monotonic instant of the lease's local deadline, before which the
  // store still holds the lock for it (the renewals stop with the release).
  let until = 0;
  try {
    await runWith(
      async () => held,
      async (signal, lease) => {
        value = await fn(signal, lease);
        if (!lease.valid) throw lease.signal.reason;
        until = now() + Math.min(lease.expiresAt - Date.now(), o.ttl);
        finishing = granted;
      },
    );
  } catch (error) {
    // `fn` succeeded on a lease still held, but its record failed in a way worth retrying (no
    // answer, a busy store): the fire ran, so record it again while the lock is still ours, not
    // leave it to run again once the lock expires.
    if (finishing === undefined || completed !== undefined || !retryable(error)) throw error;
    completed = await recordAgain(
      backend,
      complete,
      { key, nonce: finishing, retain },
      held.owner,
      o.ttl,
      until,
      error,
    );
  }
  if (completed !== true) {
    throw new LeaseLostError(
      `lease on "${key}" lost before the fire was recorded as done: ${completed === false ? "the backend no longer had it (it expired there or was deleted, or another owner took it)" : "its record was not written"}`,
    );
  }
  return { ran: true, value, token: lease.token };
}

const retryable = (error: unknown): boolean => error instanceof BackendError && error.retryable;

/**
 * Sends a fire's record `r` again after its request failed with the retryable `first`, with
 * backoff from 25 ms, while the lock is still the lease's on the store: no request is sent at or
 * after `until` (its local deadline, monotonic), and each is bounded by the time left to it. A
 * `false` answer is checked with `inspect` (a read, bounded like one): an earlier request whose
 * answer was lost may have written the record, which then names the lease's `owner` (not always
 * its token: a quorum reports the token most members recorded, docs/DESIGN.md §17). Resolves
 * whether the record is the lease's; rejects with a {@link LeaseLostError} (its cause the last
 * error) once `until` passes, or with an error not worth retrying.
 */
async function recordAgain(
  backend: Backend,
  complete: NonNullable<Backend["complete"]>,
  r: Omit<CompleteRequest, "signal">,
  owner: string,
  ttl: number,
  until: number,
  first: unknown,
): Promise<boolean> {
  let last = first;
  for (let failures = 0; until - now() > backoff(failures, 1_000); failures++) {
    await sleep(backoff(failures, 1_000));
    const room = until - now();
    if (room <= 0) break;
    try {
      const write = (signal?: AbortSignal) => complete.call(backend, { ...r, signal });
      if (await quietRequest(backend, ttl, write, "complete", room)) return true;
      const h = await quietRequest(
        backend,
        ttl,
        (signal) => backend.inspect({ key: r.key, signal }),
        "inspect",
      );
      return h?.done === true && h.owner === owner;
    } catch (error) {
      if (!retryable(error)) throw error;
      last = error;
    }
  }
  throw new LeaseLostError(
    `lease on "${r.key}" ended before the fire was recorded as done: fn ran, but its record kept failing until the lease's deadline (the fire may run again: fence its effects with lease.token)`,
    { cause: last },
  );
}

/**
 * The tick nearest to `now` on a fixed `period`: `now` rounded to the nearest multiple of
 * `period` (epoch ms), for a scheduler that gives no fire time. Rounding, not flooring, lets a
 * clock a little ahead of or behind the tick name the same tick. Its limit: every instance must
 * fire within `period / 2` of the tick (clock skew and start delay together), else it names the
 * neighbouring tick; and a period shorter than twice that spread cannot be told apart.
 *
 * @param period The schedule's period in ms: a positive safe integer.
 * @param now The fire time as this instance sees it, epoch ms; default `Date.now()`.
 * @returns The tick, epoch ms: a multiple of `period`.
 */
export function nearestTick(period: number, now: number = Date.now()): number {
  check(
    Number.isSafeInteger(period) && period > 0,
    "nearestTick:",
    `period must be a positive integer number of ms, got ${isNumber(period) ? period : kind(period)}`,
    typeof period === "number" ? RangeError : TypeError,
  );
  check(
    isNumber(now),
    "nearestTick:",
    `now must be a finite number of epoch ms, got ${typeof now === "number" ? now : kind(now)}`,
    typeof now === "number" ? RangeError : TypeError,
  );
  return Math.round(now / period) * period;
}
