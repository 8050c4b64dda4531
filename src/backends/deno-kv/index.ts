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
 * `["leasehold", "fence", n]` the fencing counter (a decimal string) that never goes away, written
 * in the same atomic commit as the lease. Every read is strongly consistent. Values are strings
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

/** A Deno KV key part. */
export type KvKeyPart = string | number | bigint | boolean | Uint8Array;
/** A Deno KV key. */
export type KvKey = readonly KvKeyPart[];

/** An entry as `Deno.Kv` reads it: `versionstamp` null when the key does not exist. */
export interface KvEntryLike {
  value: unknown;
  versionstamp: string | null;
}

/** The part of `Deno.AtomicOperation` this backend uses. */
export interface KvAtomicLike {
  check(...checks: { key: KvKey; versionstamp: string | null }[]): KvAtomicLike;
  set(key: KvKey, value: unknown): KvAtomicLike;
  delete(key: KvKey): KvAtomicLike;
  commit(): Promise<{ ok: boolean; versionstamp?: string }>;
}

/** The part of `Deno.Kv` this backend uses; `Deno.openKv()` and `@deno/kv`'s `openKv()` fit. */
export interface KvLike {
  getMany(keys: KvKey[], options?: { consistency?: "strong" | "eventual" }): Promise<KvEntryLike[]>;
  atomic(): KvAtomicLike;
}

/** Options of {@link denoKv}. */
export interface DenoKvOptions {
  /** The key prefix every key of this backend starts with. Default `["leasehold"]`. */
  prefix?: KvKey;
}

interface Lease {
  nonce: string;
  owner: string;
  token: number;
  ttl: number;
}

const NAME = "deno-kv";
const WHERE = `[${NAME}]`;
/** Commits that lost a race to another writer are tried again this many times. */
const ATTEMPTS = 5;

/** `@deno/kv`'s Kv shows its value serializer (Deno's own does not). */
interface SerializerLike {
  encodeV8?: (value: unknown) => Uint8Array;
  decodeV8?: (bytes: Uint8Array) => unknown;
}

/**
 * The lease as stored: JSON with every non-ASCII character escaped (`\uXXXX`), so the string is
 * ASCII. `@deno/kv`'s makeLimitedV8Serializer (the one Bun needs) reads the characters U+0080 to
 * U+00FF back wrong (an owner "José" came back as "Jos\uFFFD"); JSON.parse reads both forms.
 */
const recordOf = (lease: Lease): string =>
  JSON.stringify(lease).replace(
    /[\u0080-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );

const foreign = (what: string) =>
  new BackendError(`the ${what} key holds a value leasehold did not write`, {
    backend: NAME,
    retryable: false,
  });

/** The lease an entry holds: null when none; a value leasehold did not write is an error. */
function leaseOf(entry: KvEntryLike | undefined): Lease | null {
  const v = entry?.value;
  if (v === null || v === undefined) return null;
  let lease: Partial<Lease> | undefined;
  try {
    lease = typeof v === "string" ? (JSON.parse(v) as Partial<Lease>) : undefined;
  } catch {}
  if (
    typeof lease?.nonce !== "string" ||
    typeof lease.owner !== "string" ||
    !Number.isSafeInteger(lease.token) ||
    typeof lease.ttl !== "number"
  ) {
    throw foreign("lock");
  }
  return lease as Lease;
}

/**
 * Creates a Deno KV backend for {@link createMutex}.
 *
 * @param kv A `Deno.Kv` (`await Deno.openKv()`), or `@deno/kv`'s `openKv()` on Node and Bun.
 * @param options The key `prefix`.
 * @returns A backend named `"deno-kv"` with `expiry: "observed"`, no ttl bounds of its own.
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
  // A record this KV's serializer would not read back is refused before it is written, rather than
  // leave a lock nobody can read: makeLimitedV8Serializer writes a string's length in one byte.
  const serializer = kv as KvLike & SerializerLike;
  const readsBack =
    typeof serializer.encodeV8 === "function" && typeof serializer.decodeV8 === "function"
      ? (value: string) => {
          try {
            return serializer.decodeV8!(serializer.encodeV8!(value)) === value;
          } catch {
            return false;
          }
        }
      : () => true;
  /** The record of `lease`, checked against the serializer. */
  const stored = (lease: Lease): string => {
    const value = recordOf(lease);
    check(
      readsBack(value),
      WHERE,
      `owner is too long for this KV: its value serializer does not read back the lock's record of ${value.length} characters (@deno/kv's makeLimitedV8Serializer, which Bun needs, stores strings of at most 255 bytes: an owner of up to about 170 ASCII characters)`,
      RangeError,
    );
    return value;
  };
  const lockKey = (key: string): KvKey => [...prefix, "lock", key];
  const fenceKey = (key: string): KvKey => [...prefix, "fence", key];
  // Each lease this backend wrote, with the versionstamp of that write, by nonce: renew and
  // release commit against it at once, without a read (the commit fails if it changed since).
  const written = new Map<string, KvEntryLike>();
  const wrote = (lease: Lease, value: string, versionstamp: string | undefined): void => {
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
  async function rewrite(key: string, entry: KvEntryLike, lease: Lease, signal?: AbortSignal) {
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

  /** The lease in `lock` when `nonce` holds it; else forgets what this backend wrote for `nonce`. */
  const ours = (lock: KvEntryLike, nonce: string): Lease | undefined => {
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
    lease: Lease,
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

  return {
    name: NAME,
    expiry: "observed",

    async acquire({ key, owner, nonce, ttl, signal, takeover }): Promise<AcquireResult> {
      return loop(key, signal, async (lock, fence) => {
        const held = leaseOf(lock);
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

    async renew({ key, nonce, ttl, signal }): Promise<boolean> {
      return loop(
        key,
        signal,
        async (lock) => {
          const held = ours(lock, nonce);
          if (!held) return false;
          return (await rewrite(key, lock, { ...held, ttl }, signal)) ? true : undefined;
        },
        nonce,
      );
    },

    async release({ key, nonce, signal }): Promise<void> {
      await loop(
        key,
        signal,
        async (lock) => {
          if (!ours(lock, nonce)) return true;
          const r = await io(
            "release",
            key,
            () =>
              kv
                .atomic()
                .check({ key: lockKey(key), versionstamp: lock.versionstamp })
                .delete(lockKey(key))
                .commit(),
            signal,
          );
          if (!r.ok) return undefined;
          written.delete(nonce);
          return true;
        },
        nonce,
      );
    },

    async inspect(key, signal): Promise<HolderInfo | null> {
      const [lock] = await read(key, signal);
      const held = leaseOf(lock);
      return held ? { owner: held.owner, token: held.token } : null;
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
