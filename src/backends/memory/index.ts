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
  // Shared mode (docs/DESIGN.md §18): the live shared leases of each key by nonce, and the
  // writers marked waiting by waiter id (the instant the mark lapses).
  const readers = new Map<string, Map<string, Held>>();
  const writers = new Map<string, Map<string, number>>();
  let versions = 0;
  // The waiters listening for each key's releases (watch, docs/DESIGN.md §19).
  const watchers = new Map<string, Set<() => void>>();
  const freed = (key: string): void => {
    for (const wake of watchers.get(key) ?? []) wake();
  };

  /** The live entries of `map`'s entry for `key` (expired ones dropped), or undefined when none. */
  const liveOf = <V>(map: Map<string, Map<string, V>>, key: string, until: (v: V) => number) => {
    const entries = map.get(key);
    if (!entries) return undefined;
    for (const [id, v] of entries) if (until(v) <= now()) entries.delete(id);
    if (entries.size > 0) return entries;
    map.delete(key);
    return undefined;
  };
  const liveReaders = (key: string) => liveOf(readers, key, (r) => r.until);
  const waitingWriters = (key: string) => liveOf(writers, key, (until) => until);

  /** The next token of `key`: its counter's (a fire's key draws from its mutex name's: counterOf, §17). */
  const nextToken = (key: string): number => {
    const counter = counterOf(key);
    const token = (fences.get(counter) ?? 0) + 1;
    fences.set(counter, token);
    return token;
  };

  const live = (key: string): Held | undefined => {
    const held = locks.get(key);
    // A done record expires by itself on either kind of store (as deno-kv's `expireIn` would).
    if (held && (!observed || held.done) && held.until <= now()) {
      locks.delete(key);
      return undefined;
    }
    return held;
  };

  /**
   * One acquire of `key`: acquire's, and each step of acquireAny's. Refused while a shared lease is
   * live (store expiry only); a refused `waiter` is marked waiting for `ttl`, a granted one unmarked.
   */
  const take = (
    key: string,
    owner: string,
    nonce: string,
    ttl: number,
    takeover?: string,
    waiter?: string,
  ): AcquireResult => {
    const held = live(key);
    if (held?.done) return { ok: false, done: { owner: held.owner, token: held.token } };
    const shared = observed ? undefined : liveReaders(key);
    if (shared || (held && !(observed && takeover === String(held.version)))) {
      if (waiter !== undefined && !observed) {
        const marks = waitingWriters(key) ?? new Map<string, number>(); // the lapsed ones dropped
        writers.set(key, marks.set(waiter, now() + ttl));
      }
      if (observed && held) return { ok: false, version: String(held.version), ttl: held.ttl };
      const until = held ? held.until : Math.max(...[...shared!.values()].map((r) => r.until));
      return { ok: false, retryAfter: until - now() };
    }
    // Granted: its mark goes, and the key's map with the last one, so nothing piles up.
    if (waiter !== undefined && writers.get(key)?.delete(waiter)) waitingWriters(key);
    locks.set(key, { nonce, owner, token: nextToken(key), until: now() + ttl, ttl, version: ++versions });
    return { ok: true, token: locks.get(key)!.token };
  };

  /** The lease of `key` when `nonce` holds it (a done record's nonce is "", which no holder has). */
  const owns = (key: string, nonce: string): Held | undefined => {
    const held = live(key);
    return held && !held.done && held.nonce === nonce ? held : undefined;
  };

  /** Frees `key` if `nonce` holds it: release's, and each step of releaseAny's. */
  const free = (key: string, nonce: string): void => {
    if (owns(key, nonce) && locks.delete(key)) freed(key);
  };

  /** The shared lease of `nonce` on `key`, when live. */
  const reader = (key: string, nonce: string): Held | undefined => liveReaders(key)?.get(nonce);

  // Shared leases (docs/DESIGN.md §18), on a store that expires locks itself.
  const sharedLocks: Pick<Backend, "acquireShared" | "renewShared" | "releaseShared"> = {
    async acquireShared({ key, owner, nonce, ttl, signal }) {
      signal?.throwIfAborted();
      const held = live(key);
      if (held?.done) return { ok: false, done: { owner: held.owner, token: held.token } };
      if (held) return { ok: false, retryAfter: held.until - now() };
      if (waitingWriters(key)) return { ok: false };
      const token = nextToken(key);
      const shared = readers.get(key) ?? new Map<string, Held>();
      readers.set(
        key,
        shared.set(nonce, { nonce, owner, token, until: now() + ttl, ttl, version: ++versions }),
      );
      return { ok: true, token };
    },
    async renewShared({ key, nonce, ttl, signal }) {
      signal?.throwIfAborted();
      const held = reader(key, nonce);
      if (!held) return false;
      held.until = now() + ttl;
      held.ttl = ttl;
      return true;
    },
    async releaseShared({ key, nonce, signal }) {
      signal?.throwIfAborted();
      if (reader(key, nonce) && liveReaders(key)?.delete(nonce)) freed(key);
      liveReaders(key); // drops the key's map when that was the last
      // A writer that gave up: its waiting mark goes (§18).
      if (waitingWriters(key)?.delete(nonce)) waitingWriters(key);
    },
  };

  return {
    name: "memory",
    ...(observed ? { expiry: "observed" as const } : {}),
    async acquire({ key, owner, nonce, ttl, signal, takeover, waiter }) {
      signal?.throwIfAborted();
      return take(key, owner, nonce, ttl, takeover, waiter);
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
          ...sharedLocks,
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
      const shared = held || observed ? undefined : liveReaders(key);
      if (shared) {
        // The newest reader (the greatest token), how many hold, and when the last one's lease ends.
        const all = [...shared.values()];
        const newest = all.reduce((a, b) => (b.token > a.token ? b : a));
        return {
          owner: newest.owner,
          token: newest.token,
          ttlLeft: Math.max(...all.map((r) => r.until)) - now(),
          readers: shared.size,
        };
      }
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
      freed(key);
      return true;
    },
    async watch(key, wake, signal) {
      signal.throwIfAborted();
      const wakes = watchers.get(key) ?? new Set();
      watchers.set(key, wakes.add(wake));
      signal.addEventListener("abort", () => {
        if (wakes.delete(wake) && wakes.size === 0 && watchers.get(key) === wakes) watchers.delete(key);
      });
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
