/**
 * The contract between the core and a storage backend. A backend knows only its wire
 * protocol: the core owns time (deadlines, renewal, waiting) and never trusts a backend's
 * clock. Every method does one request (one `fetch` for the HTTP backends) and may be
 * aborted through `signal`; a backend rejects with the signal's reason when aborted and with
 * a {@link BackendError} when the backend fails.
 *
 * @module
 */

/** What a backend answers to an acquire attempt. */
export type AcquireResult =
  | { ok: true; token: number }
  | {
      ok: false;
      /** ms until the current lease expires on the backend, when known. */
      retryAfter?: number;
      /**
       * A backend with `expiry: "observed"` must answer the version of the holder's record (any
       * string that changes with every write of it) and the ttl the holder wrote it with.
       */
      version?: string;
      ttl?: number;
    };

/** The current holder of a lock as the backend sees it. Advisory: it may be stale when read. */
export interface HolderInfo {
  owner: string;
  token: number;
  /** ms left on the backend's own expiry, when known. */
  ttlLeft?: number;
}

/** A storage backend for {@link createMutex}. See `leasehold/testing` to check one. */
export interface Backend {
  /** A short name used in error messages, such as `"upstash"`. */
  readonly name: string;
  /** Inclusive ttl bounds in ms; `createMutex` rejects a ttl outside them. */
  readonly ttlRange?: readonly [min: number, max: number];
  /**
   * How a held lock expires. `"store"` (the default): the store expires it by itself, no earlier
   * than `ttl` after it applied the write. `"observed"`: the store never expires it (Deno KV,
   * DynamoDB); a refused acquire answers the holder's record `version` and `ttl`, and the core
   * asks to take the lock over (`takeover`: that version) only once it has seen that version
   * unchanged for the holder's ttl plus a margin on its own monotonic clock.
   */
  readonly expiry?: "store" | "observed";
  /**
   * Takes the lock `key` for `ttl` ms when it is free (or expired), recording `nonce` as the
   * proof of ownership and `owner` for display, and returns a fencing token strictly greater
   * than every token handed out before for this key. When it is taken, answers `ok: false`.
   * With `expiry: "observed"`, `takeover` is the holder's version the core saw unchanged long
   * enough: take the lock if its record still has that version (a compare-and-set).
   */
  acquire(r: {
    key: string;
    owner: string;
    nonce: string;
    ttl: number;
    signal?: AbortSignal;
    takeover?: string;
  }): Promise<AcquireResult>;
  /** Extends the lock to `ttl` ms from now if `nonce` still owns it; `false` when it does not. */
  renew(r: { key: string; nonce: string; ttl: number; signal?: AbortSignal }): Promise<boolean>;
  /** Frees the lock if `nonce` owns it; does nothing otherwise. */
  release(r: { key: string; nonce: string; signal?: AbortSignal }): Promise<void>;
  /** The current holder, or null when the lock is free. */
  inspect(key: string, signal?: AbortSignal): Promise<HolderInfo | null>;
  /**
   * Optional; `leasehold/quorum` needs it. If `nonce` holds `key`, makes the lease's token
   * `token` when that is greater (so `inspect` reports it) and the key's fence counter at least
   * `token`, so that every later acquire answers a greater token; answers `true`. Answers `false`
   * and changes nothing when `nonce` does not hold `key`. One request. `owner` is the holder's
   * owner, for a backend that must write it again alongside the token.
   */
  raiseFence?(r: {
    key: string;
    owner: string;
    nonce: string;
    token: number;
    signal?: AbortSignal;
  }): Promise<boolean>;
}

/**
 * The part of `fetch` the HTTP backends use. Any standard `fetch` fits; pass your own to add
 * tracing, a proxy or a test double.
 */
export type FetchLike = (
  url: string,
  init: {
    method: string;
    headers: Record<string, string>;
    body?: string;
    signal?: AbortSignal;
    /** Always `"manual"`: leasehold never follows a redirect. */
    redirect?: "manual";
    /** `"no-store"`, unless the runtime refused the field once (old workerd compatibility dates). */
    cache?: "no-store";
  },
) => Promise<{
  readonly status: number;
  readonly headers: { get(name: string): string | null };
  /** The body as a stream, so a reply longer than the cap is not read whole. Optional for test doubles. */
  readonly body?: { getReader(): ReadableStreamDefaultReader<Uint8Array>; cancel(): Promise<void> } | null;
  text(): Promise<string>;
}>;
