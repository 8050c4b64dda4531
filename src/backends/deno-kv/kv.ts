// The part of Deno KV this backend uses, as types: Deno.openKv()'s Kv and @deno/kv's fit them.

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
