// The Lease handle: the local deadline, background renewal, the signal, release.
import type { Backend } from "./backend.ts";
import { renewInBatch } from "./batch.ts";
import { LeaseLostError } from "./errors.ts";
import { type Emit, failure, type LossReason } from "./events.ts";
import { type Bounded, ownTimers, requestSignal } from "./signals.ts";
import { NEVER, now, timer } from "./time.ts";
import {
  firstRenewalDelay,
  onGrid,
  quietBound,
  renewalAt,
  renewalBound,
  renewalRetryDelay,
} from "./timing.ts";
import type { LockMode } from "./types.ts";

/**
 * A held lock. Dispose it with `await using`, or call {@link Lease.release}. While `signal` is
 * not aborted, no other lease on the same name has an unaborted signal (see docs/guarantees.md,
 * THREATS.md), except shared leases beside a shared lease (`mode`, docs/DESIGN.md §18); stop
 * touching the guarded resource as soon as it aborts.
 */
export interface Lease extends AsyncDisposable {
  /** The lock name. */
  readonly name: string;
  /**
   * `"exclusive"` (the default): no other live lease on the name. `"shared"`: other shared leases
   * may be live beside it, never an exclusive one (docs/DESIGN.md §18).
   */
  readonly mode: LockMode;
  /** The owner shown by `holder()`. */
  readonly owner: string;
  /** Fencing token: strictly increasing per name, across holders. Pass it to fenced writes. */
  readonly token: number;
  /** Aborts, with a {@link LeaseLostError} as its reason, when the lease is lost or released. */
  readonly signal: AbortSignal;
  /**
   * Whether the lease is held right now, checked against the local deadline on the monotonic
   * clock, not only the signal: a process that resumes after a pause (a stopped VM, a long GC)
   * sees `false` at once, before its timers have run and aborted the signal (reading it then
   * aborts the signal). Check it just before each effect on the guarded resource, and pass
   * `token` to writes that can check it.
   */
  readonly valid: boolean;
  /**
   * Epoch ms of the local deadline: the lease is treated as lost at this instant unless renewed.
   * Computed from the monotonic clock; the wall-clock value is only for display.
   */
  readonly expiresAt: number;
  /** Renews now. Resolves when renewed; rejects with {@link LeaseLostError} once the lease is lost. */
  renew(): Promise<void>;
  /** Releases the lock. Idempotent; never rejects for a lease that was already lost. */
  release(): Promise<void>;
}

/**
 * What a lease takes from its mutex's checked options (the mutex passes those options themselves:
 * copying them into a new object per lease is a cost on every acquire). @internal
 */
export interface LeaseInit {
  backend: Backend;
  owner: string;
  ttl: number;
  /** ms subtracted from `tSend + ttl` to get the deadline: clock-rate margin plus stopMargin. */
  guard: number;
  /**
   * A renewal timer running later than this after it was due (or than the guard's timer
   * allowance, if larger) means the event loop stalled.
   */
  stopMargin: number;
  /** Renew in the background. */
  renew: boolean;
  /** Reports the lease's events (renewed, renew-failed, lost, released); absent without an observer. */
  emit?: Emit | undefined;
  /** `"shared"` for a shared lease (its backend is then the view whose methods are the shared ones). */
  mode?: "shared" | undefined;
}

/** Releases the lock held under `nonce`, bounded in time; rejects when the backend fails. @internal */
export function releaseNonce(backend: Backend, key: string, nonce: string, ttl: number): Promise<void> {
  return quietRequest(backend, ttl, (signal) => backend.release({ key, nonce, signal }));
}

/**
 * Sends the request `send` (a release unless `op` says otherwise), bounded by max(ttl/5, 1 s)
 * (docs/DESIGN.md §4.7), or by `room` ms when less; resolves its answer. @internal
 */
export async function quietRequest<T = void>(
  backend: Backend,
  ttl: number,
  send: (signal: AbortSignal | undefined) => Promise<T>,
  op: string = "release",
  room: number = NEVER,
): Promise<T> {
  const b = requestSignal(backend.name, op, Math.min(quietBound(ttl), room));
  try {
    return await b.race(send(b.signalFor(backend)));
  } finally {
    b.done();
  }
}

/**
 * Creates the handle for the lock stored under `key` (the lock name, or a semaphore slot's key)
 * freshly acquired with `nonce` and `token` by a request sent at `tSend` (monotonic), and starts
 * its renewal. The lease's `name` is that key. @internal
 */
export function createLease(
  init: LeaseInit,
  key: string,
  nonce: string,
  token: number,
  tSend: number,
): Lease {
  const { backend, ttl, guard, stopMargin, emit } = init;
  let deadline = tSend + ttl - guard;
  // Why the lease ended: a LeaseLostError, or for a release the function that makes it (a lease
  // whose signal nobody read never builds it). Set once.
  let ended: unknown;
  // The signal's controller, made when `signal` is first read: a lease nobody watches pays for
  // no AbortSignal (docs/DESIGN.md §4.8).
  let ctrl: AbortController | undefined;
  // The lease's one timer, due at the next renewal or at the deadline, whichever comes first
  // (or earlier: see arm).
  let cancel = noop;
  // Renewals go in the backend's batches (§4.3); not on Workers, where a timer lives in the
  // invocation that set it: a batch or a cell of another invocation could die with it.
  const batched = !ownTimers && !!backend.renewMany;
  let renewDue = NEVER;
  let failures = 0;
  // The renewal in flight: its request's bound, or its place in a batch (src/batch.ts).
  let renewing: Pick<Bounded, "abort"> | undefined;
  let inflight: Promise<void> | undefined;
  let released: Promise<void> | undefined;
  let lastError: unknown;

  const reason = (): unknown => {
    if (typeof ended === "function") ended = ended();
    return ended;
  };
  const end = (why: unknown): void => {
    ended = why;
    cancel();
    renewing?.abort(reason());
    ctrl?.abort(reason());
  };
  const lose = (loss: LossReason, why: string, cause: unknown = lastError): void => {
    if (ended) return;
    end(new LeaseLostError(`lease on "${key}" lost: ${why}`, { cause }));
    emit?.({ type: "lost", token, reason: loss });
  };

  /** Loses the lease when the clock says its deadline has passed; whether it is still held. */
  const checkDeadline = (): boolean => {
    if (now() < deadline) return !ended;
    lose("deadline", "its deadline passed without a successful renewal");
    return false;
  };

  let armedAt = NEVER;
  const arm = (): void => {
    const at = Math.min(renewDue, deadline);
    // A timer already due before `at` stays: tick() asks the clock and arms the next one then
    // (a renewal moves the deadline later, and costs no timer). A timer may also fire a little
    // early on some runtimes: only the clock decides.
    if (ended || at >= armedAt) return;
    cancel();
    armedAt = at;
    cancel = batched && at === renewDue ? inCell(at, tick) : timer(at - now(), tick);
  };

  // `background`: the timer's renewal, which waits for the backend's next batch where it has
  // renewMany; `lease.renew()` is asked for now, and sends a request of its own at once.
  const renewOnce = (background?: boolean): Promise<void> => {
    if (ended) return Promise.reject(reason());
    inflight ??= (async () => {
      let tSend = now();
      let bounded: Bounded | undefined;
      try {
        let ours: boolean;
        // The lease ending meanwhile aborts it with the lease's reason (see `end`).
        if (background && batched) {
          // In the backend's next batch, whose send time sets the deadline (§4.3).
          [tSend, ours] = await new Promise<[number, boolean]>((resolve, reject) => {
            renewing = { abort: reject };
            renewInBatch(backend, { key, nonce, ttl, deadline, resolve, reject });
          });
        } else {
          renewing = bounded = requestSignal(backend.name, "renew", renewalBound(ttl, deadline - tSend));
          ours = await bounded.race(backend.renew({ key, nonce, ttl, signal: bounded.signalFor(backend) }));
        }
        if (ended) throw reason();
        // No resurrection: a reply that lands after the deadline does not extend it.
        if (now() >= deadline) lose("late", "a renewal was answered after its deadline");
        else if (ours !== true)
          lose(
            "gone",
            "the backend no longer has it (it expired there or was deleted, or another owner took it)",
            undefined,
          );
        if (ended) throw reason();
        deadline = tSend + ttl - guard;
        lastError = undefined;
        emit?.({ type: "renewed", token, latency: now() - tSend, margin: deadline - now() });
      } catch (error) {
        if (!ended) {
          lastError = error;
          emit?.({ type: "renew-failed", token, ...failure(error), margin: deadline - now() });
        }
        throw error;
      } finally {
        bounded?.done();
        renewing = undefined;
        inflight = undefined;
      }
    })();
    return inflight;
  };

  // Background renewal: every ttl/3 (±10 %); after a failure, quick retries until the deadline.
  function tick(): void {
    // The timer that called this has fired: nothing of it to cancel (a cell's set is dropped).
    cancel = noop;
    armedAt = NEVER;
    const late = now() - renewDue;
    // A stalled event loop (a long GC, a blocking call, a frozen VM) may have eaten the margin
    // the holder relies on to stop in time: abort first, then free the lock for the next term.
    // Timers are routinely a few ms late: the guard's timer allowance is not a stall.
    if (late > Math.max(stopMargin, guard - stopMargin)) {
      lose(
        "stalled",
        `the event loop stalled: renewal ran ${Math.round(late)} ms late (stopMargin ${stopMargin} ms)`,
      );
      release().catch(() => {});
      return;
    }
    if (!checkDeadline()) return;
    if (late < 0) {
      arm(); // early, or the deadline's turn while a renewal is out
      return;
    }
    renewDue = NEVER;
    // A batch settles within its bound, before the deadline (src/batch.ts): no timer meanwhile.
    if (!batched) arm();
    renewOnce(true).then(
      () => {
        failures = 0;
        renewDue = due(batched, renewalAt(deadline, ttl, guard, now()), ttl);
        arm();
      },
      () => {
        if (ended) return;
        renewDue = now() + Math.max(0, Math.min(renewalRetryDelay(failures++, ttl), deadline - now()));
        arm();
      },
    );
  }

  // Scheduled from the deadline this lease has: a grant answered late renews at once. Batched
  // (many leases), the first renewal is spread over a whole period (§4.3).
  if (init.renew)
    renewDue = due(
      batched,
      renewalAt(deadline, ttl, guard, now(), batched ? firstRenewalDelay(ttl) : undefined),
      ttl,
    );
  arm();

  const release = (): Promise<void> =>
    (released ??= (async () => {
      const wasLost = !!ended;
      if (!wasLost) {
        end(() => {
          // A release is no failure: its reason needs no stack, and capturing one is costly on V8.
          const error = Error as { stackTraceLimit?: number | undefined };
          const limit = error.stackTraceLimit;
          error.stackTraceLimit = 0;
          const why = new LeaseLostError(`lease on "${key}" was released`);
          error.stackTraceLimit = limit;
          return why;
        });
        emit?.({ type: "released", token, held: now() - tSend });
      }
      // Even a lost lease is released on the backend: after a partition the lock may still carry
      // our nonce, and freeing it lets the next holder in without waiting for the expiry.
      try {
        await releaseNonce(backend, key, nonce, ttl);
      } catch (error) {
        if (!wasLost) throw error;
      }
    })());

  return new Handle(
    key,
    init.mode ?? "exclusive",
    init.owner,
    token,
    () => renewOnce(),
    release,
    (what) => {
      if (what === 1) return checkDeadline();
      if (what === 2) return Date.now() + (deadline - now());
      if (!ctrl) {
        ctrl = new AbortController();
        if (ended) ctrl.abort(reason());
      }
      return ctrl.signal;
    },
  );
}

const noop = (): void => {};

/**
 * The batched renewals due in one cell of the grid (§4.3), of every lease of the process, by the
 * cell's instant: one timer for all of them (a setTimeout per renewal cost 10 000 leases about
 * 0.7 % of a core, issue 29), cleared when its last lease leaves. `made`: the setTimeout it was
 * armed with, as a cell armed under fake timers since removed never fires.
 */
const cells = new Map<number, { made: unknown; ticks: Set<() => void>; clear: () => void }>();

/** Puts `tick` in the cell due at `at`; returns what takes it out. */
function inCell(at: number, tick: () => void): () => void {
  let cell = cells.get(at);
  if (cell?.made !== setTimeout) {
    const ticks = new Set<() => void>();
    const clear = timer(at - now(), () => {
      close(at, ticks);
      for (const f of ticks) f();
    });
    cell = { made: setTimeout, ticks, clear };
    cells.set(at, cell);
  }
  const { ticks, clear } = cell;
  ticks.add(tick);
  return () => {
    ticks.delete(tick);
    if (!ticks.size) {
      clear();
      close(at, ticks);
    }
  };
}

const close = (at: number, ticks: Set<() => void>): void => {
  if (cells.get(at)?.ticks === ticks) cells.delete(at);
};

/**
 * When a lease renews that is due at `at`: batched, on the grid of its ttl, a little early, so
 * that the leases due in one cell of it renew in one wake-up of the event loop and one request
 * (§4.3). (Not a closure per lease: thousands of leases pay for each.)
 */
const due = (batched: boolean, at: number, ttl: number): number => (batched ? onGrid(at, ttl) : at);

/**
 * A lease's handle. A class, so that its getters are on the prototype, once: on V8 an object
 * literal with getters is a dictionary (about 450 bytes per lease, docs/DESIGN.md §4.8). `read`
 * answers the getters from the lease's closure: 0 the signal, 1 `valid`, 2 `expiresAt`.
 */
class Handle implements Lease {
  readonly name: string;
  readonly mode: LockMode;
  readonly owner: string;
  readonly token: number;
  readonly renew: () => Promise<void>;
  readonly release: () => Promise<void>;
  readonly [Symbol.asyncDispose]!: () => Promise<void>;
  readonly #read: (what: 0 | 1 | 2) => unknown;
  constructor(
    name: string,
    mode: LockMode,
    owner: string,
    token: number,
    renew: () => Promise<void>,
    release: () => Promise<void>,
    read: (what: 0 | 1 | 2) => unknown,
  ) {
    this.name = name;
    this.mode = mode;
    this.owner = owner;
    this.token = token;
    this.renew = renew;
    this.release = release;
    this[Symbol.asyncDispose] = release; // both work unbound
    this.#read = read;
  }
  get signal(): AbortSignal {
    return this.#read(0) as AbortSignal;
  }
  get valid(): boolean {
    return this.#read(1) as boolean;
  }
  get expiresAt(): number {
    return this.#read(2) as number;
  }
}
