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
  /** How many callers wait in the backend's queue, for a backend with `acquireQueued`. */
  waiters?: number;
}

/** A storage backend for {@link createMutex} and `createSemaphore`. See `leasehold/testing` to check one. */
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
  /**
   * Optional: waiting in line. Like {@link Backend.acquire}, but when the lock is taken the caller
   * `waiter` (one id for every attempt of one `acquire()` call) joins a first-come-first-served
   * queue, and the request may be held open for up to `hold` ms: it answers `ok: true` as soon as
   * the lock is handed to this waiter (on release or expiry, without it polling), or `ok: false`
   * when `hold` passed first. The waiter keeps its place for a short bounded window after each
   * answer (the backend says how long) and keeps it by sending again; a `release` with the nonce
   * of its last attempt takes it out of the line. A lock freed while the oldest waiter is between
   * two attempts stays reserved for it for that window, then the next one is served.
   *
   * The core uses it for `acquire()` (and so `lead()`) when present, never for `tryAcquire()` or
   * `timeout: 0`, with `hold` ≤ min(ttl / 4, 10 s) and below the attempt's own bound; its deadline
   * still counts from the time the request was sent (docs/DESIGN.md §4.7).
   */
  acquireQueued?(r: {
    key: string;
    owner: string;
    nonce: string;
    ttl: number;
    waiter: string;
    hold: number;
    signal?: AbortSignal;
  }): Promise<AcquireResult>;
  /**
   * Optional: any free one of several locks in one request, for `createSemaphore` (one lock per
   * permit slot: `keys` are the slot keys in order). Exactly as if {@link Backend.acquire} had been
   * tried on each key in the given order and the first grant kept: the same per-key fence counter
   * and key layout, so instances with and without it work together on one store. Answers the
   * token and the `index` of the key it took, or `ok: false` with `retryAfter` the earliest
   * expiry among the keys. One request. The core never uses it on a backend with
   * `expiry: "observed"` (a takeover is per key there).
   */
  acquireAny?(r: {
    keys: readonly string[];
    owner: string;
    nonce: string;
    ttl: number;
    signal?: AbortSignal;
  }): Promise<{ ok: true; token: number; index: number } | { ok: false; retryAfter?: number }>;
  /**
   * Optional, beside `acquireAny`: gives back an `acquireAny` that got no answer (it may have
   * taken any one of `keys`). Exactly as if {@link Backend.release} had been called with `nonce`
   * on each key: frees the key that `nonce` holds and does nothing to the others, nor anything
   * at all when `nonce` holds none. One request. Without it, `createSemaphore` gives back with one
   * release per key, one at a time, stopping at the first that fails (docs/DESIGN.md §15).
   */
  releaseAny?(r: { keys: readonly string[]; nonce: string; signal?: AbortSignal }): Promise<void>;
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
