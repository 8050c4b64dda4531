// The part of Deno KV this backend uses, as types: Deno.openKv()'s Kv and @deno/kv's fit them.

/** A Deno KV key part. */
export type KvKeyPart = string | number | bigint | boolean | Uint8Array;
/** A Deno KV key. */
export type KvKey = readonly KvKeyPart[];

/** An entry as `Deno.Kv` reads it: `versionstamp` null when the key does not exist. */
export interface KvEntryLike {
  /** The value, or null when the key does not exist. */
  value: unknown;
  /** The entry's version, or null when the key does not exist. */
  versionstamp: string | null;
}

/** The part of `Deno.AtomicOperation` this backend uses. */
export interface KvAtomicLike {
  /** Commits only if each key still has its versionstamp (null: does not exist). */
  check(...checks: { key: KvKey; versionstamp: string | null }[]): KvAtomicLike;
  /** Writes `value` at `key`; `expireIn`: ms after which the store may delete it (not before). */
  set(key: KvKey, value: unknown, options?: { expireIn?: number }): KvAtomicLike;
  /** Deletes `key`. */
  delete(key: KvKey): KvAtomicLike;
  /** Applies the operation; `ok: false` when a check failed. */
  commit(): Promise<{ ok: boolean; versionstamp?: string }>;
}

/** The part of `Deno.Kv` this backend uses; `Deno.openKv()` and `@deno/kv`'s `openKv()` fit. */
export interface KvLike {
  /** Reads several keys at once. */
  getMany(keys: KvKey[], options?: { consistency?: "strong" | "eventual" }): Promise<KvEntryLike[]>;
  /** Starts an atomic operation. */
  atomic(): KvAtomicLike;
  /**
   * Optional: a stream of the keys' entries, each time one changes (`raw`: also when written
   * unchanged; Deno's and `@deno/kv`'s stores first send the entries as they are). Used to wake
   * waiters on release (docs/DESIGN.md §19); without it they poll.
   */
  watch?(keys: KvKey[], options?: { raw?: boolean }): ReadableStream<KvEntryLike[]>;
}
