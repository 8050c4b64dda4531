/**
 * The in-process backend: locks live in a Map inside this process. Use it for tests, for one
 * process with several workers, and to try leasehold out. Mutexes contend only when they were
 * made on the same store.
 *
 * @module
 */
import type { Backend } from "../backend.ts";
import { now } from "../time.ts";

interface Held {
  nonce: string;
  owner: string;
  token: number;
  until: number;
}

/**
 * Creates one isolated in-memory store. Expiry uses the monotonic clock, like the core.
 *
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
export function memory(): Backend {
  const locks = new Map<string, Held>();
  const fences = new Map<string, number>();

  const live = (key: string): Held | undefined => {
    const held = locks.get(key);
    if (held && held.until <= now()) {
      locks.delete(key);
      return undefined;
    }
    return held;
  };

  return {
    name: "memory",
    async acquire({ key, owner, nonce, ttl, signal }) {
      signal?.throwIfAborted();
      const held = live(key);
      if (held) return { ok: false, retryAfter: held.until - now() };
      const token = (fences.get(key) ?? 0) + 1;
      fences.set(key, token);
      locks.set(key, { nonce, owner, token, until: now() + ttl });
      return { ok: true, token };
    },
    async renew({ key, nonce, ttl, signal }) {
      signal?.throwIfAborted();
      const held = live(key);
      if (held?.nonce !== nonce) return false;
      held.until = now() + ttl;
      return true;
    },
    async release({ key, nonce, signal }) {
      signal?.throwIfAborted();
      if (live(key)?.nonce === nonce) locks.delete(key);
    },
    async inspect(key, signal) {
      signal?.throwIfAborted();
      const held = live(key);
      return held ? { owner: held.owner, token: held.token, ttlLeft: held.until - now() } : null;
    },
    async raiseFence({ key, nonce, token, signal }) {
      signal?.throwIfAborted();
      const held = live(key);
      if (held?.nonce !== nonce) return false;
      held.token = Math.max(held.token, token);
      fences.set(key, Math.max(fences.get(key) ?? 0, token));
      return true;
    },
  };
}
