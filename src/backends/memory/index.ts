/**
 * The in-process backend: locks live in a Map inside this process. Use it for tests, for one
 * process with several workers, and to try leasehold out. Mutexes contend only when they were
 * made on the same store.
 *
 * @module
 */
import type { AcquireResult, Backend } from "../../backend.ts";
import { check } from "../../options.ts";
import { counterOf } from "../../slots.ts";
import { now } from "../../time.ts";

interface Held {
  nonce: string;
  owner: string;
  token: number;
  until: number;
  /** The holder's ttl, and the record's version: a new one with every write. */
  ttl: number;
  version: number;
  /** A completed fire's record (`complete`), not a lease: its nonce is "", held by no one. */
  done?: true;
}

/** Options of {@link memory}. */
export interface MemoryOptions {
  /**
   * `"observed"`: a store that never expires a lock by itself, like Deno KV and DynamoDB; the core
   * then takes a lock over only after seeing its record unchanged for the holder's ttl (docs/DESIGN.md
   * §14). For trying that mode out and testing code against it. Default `"store"`.
   */
  expiry?: "store" | "observed";
}

/**
 * Creates one isolated in-memory store. Expiry uses the monotonic clock, like the core.
 *
 * @param options `expiry: "observed"` for a store that never expires a lock by itself.
 * @returns A {@link Backend} named `"memory"`, with no ttl constraint beyond the core's.
 *
 * @example Two mutexes on one store exclude each other
 * ```ts
 * import { createMutex } from "leasehold";
 * import { memory } from "leasehold/memory";
 *
 * const store = memory();
 * const a = createMutex(store, { name: "job" });
 * const b = createMutex(store, { name: "job" });
 * await using lease = await a.tryAcquire();
 * console.log(lease !== null, await b.tryAcquire()); // true null
 * ```
 */
export function memory(options: MemoryOptions = {}): Backend {
  const observed = options?.expiry === "observed";
  check(
    observed || options?.expiry === undefined || options.expiry === "store",
    "[memory]",
    'options.expiry must be "store" or "observed"',
  );
  const locks = new Map<string, Held>();
  const fences = new Map<string, number>();
  let versions = 0;

  const live = (key: string): Held | undefined => {
    const held = locks.get(key);
    // A done record expires by itself on either kind of store (as deno-kv's `expireIn` would).
    if (held && (!observed || held.done) && held.until <= now()) {
      locks.delete(key);
      return undefined;
    }
    return held;
  };

  /** One acquire of `key`: acquire's, and each step of acquireAny's. */
  const take = (key: string, owner: string, nonce: string, ttl: number, takeover?: string): AcquireResult => {
    const held = live(key);
    if (held?.done) return { ok: false, done: { owner: held.owner, token: held.token } };
    if (held && !(observed && takeover === String(held.version))) {
      return observed
        ? { ok: false, version: String(held.version), ttl: held.ttl }
        : { ok: false, retryAfter: held.until - now() };
    }
    // A fire's key draws from its mutex name's counter (src/slots.ts counterOf; docs/DESIGN.md §17).
    const counter = counterOf(key);
    const token = (fences.get(counter) ?? 0) + 1;
    fences.set(counter, token);
    locks.set(key, { nonce, owner, token, until: now() + ttl, ttl, version: ++versions });
    return { ok: true, token };
  };

  /** The lease of `key` when `nonce` holds it (a done record's nonce is "", which no holder has). */
  const owns = (key: string, nonce: string): Held | undefined => {
    const held = live(key);
    return held && !held.done && held.nonce === nonce ? held : undefined;
  };

  /** Frees `key` if `nonce` holds it: release's, and each step of releaseAny's. */
  const free = (key: string, nonce: string): void => {
    if (owns(key, nonce)) locks.delete(key);
  };

  return {
    name: "memory",
    ...(observed ? { expiry: "observed" as const } : {}),
    async acquire({ key, owner, nonce, ttl, signal, takeover }) {
      signal?.throwIfAborted();
      return take(key, owner, nonce, ttl, takeover);
    },
    // A store that expires locks itself answers a semaphore's acquire, and gives it back, in one
    // step (observed: per key).
    ...(observed
      ? {}
      : {
          async acquireAny({ keys, owner, nonce, ttl, signal }) {
            signal?.throwIfAborted();
            let retryAfter = Number.POSITIVE_INFINITY;
            for (const [index, key] of keys.entries()) {
              const r = take(key, owner, nonce, ttl);
              if (r.ok) return { ok: true as const, token: r.token, index };
              retryAfter = Math.min(retryAfter, r.retryAfter ?? retryAfter);
            }
            return retryAfter === Number.POSITIVE_INFINITY
              ? { ok: false as const }
              : { ok: false as const, retryAfter };
          },
          // Gives back an unanswered acquireAny in one step.
          async releaseAny({ keys, nonce, signal }) {
            signal?.throwIfAborted();
            for (const key of keys) free(key, nonce);
          },
        }),
    async renew({ key, nonce, ttl, signal }) {
      signal?.throwIfAborted();
      const held = owns(key, nonce);
      if (!held) return false;
      held.until = now() + ttl;
      held.ttl = ttl;
      held.version = ++versions;
      return true;
    },
    async release({ key, nonce, signal }) {
      signal?.throwIfAborted();
      free(key, nonce);
    },
    async inspect({ key, signal }) {
      signal?.throwIfAborted();
      const held = live(key);
      if (!held) return null;
      if (held.done) return { owner: held.owner, token: held.token, ttlLeft: held.until - now(), done: true };
      return observed
        ? { owner: held.owner, token: held.token }
        : { owner: held.owner, token: held.token, ttlLeft: held.until - now() };
    },
    // Replaces the lease with the record of a completed fire; the fence counter (its mutex name's)
    // stays. The records that expired meanwhile are dropped, so they do not pile up.
    async complete({ key, nonce, retain, signal }) {
      signal?.throwIfAborted();
      const held = owns(key, nonce);
      if (!held) return false;
      for (const [other, record] of locks) if (record.done) live(other);
      const { owner, token } = held;
      locks.set(key, {
        nonce: "",
        owner,
        token,
        until: now() + retain,
        ttl: retain,
        version: ++versions,
        done: true,
      });
      return true;
    },
    async raiseFence({ key, nonce, token, signal }) {
      signal?.throwIfAborted();
      const held = owns(key, nonce);
      if (!held) return false;
      held.token = Math.max(held.token, token);
      held.version = ++versions;
      const counter = counterOf(key);
      fences.set(counter, Math.max(fences.get(counter) ?? 0, token));
      return true;
    },
  };
}
