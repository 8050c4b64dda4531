// createSemaphore: at most `limit` permits at once, one ordinary lock per slot (docs/DESIGN.md §15);
// a face over the engine (engine.ts), as createMutex is.
import type { Backend } from "./backend.ts";
import {
  type Attempt,
  type AttemptFn,
  core,
  granted,
  inspectKey,
  isLease,
  keyAttempt,
  observe,
  refused,
  runWith,
  waitFor,
} from "./engine.ts";
import { BackendError } from "./errors.ts";
import { type Lease, quietRequest, releaseNonce } from "./lease.ts";
import { check, checkSignal, optionsOf } from "./options.ts";
import { requestSignal } from "./signals.ts";
import { MAX_LIMIT, slotKey } from "./slots.ts";
import { now } from "./time.ts";
import type { AcquireOptions, MutexOptions } from "./types.ts";

/** Options of {@link createSemaphore}: those of `createMutex`, and the `limit`. All durations are ms. */
export interface SemaphoreOptions extends MutexOptions {
  /**
   * How many permits may be held at once, across every instance: an integer from 1 to 1 000.
   * Instances with different limits may overlap (a deployment that changes it): an instance with
   * limit L only uses slots 0 to L − 1, so never more than the largest limit are held at once.
   */
  limit: number;
}

/** A permit of a {@link Semaphore}: a {@link Lease} on one of its slots. */
export interface Permit extends Lease {
  /** The semaphore's name. */
  readonly name: string;
  /**
   * Which slot it holds, from 0 to limit − 1. `token` strictly increases per slot across
   * holders: fence a resource per slot, or per semaphore by the pair (slot, token).
   */
  readonly slot: number;
}

/** A slot's current holder, as {@link Semaphore.holders} reports it. Advisory. */
export interface SlotHolder {
  /** The slot, from 0 to limit − 1. */
  slot: number;
  /** The holder's owner. */
  owner: string;
  /** The holder's fencing token on that slot. */
  token: number;
  /** ms left on the backend's own expiry, when it reports it. */
  ttlLeft?: number;
}

/**
 * A distributed counting semaphore: at most `limit` permits at once across every instance that
 * shares the name and the backend. Create it with {@link createSemaphore}.
 */
export interface Semaphore {
  /** The semaphore's name. */
  readonly name: string;
  /** How many permits it allows at once. */
  readonly limit: number;
  /** The lease duration of a permit in ms (the `ttl` option or its default). */
  readonly ttl: number;
  /** The identity `holders()` reports for this semaphore's permits. */
  readonly owner: string;
  /**
   * One attempt: resolves a {@link Permit}, or `null` when every slot is taken (`await using`
   * accepts null). Rejects with a {@link BackendError} when the backend fails or does not answer,
   * and with `signal.reason` when aborted. One request on a backend with `acquireAny`; else up to
   * one per slot, stopping at the first free one.
   */
  tryAcquire(options?: { signal?: AbortSignal }): Promise<Permit | null>;
  /**
   * Waits until a permit is free and takes it, exactly like `Mutex.acquire` (the same options,
   * backoff, timeout and errors); the pause between attempts is never longer than the earliest
   * expiry the backend reported.
   */
  acquire(options?: AcquireOptions): Promise<Permit>;
  /**
   * Acquires a permit, runs `fn` with its signal, releases in `finally`, and returns `fn`'s value.
   * When `fn` throws, rejects with that error, never with a release error.
   */
  run<T>(fn: (signal: AbortSignal, permit: Permit) => T | Promise<T>, options?: AcquireOptions): Promise<T>;
  /**
   * The held slots (one inspect per slot, at once), in slot order. Advisory: it may change right
   * after. Rejects with a {@link BackendError} when the backend fails or does not answer within
   * max(ttl/5, 1 s).
   */
  holders(options?: { signal?: AbortSignal }): Promise<SlotHolder[]>;
}

/**
 * A permit: the lease of its slot under the semaphore's name. A class, so that its getters are on
 * the prototype, once: an object literal with getters cost about 5 µs per permit on V8 (issue
 * 29), as a lease's Handle records (src/lease.ts).
 */
class SlotPermit implements Permit {
  readonly name: string;
  readonly slot: number;
  readonly mode = "exclusive";
  readonly owner: string;
  readonly token: number;
  readonly renew: () => Promise<void>;
  readonly release: () => Promise<void>;
  readonly [Symbol.asyncDispose]!: () => Promise<void>;
  readonly #lease: Lease;
  constructor(name: string, slot: number, lease: Lease) {
    this.name = name;
    this.slot = slot;
    this.owner = lease.owner;
    this.token = lease.token;
    this.renew = lease.renew;
    this.release = lease.release;
    this[Symbol.asyncDispose] = lease.release;
    this.#lease = lease;
  }
  get signal(): AbortSignal {
    return this.#lease.signal; // made when first read, as a lease's
  }
  get valid(): boolean {
    return this.#lease.valid;
  }
  get expiresAt(): number {
    return this.#lease.expiresAt;
  }
}

/**
 * Creates a semaphore on `options.name` in `backend`: at most `limit` permits at once. Each permit
 * is an ordinary lock on one slot (`name:permit:0` to `name:permit:<limit − 1>`), so it works on
 * every backend, a third-party one included, and has every guarantee of a lease: its signal aborts
 * before anyone else can take the slot, it renews itself, and its fencing token strictly increases
 * per slot. A backend with `acquireAny` (memory, upstash, redis, cloudflare) takes any free slot in one request;
 * on the others, an attempt tries the slots from a random one on, one request each, until one is
 * free. An attempt that got no answer may have taken a slot: it is given back in the background,
 * in one request with `releaseAny` (those four backends), else one release per slot, one at a
 * time, stopping at the first that fails. Checks every option now, like `createMutex`, and throws a `TypeError` or `RangeError`
 * naming the option and its valid values.
 *
 * @param backend Where the slots live: any backend.
 * @param options The name, the limit and the timing; see {@link SemaphoreOptions}.
 * @returns A {@link Semaphore}. Creating it does no I/O.
 *
 * @example At most 3 exports at once, across every instance
 * ```ts
 * import { createSemaphore } from "leasehold";
 * import { memory } from "leasehold/memory";
 *
 * declare function runExport(job: { signal: AbortSignal; slot: number; fence: number }): Promise<void>;
 *
 * const exports = createSemaphore(memory(), { name: "exports", limit: 3 });
 * await exports.run((signal, permit) => runExport({ signal, slot: permit.slot, fence: permit.token }), {
 *   timeout: 60_000,
 * });
 * ```
 */
export function createSemaphore(backend: Backend, options: SemaphoreOptions): Semaphore {
  const at = "createSemaphore:";
  const o = core(backend, options, "createSemaphore");
  const { name, ttl, guard, owner } = o;
  const { limit } = options;
  check(
    Number.isSafeInteger(limit) && limit >= 1 && limit <= MAX_LIMIT,
    at,
    `limit must be an integer from 1 to ${MAX_LIMIT}, got ${String(limit)}`,
    RangeError,
  );
  const longest = slotKey(name, limit - 1);
  check(
    longest.length <= 255,
    at,
    `name must be at most ${255 - (longest.length - name.length)} characters with limit ${limit}: its slot keys (${JSON.stringify(slotKey("", limit - 1))} appended) must be valid lock names, got ${name.length}`,
    RangeError,
  );
  const keys = Array.from({ length: limit }, (_, slot) => slotKey(name, slot));
  const backendName = backend.name;

  const permitOf = (lease: Lease, slot: number): Permit => new SlotPermit(name, slot, lease);

  // Gives back, in the background, whichever slot an unanswered acquireAny may have taken: one
  // releaseAny request where the backend has it; else one release per slot, one at a time, stopping
  // at the first that fails (a slot not reached expires after ttl, like a crashed holder's).
  const releaseAny = backend.releaseAny;
  const giveBack = releaseAny
    ? (nonce: string) =>
        quietRequest(backend, ttl, (signal) => releaseAny.call(backend, { keys, nonce, signal }))
    : async (nonce: string) => {
        for (const key of keys) await releaseNonce(backend, key, nonce, ttl);
      };
  const releaseAll = (nonce: string): void => {
    giveBack(nonce).catch(() => {});
  };

  // One request for any free slot, on a backend that offers it (and expires locks itself).
  const any = backend.acquireAny;
  const anyAttempt: AttemptFn<Permit> = async (signal) => {
    const nonce = crypto.randomUUID();
    const bounded = requestSignal(backendName, "acquire", ttl - guard, signal);
    const tSend = now();
    let result: Awaited<ReturnType<NonNullable<Backend["acquireAny"]>>>;
    try {
      result = await bounded.race(
        any!.call(backend, { keys, owner, nonce, ttl, signal: bounded.signalFor(backend) }),
      );
    } catch (error) {
      // The request may have been applied: free the slot we may hold, whichever it is.
      if (!(error instanceof BackendError && !error.retryable)) releaseAll(nonce);
      throw error;
    } finally {
      bounded.done();
    }
    if (result?.ok !== true) {
      return refused(result);
    }
    const slot = result.index;
    if (!(Number.isSafeInteger(slot) && slot >= 0 && slot < limit)) {
      releaseAll(nonce);
      throw new BackendError("acquireAny answered without a valid slot index", {
        backend: backendName,
        retryable: false,
      });
    }
    const lease = granted(o, keys[slot]!, nonce, result.token, tSend, signal);
    return isLease(lease) ? permitOf(lease, slot) : lease;
  };

  // Otherwise one ordinary attempt per slot (each with its own observed-expiry state), from a
  // random slot on so that contenders spread, until one is granted.
  const perSlot = any && backend.expiry !== "observed" ? [] : keys.map((key) => keyAttempt(o, key));
  // The whole attempt is bounded like one request (ttl − guard): a backend that does not answer
  // costs one bound, not one per slot.
  const spreadAttempt: AttemptFn<Permit> = async (signal) => {
    const start = Math.floor(Math.random() * limit);
    const whole = requestSignal(backendName, "acquire", ttl - guard, signal);
    let retryAfter: number | undefined;
    let failure: unknown;
    try {
      for (let i = 0; i < limit; i++) {
        whole.signal.throwIfAborted();
        const slot = (start + i) % limit;
        let result: Attempt;
        try {
          result = await perSlot[slot]!(whole.signal);
        } catch (error) {
          if (whole.signal.aborted || !(error instanceof BackendError && error.retryable)) throw error;
          failure = error; // this slot may be free: try the others, then report it
          continue;
        }
        if (isLease(result)) return permitOf(result, slot);
        if (result.retryAfter !== undefined)
          retryAfter = Math.min(retryAfter ?? result.retryAfter, result.retryAfter);
      }
    } finally {
      whole.done();
    }
    if (failure !== undefined) throw failure;
    return retryAfter === undefined ? {} : { retryAfter };
  };

  const attempt = observe(o, perSlot.length === 0 ? anyAttempt : spreadAttempt);
  const acquire = (opts?: AcquireOptions) => waitFor(o, name, opts, attempt, false);

  return {
    name,
    limit,
    ttl,
    owner,
    async tryAcquire(opts) {
      const { signal } = optionsOf("tryAcquire", opts);
      checkSignal("tryAcquire", signal);
      signal?.throwIfAborted();
      const result = await attempt(signal);
      return isLease(result) ? result : null;
    },
    acquire,
    run: (fn, opts) => runWith(acquire, fn, opts),
    async holders(opts) {
      const { signal } = optionsOf("holders", opts);
      checkSignal("holders", signal);
      const infos = await Promise.all(keys.map((key) => inspectKey(o, key, signal)));
      const held: SlotHolder[] = [];
      for (const [slot, info] of infos.entries()) {
        if (!info) continue;
        const h: SlotHolder = { slot, owner: info.owner, token: info.token };
        if (info.ttlLeft !== undefined) h.ttlLeft = info.ttlLeft;
        held.push(h);
      }
      return held;
    },
  };
}
