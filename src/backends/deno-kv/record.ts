// The lock's record as stored in Deno KV (ASCII JSON in a string, so Deno, Node and Bun all read
// it) and read back; the backend's name, which its errors carry.
import { BackendError } from "../../errors.ts";
import { check } from "../../options.ts";
import type { KvEntryLike, KvLike } from "./kv.ts";

export const NAME = "deno-kv";
export const WHERE: string = `[${NAME}]`;

/** A lease as stored in the lock's entry (not the public `Lease` handle). */
export interface LeaseRecord {
  nonce: string;
  owner: string;
  token: number;
  ttl: number;
  /**
   * A completed fire's record (`complete`, for runOnce), not a lease: the epoch ms (the writer's
   * clock) until which it lasts. Its nonce is "", which no caller's is.
   */
  done?: number;
}

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
const recordOf = (lease: LeaseRecord): string =>
  JSON.stringify(lease).replace(
    /[\u0080-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );

export const foreign = (what: string): BackendError =>
  new BackendError(`the ${what} key holds a value leasehold did not write`, {
    backend: NAME,
    retryable: false,
  });

/** The lease an entry holds: null when none; a value leasehold did not write is an error. */
export function leaseOf(entry: KvEntryLike | undefined): LeaseRecord | null {
  const v = entry?.value;
  if (v === null || v === undefined) return null;
  let lease: Partial<LeaseRecord> | undefined;
  try {
    lease = typeof v === "string" ? (JSON.parse(v) as Partial<LeaseRecord>) : undefined;
  } catch {}
  if (
    typeof lease?.nonce !== "string" ||
    typeof lease.owner !== "string" ||
    !Number.isSafeInteger(lease.token) ||
    typeof lease.ttl !== "number" ||
    (lease.done !== undefined && typeof lease.done !== "number")
  ) {
    throw foreign("lock");
  }
  return lease as LeaseRecord;
}

/**
 * The record of a lease as written to `kv`, refused (RangeError) when its serializer would not
 * read it back.
 */
export function recordWriter(kv: KvLike): (lease: LeaseRecord) => string {
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
  return (lease: LeaseRecord): string => {
    const value = recordOf(lease);
    check(
      readsBack(value),
      WHERE,
      `owner is too long for this KV: its value serializer does not read back the lock's record of ${value.length} characters (@deno/kv's makeLimitedV8Serializer, which Bun needs, stores strings of at most 255 bytes: an owner of up to about 170 ASCII characters)`,
      RangeError,
    );
    return value;
  };
}
