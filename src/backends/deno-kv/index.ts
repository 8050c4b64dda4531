/**
 * The Deno KV backend: a `Deno.Kv` from `Deno.openKv()` (local SQLite, or Deno Deploy's global
 * KV), or from `openKv()` of the `@deno/kv` package on Node and Bun. Deno KV has no expiry a lock
 * can rely on (`expireIn` is only the earliest time a key may be deleted), so this backend
 * declares `expiry: "observed"`: a contender takes a lock over only after it has seen the
 * holder's record unchanged (the same versionstamp) for the holder's ttl plus a margin on its own
 * monotonic clock, by a compare-and-set on that versionstamp (docs/DESIGN.md §14).
 *
 * Keys, for a lock named `n` and the default prefix `["leasehold"]`: `["leasehold", "lock", n]`
 * holds the lease (`{ nonce, owner, token, ttl }` as a JSON string), deleted on release, and
 * `["leasehold", "fence", n]` the fence counter (a decimal string) that never goes away, written
 * in the same atomic commit as the lease; a fire of runOnce (`n:fire:<id>`) has no counter of its
 * own but draws from its mutex name's, and its record expires (`expireIn`). Every read is strongly consistent. Values are strings
 * (the lease as ASCII JSON) so that one database can be read from Deno, Node and Bun alike (on
 * Bun, open it with `@deno/kv`'s `makeLimitedV8Serializer()`, which handles strings only, of at
 * most 255 bytes: an acquire whose record it would not read back, for an owner over about 170
 * ASCII characters, is refused with a `RangeError` before anything is written; across runtimes,
 * records must stay under 128 bytes: docs/DESIGN.md §5.7).
 *
 * Round trips: an acquire reads both keys and commits (2); a renew or release of a lease this
 * backend object wrote commits with the versionstamp it remembers (1), and reads first only when
 * it does not know it. A request cannot be aborted: the core's per-attempt timeouts bound it, and
 * the answer of an abandoned acquire is handled like a lost reply (the lock released).
 *
 * @example Deno (the same on Node and Bun with `import { openKv } from "@deno/kv"`)
 * ```ts
 * import { createMutex } from "leasehold";
 * import { denoKv, type KvLike } from "leasehold/deno-kv";
 *
 * declare const kv: KvLike; // await Deno.openKv()
 *
 * const mutex = createMutex(denoKv(kv), { name: "nightly-report" });
 * ```
 *
 * @module
 */
import type { AcquireResult, Backend, HolderInfo } from "../../backend.ts";
import { BackendError, fenceExhausted } from "../../errors.ts";
import { check } from "../../options.ts";
import { abortable } from "../../signals.ts";
import { counterOf } from "../../slots.ts";
import { wakes } from "../shared/wakes.ts";
import type { KvAtomicLike, KvEntryLike, KvKey, KvLike } from "./kv.ts";
import { foreign, type LeaseRecord, leaseOf, NAME, recordWriter, WHERE } from "./record.ts";

export type { KvAtomicLike, KvEntryLike, KvKey, KvKeyPart, KvLike } from "./kv.ts";

/** Options of {@link denoKv}. */
export interface DenoKvOptions {
  /** The key prefix every key of this backend starts with. Default `["leasehold"]`. */
  prefix?: KvKey;
}

/** Commits that lost a race to another writer are tried again this many times. */
const ATTEMPTS = 5;

/**
 * Creates a Deno KV backend for {@link createMutex}.
 *
 * @param kv A `Deno.Kv` (`await Deno.openKv()`), or `@deno/kv`'s `openKv()` on Node and Bun.
 * @param options The key `prefix`.
 * @returns A backend named `"deno-kv"` with `expiry: "observed"`, no ttl bounds of its own; with
 *   `watch` (a waiter woken when the key is freed, docs/DESIGN.md §19) when `kv` has `watch`.
 * @throws {TypeError} When `kv` is not a Deno KV database or the prefix is not a key.
 */
export function denoKv(kv: KvLike, options: DenoKvOptions = {}): Backend {
  check(
    typeof kv === "object" &&
      kv !== null &&
      typeof kv.getMany === "function" &&
      typeof kv.atomic === "function",
    WHERE,
    "kv must be a Deno.Kv (await Deno.openKv(), or openKv() from @deno/kv)",
  );
  const prefix = options?.prefix ?? ["leasehold"];
  check(
    Array.isArray(prefix) &&
      prefix.every((p) => ["string", "number", "bigint", "boolean"].includes(typeof p)),
    WHERE,
    "options.prefix must be an array of key parts (strings, numbers, bigints, booleans)",
  );
  const stored = recordWriter(kv);
  const lockKey = (key: string): KvKey => [...prefix, "lock", key];
  // A fire's key draws from its mutex name's counter (src/slots.ts counterOf; docs/DESIGN.md §17).
  const fenceKey = (key: string): KvKey => [...prefix, "fence", counterOf(key)];
  // Each lease this backend wrote, with the versionstamp of that write, by nonce: renew and
  // release commit against it at once, without a read (the commit fails if it changed since).
  const written = new Map<string, KvEntryLike>();
  const wrote = (lease: LeaseRecord, value: string, versionstamp: string | undefined): void => {
    written.delete(lease.nonce);
    if (versionstamp) written.set(lease.nonce, { value, versionstamp });
    if (written.size > 4_096) written.delete(written.keys().next().value as string);
  };

  /** Runs a KV call; its failure becomes a BackendError, an abort the signal's reason. */
  async function io<T>(what: string, key: string, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    signal?.throwIfAborted();
    try {
      return await (signal ? abortable(work(), signal) : work());
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      const message = error instanceof Error ? error.message : String(error);
      throw new BackendError(`${what} ${JSON.stringify(key)} failed: ${message}`, {
        backend: NAME,
        // A value KV refuses (TypeError) will be refused again; a closed or busy database may not.
        retryable: !(error instanceof TypeError),
        cause: error,
      });
    }
  }

  const read = (key: string, signal?: AbortSignal) =>
    io("read", key, () => kv.getMany([lockKey(key), fenceKey(key)], { consistency: "strong" }), signal);

  const counter = (entry: KvEntryLike | undefined): number => {
    const v = entry?.value ?? "0";
    if (typeof v !== "string" || !/^[0-9]{1,16}$/.test(v) || !Number.isSafeInteger(Number(v)))
      throw foreign("fence");
    return Number(v);
  };

  /** Commits `lease` in place of the current one if nothing changed since `entry` was read. */
  async function rewrite(key: string, entry: KvEntryLike, lease: LeaseRecord, signal?: AbortSignal) {
    const value = stored(lease);
    const r = await io(
      "write",
      key,
      () =>
        kv
          .atomic()
          .check({ key: lockKey(key), versionstamp: entry.versionstamp })
          .set(lockKey(key), value)
          .commit(),
      signal,
    );
    if (r.ok) wrote(lease, value, r.versionstamp);
    return r.ok;
  }

  /**
   * The record in `lock`: a lease, a completed fire's record until its `done` time (by this
   * machine's wall clock: the record's length, not any lease's safety, depends on the clocks), or
   * null.
   */
  const live = (lock: KvEntryLike | undefined): LeaseRecord | null => {
    const held = leaseOf(lock);
    return held?.done !== undefined && held.done <= Date.now() ? null : held;
  };

  /** The lease in `lock` when `nonce` holds it; else forgets what this backend wrote for `nonce`. */
  const ours = (lock: KvEntryLike, nonce: string): LeaseRecord | undefined => {
    const held = leaseOf(lock);
    if (held?.nonce === nonce) return held;
    written.delete(nonce);
    return undefined;
  };

  /** Commits `lease` and the fence counter `next` if neither entry changed since it was read. */
  async function fenced(
    what: string,
    key: string,
    lock: KvEntryLike,
    fence: KvEntryLike,
    lease: LeaseRecord,
    next: number,
    signal?: AbortSignal,
  ): Promise<boolean> {
    const value = stored(lease);
    const r = await io(
      what,
      key,
      () =>
        kv
          .atomic()
          .check({ key: lockKey(key), versionstamp: lock.versionstamp })
          .check({ key: fenceKey(key), versionstamp: fence.versionstamp })
          .set(lockKey(key), value)
          .set(fenceKey(key), String(next))
          .commit(),
      signal,
    );
    if (r.ok) wrote(lease, value, r.versionstamp);
    return r.ok;
  }

  /**
   * `step` with the lease `nonce` holds on `key` and its entry, read as `loop` reads (first the
   * entry this backend wrote); `false` when `nonce` does not hold it.
   */
  function whenOurs(
    key: string,
    nonce: string,
    signal: AbortSignal | undefined,
    step: (held: LeaseRecord, lock: KvEntryLike) => Promise<boolean | undefined>,
  ): Promise<boolean> {
    return loop(
      key,
      signal,
      async (lock) => {
        const held = ours(lock, nonce);
        return held ? step(held, lock) : false;
      },
      nonce,
    );
  }

  /**
   * Ends the lease `nonce` holds on `key` with what `write(lease)` adds to a commit checked on the
   * lease's versionstamp (a delete, or a completed fire's record); whether `nonce` held it.
   */
  function end(
    what: string,
    key: string,
    nonce: string,
    signal: AbortSignal | undefined,
    write: (held: LeaseRecord) => (atomic: KvAtomicLike) => KvAtomicLike,
  ): Promise<boolean> {
    return whenOurs(key, nonce, signal, async (held, lock) => {
      const apply = write(held);
      const checked = () => kv.atomic().check({ key: lockKey(key), versionstamp: lock.versionstamp });
      const r = await io(what, key, () => apply(checked()).commit(), signal);
      if (!r.ok) return undefined;
      written.delete(nonce);
      return true;
    });
  }

  /**
   * Runs `step` with the lease and fence entries, read strongly (first, for `nonce`, the lease
   * this backend wrote, if any), until its commit does not lose a race; `step` answers a result,
   * or undefined to read again.
   */
  async function loop<T>(
    key: string,
    signal: AbortSignal | undefined,
    step: (lock: KvEntryLike, fence: KvEntryLike) => Promise<T | undefined>,
    nonce?: string,
  ): Promise<T> {
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const known = attempt === 0 && nonce !== undefined ? written.get(nonce) : undefined;
      const [lock, fence] = known ? [known, { value: null, versionstamp: null }] : await read(key, signal);
      const result = await step(lock!, fence!);
      if (result !== undefined) return result;
    }
    throw new BackendError(`${JSON.stringify(key)} kept changing under concurrent writes`, {
      backend: NAME,
      retryable: true,
    });
  }

  // Wake on release (docs/DESIGN.md §19): one watch stream per watched key, shared by its
  // waiters in this backend object and cancelled when the last leaves. A change to a free entry
  // (deleted, or a completed fire's record) wakes them; a renewal or a takeover does not. A
  // stream that fails or ends leaves its waiters to their polls.
  const waiting = wakes();
  const streams = new Map<string, () => void>();
  /** Whether `entry` is free to take, or a fire's record (either ends a wait). */
  const freed = (entry: KvEntryLike | undefined): boolean => {
    if (!entry || entry.versionstamp === null) return true;
    try {
      const held = live(entry);
      return held === null || held.done !== undefined;
    } catch {
      return true; // not a record of ours: let the waiter look
    }
  };
  function follow(key: string): void {
    if (streams.has(key)) return;
    const reader = kv.watch!([lockKey(key)], { raw: true }).getReader();
    const stop = () => {
      if (streams.get(key) === stop) streams.delete(key);
      reader.cancel().catch(() => {});
    };
    streams.set(key, stop);
    (async () => {
      let last: string | null | undefined;
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done || streams.get(key) !== stop) break;
          const entry = value?.[0];
          const stamp = entry?.versionstamp ?? null;
          if (stamp === last) continue;
          last = stamp;
          if (freed(entry)) waiting.wake(key);
        }
      } catch {
        // The stream failed (the database closed, a remote store's connection lost): its
        // waiters poll.
      }
      if (streams.get(key) === stop) streams.delete(key);
    })();
  }
  const watch: Backend["watch"] = async (key, wake, signal) => {
    signal.throwIfAborted();
    const leave = waiting.add(key, wake, signal, (k) => streams.get(k)?.());
    try {
      follow(key);
    } catch (error) {
      leave();
      const message = error instanceof Error ? error.message : String(error);
      throw new BackendError(`watch ${JSON.stringify(key)} failed: ${message}`, {
        backend: NAME,
        retryable: true,
        cause: error,
      });
    }
  };

  return {
    name: NAME,
    expiry: "observed",
    ...(typeof kv.watch === "function" ? { watch } : {}),

    async acquire({ key, owner, nonce, ttl, signal, takeover }): Promise<AcquireResult> {
      return loop(key, signal, async (lock, fence) => {
        const held = live(lock);
        if (held?.done !== undefined) return { ok: false, done: { owner: held.owner, token: held.token } };
        if (held) {
          if (held.nonce === nonce) {
            // A retried acquire of ours: the same token, the lease written again.
            return (await rewrite(key, lock, { ...held, ttl }, signal))
              ? { ok: true, token: held.token }
              : undefined;
          }
          if (takeover !== lock.versionstamp)
            return { ok: false, version: lock.versionstamp!, ttl: held.ttl };
        }
        const token = counter(fence) + 1;
        // The counter can grant no more: refused before anything is written (docs/DESIGN.md §5.1).
        if (!Number.isSafeInteger(token)) throw fenceExhausted(NAME, key);
        // undefined: someone wrote in between, look again.
        return (await fenced("acquire", key, lock, fence, { nonce, owner, token, ttl }, token, signal))
          ? { ok: true, token }
          : undefined;
      });
    },

    renew: ({ key, nonce, ttl, signal }): Promise<boolean> =>
      whenOurs(key, nonce, signal, async (held, lock) =>
        (await rewrite(key, lock, { ...held, ttl }, signal)) ? true : undefined,
      ),

    async release({ key, nonce, signal }): Promise<void> {
      await end("release", key, nonce, signal, () => (atomic) => atomic.delete(lockKey(key)));
    },

    async inspect({ key, signal }): Promise<HolderInfo | null> {
      const [lock] = await read(key, signal);
      const held = live(lock);
      if (!held) return null;
      return held.done === undefined
        ? { owner: held.owner, token: held.token }
        : { owner: held.owner, token: held.token, ttlLeft: held.done - Date.now(), done: true };
    },

    // The holder's lease becomes its completed fire's record, which KV may delete after retain
    // (expireIn) and every reader counts as gone once its `done` time passed on its own clock.
    complete({ key, nonce, retain, signal }): Promise<boolean> {
      check(Number.isSafeInteger(retain) && retain >= 1, WHERE, "retain must be a positive integer");
      return end("complete", key, nonce, signal, (held) => {
        const { owner, token, ttl } = held;
        const value = stored({ nonce: "", owner, token, ttl, done: Date.now() + retain });
        return (atomic) => atomic.set(lockKey(key), value, { expireIn: retain });
      });
    },

    async raiseFence({ key, nonce, token, signal }): Promise<boolean> {
      check(Number.isSafeInteger(token) && token > 0, WHERE, "token must be a positive integer");
      return loop(key, signal, async (lock, fence) => {
        const held = leaseOf(lock);
        if (held?.nonce !== nonce) return false;
        const lease = { ...held, token: Math.max(held.token, token) };
        return (await fenced(
          "raise fence for",
          key,
          lock,
          fence,
          lease,
          Math.max(counter(fence), token),
          signal,
        ))
          ? true
          : undefined;
      });
    },
  };
}
