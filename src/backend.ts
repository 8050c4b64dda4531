/**
 * The contract between the core and a storage backend. A backend knows only its wire
 * protocol: the core owns time (deadlines, renewal, waiting) and never trusts a backend's
 * clock. Every method does one request (one `fetch` for the HTTP backends) and may be
 * aborted through `signal`; a backend rejects with the signal's reason when aborted and with
 * a {@link BackendError} when the backend fails.
 *
 * @module
 */
import { check } from "./errors.ts";

/** What every request carries: the lock's key, and a signal that aborts the request. */
export interface KeyRequest {
  /** The lock's key: a mutex's name, or a semaphore's slot key. */
  key: string;
  /**
   * Aborts the request; the backend then rejects with the signal's reason. Absent when nobody
   * bounds the request, or when the core bounds it itself (docs/DESIGN.md §4.8).
   */
  signal?: AbortSignal | undefined;
}

/** An {@link Backend.acquire} request. */
export interface AcquireRequest extends KeyRequest {
  /** Who holds the lease, for display (`inspect` gives it back exactly). */
  owner: string;
  /** The proof of ownership that renew and release present. */
  nonce: string;
  /** How long the lease lives on the backend without renewal, in ms. */
  ttl: number;
  /** {@link ObservedExpiry}: the holder's version the core saw unchanged long enough. */
  takeover?: string;
  /**
   * {@link SharedLocks}: the waiting `acquire()` call this attempt belongs to (one id for all its
   * attempts). Refused, the backend marks a writer waiting under it for `ttl` ms; granted, it
   * removes that mark. A backend without `acquireShared` ignores it.
   */
  waiter?: string;
}

/** A granted acquire: the lease's fencing token. */
export interface AcquireGranted {
  /** Granted. */
  ok: true;
  /** The fencing token, strictly greater than every token handed out before for this key. */
  token: number;
}

/** A refused acquire: someone else holds the lock, or ({@link FireRecord}) it holds a done record. */
export interface AcquireRefused extends ObservedRefusal {
  /** Refused. */
  ok: false;
  /** ms until the current lease expires on the backend, when known. */
  retryAfter?: number;
  /**
   * {@link FireRecord}: the key holds the record of a completed fire, written by `complete`: who
   * ran it and with which token. Answered instead of `retryAfter`: the key will not be free
   * before the record's `retain` ends.
   */
  done?: FireHolder;
}

/** Who completed a fire ({@link FireRecord}): the runner's owner and its lease's token. */
export interface FireHolder {
  /** The runner's owner, exactly as it acquired with it. */
  owner: string;
  /** The token of the runner's lease. */
  token: number;
}

/** What a backend answers to an acquire attempt. */
export type AcquireResult = AcquireGranted | AcquireRefused;

/** An {@link Backend.renew} request. */
export interface RenewRequest extends KeyRequest {
  /** The nonce of the acquire that took the lease. */
  nonce: string;
  /** The new ttl, in ms from now. */
  ttl: number;
}

/** A {@link Backend.release} request. */
export interface ReleaseRequest extends KeyRequest {
  /** The nonce of the acquire that took the lease. */
  nonce: string;
}

/** An {@link Backend.inspect} request. */
export type InspectRequest = KeyRequest;

/** The current holder of a lock as the backend sees it. Advisory: it may be stale when read. */
export interface HolderInfo extends QueuedHolderInfo {
  /** The holder's owner, exactly as it acquired with it. */
  owner: string;
  /** The holder's fencing token. */
  token: number;
  /** ms left on the backend's own expiry, when known. */
  ttlLeft?: number;
  /** {@link FireRecord}: the key holds the record of a completed fire, not a lease (`ttlLeft`: of the record). */
  done?: boolean;
  /**
   * {@link SharedLocks}: the key is held in shared mode by this many live shared leases; the holder
   * reported (owner, token, ttlLeft) is the newest of them.
   */
  readers?: number;
}

/** The methods every backend has. */
export interface BackendBase {
  /** A short name used in error messages, such as `"upstash"`. */
  readonly name: string;
  /** Inclusive ttl bounds in ms; `createMutex` rejects a ttl outside them. */
  readonly ttlRange?: readonly [min: number, max: number];
  /**
   * Takes the lock `key` for `ttl` ms when it is free (or expired), recording `nonce` as the
   * proof of ownership and `owner` for display, and returns a fencing token strictly greater
   * than every token handed out before for this key. When it is taken, answers `ok: false`.
   * With `expiry: "observed"`, `takeover` is the holder's version the core saw unchanged long
   * enough: take the lock if its record still has that version (a compare-and-set).
   */
  acquire(r: AcquireRequest): Promise<AcquireResult>;
  /** Extends the lock to `ttl` ms from now if `nonce` still owns it; `false` when it does not. */
  renew(r: RenewRequest): Promise<boolean>;
  /** Frees the lock if `nonce` owns it; does nothing otherwise. */
  release(r: ReleaseRequest): Promise<void>;
  /** The current holder, or null when the lock is free. */
  inspect(r: InspectRequest): Promise<HolderInfo | null>;
}

/**
 * Optional capability: expiry by observation, for a store that never expires a record by itself
 * (Deno KV, DynamoDB).
 */
export interface ObservedExpiry {
  /**
   * How a held lock expires. `"store"` (the default): the store expires it by itself, no earlier
   * than `ttl` after it applied the write. `"observed"`: the store never expires it (Deno KV,
   * DynamoDB); a refused acquire answers the holder's record `version` and `ttl`, and the core
   * asks to take the lock over (`takeover`: that version) only once it has seen that version
   * unchanged for the holder's ttl plus a margin on its own monotonic clock.
   */
  readonly expiry?: "store" | "observed";
}

/** What a refused acquire answers on a backend with {@link ObservedExpiry}. */
export interface ObservedRefusal {
  /** The version of the holder's record: any string that changes with every write of it. */
  version?: string;
  /** The ttl the holder wrote its record with, in ms. */
  ttl?: number;
}

/** An {@link QueuedAcquire.acquireQueued} request: an acquire that waits in line. */
export interface QueuedAcquireRequest extends KeyRequest {
  /** Who holds the lease, for display. */
  owner: string;
  /** The proof of ownership that renew and release present. */
  nonce: string;
  /** How long the lease lives on the backend without renewal, in ms. */
  ttl: number;
  /** The caller in line: one id for every attempt of one `acquire()` call. */
  waiter: string;
  /** How long the backend may hold the request open, in ms. */
  hold: number;
}

/** Optional capability: waiting in line (docs/DESIGN.md §4.7). */
export interface QueuedAcquire {
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
  acquireQueued?(r: QueuedAcquireRequest): Promise<AcquireResult>;
}

/** What {@link Backend.inspect} adds on a backend with {@link QueuedAcquire}. */
export interface QueuedHolderInfo {
  /** How many callers wait in the backend's queue, for a backend with `acquireQueued`. */
  waiters?: number;
}

/** An {@link AcquireAny.acquireAny} request: any free one of several keys. */
export interface AcquireAnyRequest {
  /** The keys to try, in order: a semaphore's slot keys. */
  keys: readonly string[];
  /** Who holds the lease, for display. */
  owner: string;
  /** The proof of ownership that renew and release present. */
  nonce: string;
  /** How long the lease lives on the backend without renewal, in ms. */
  ttl: number;
  /** Aborts the request. */
  signal?: AbortSignal | undefined;
}

/** What {@link AcquireAny.acquireAny} answers: the token and which key it took, or a refusal. */
export type AcquireAnyResult =
  | (AcquireGranted & {
      /** The index in `keys` of the key it took. */
      index: number;
    })
  | { ok: false; retryAfter?: number };

/** An {@link AcquireAny.releaseAny} request. */
export interface ReleaseAnyRequest {
  /** The keys of the `acquireAny` that got no answer. */
  keys: readonly string[];
  /** Its nonce. */
  nonce: string;
  /** Aborts the request. */
  signal?: AbortSignal | undefined;
}

/** Optional capability: a semaphore's acquire and give-back in one request (docs/DESIGN.md §15). */
export interface AcquireAny {
  /**
   * Optional: any free one of several locks in one request, for `createSemaphore` (one lock per
   * permit slot: `keys` are the slot keys in order). Exactly as if {@link Backend.acquire} had been
   * tried on each key in the given order and the first grant kept: the same per-key fence counter
   * and key layout, so instances with and without it work together on one store. Answers the
   * token and the `index` of the key it took, or `ok: false` with `retryAfter` the earliest
   * expiry among the keys. One request. The core never uses it on a backend with
   * `expiry: "observed"` (a takeover is per key there).
   */
  acquireAny?(r: AcquireAnyRequest): Promise<AcquireAnyResult>;
  /**
   * Optional, beside `acquireAny`: gives back an `acquireAny` that got no answer (it may have
   * taken any one of `keys`). Exactly as if {@link Backend.release} had been called with `nonce`
   * on each key: frees the key that `nonce` holds and does nothing to the others, nor anything
   * at all when `nonce` holds none. One request. Without it, `createSemaphore` gives back with one
   * release per key, one at a time, stopping at the first that fails (docs/DESIGN.md §15).
   */
  releaseAny?(r: ReleaseAnyRequest): Promise<void>;
}

/** A {@link RaiseFence.raiseFence} request. */
export interface RaiseFenceRequest extends KeyRequest {
  /** The holder's owner, for a backend that must write it again alongside the token. */
  owner: string;
  /** The holder's nonce. */
  nonce: string;
  /** The token to raise the lease's token and the key's fence counter to. */
  token: number;
}

/** Optional capability: raising a held lease's token; `leasehold/quorum` needs it. */
export interface RaiseFence {
  /**
   * Optional; `leasehold/quorum` needs it. If `nonce` holds `key`, makes the lease's token
   * `token` when that is greater (so `inspect` reports it) and the key's fence counter at least
   * `token`, so that every later acquire answers a greater token; answers `true`. Answers `false`
   * and changes nothing when `nonce` does not hold `key`. One request. `owner` is the holder's
   * owner, for a backend that must write it again alongside the token.
   */
  raiseFence?(r: RaiseFenceRequest): Promise<boolean>;
}

/** A {@link FireRecord.complete} request. */
export interface CompleteRequest extends KeyRequest {
  /** The nonce of the acquire that took the lease. */
  nonce: string;
  /** How long the done record lasts, in ms (an integer from 1 to 2 147 483 647). */
  retain: number;
}

/** Optional capability: recording a completed fire, for `runOnce` (docs/DESIGN.md §17). */
export interface FireRecord {
  /**
   * Optional: the `retain` values (ms, inclusive) this backend can keep a record for, when it is
   * narrower than 1 … 2 147 483 647; `runOnce` refuses another at the call, naming the backend
   * and the range.
   */
  readonly retainRange?: readonly [min: number, max: number];
  /**
   * Optional; `runOnce` needs it. Atomically, if `nonce` holds `key`: replaces the lease with a
   * done record (the lease's owner and token) that the store keeps for `retain` ms, which frees
   * the lock, and answers `true`. Answers `false` and changes nothing when `nonce` does not hold
   * `key` (the lease was lost). The key's fence counter is untouched, so an acquire after the
   * record expired answers a greater token. While the record lasts, `acquire` (and `acquireQueued`)
   * on `key` answers `{ ok: false, done: { owner, token } }` without `retryAfter`, `acquireAny`
   * counts the key as taken, renew, release and raiseFence treat it as held by no nonce of theirs,
   * and `inspect` answers the owner and token with `done: true`. One request.
   *
   * A backend with it also draws the token of a fire's key from the fence counter of its mutex
   * name: `acquire` (and `acquireQueued`, `raiseFence`) on a key `k` uses the counter of
   * `counterOf(k)` (exported from `leasehold`), which is the mutex name for a fire's key
   * (`<name>:fire:…`) and `k` itself for any other, and keeps no counter per fire. So tokens
   * increase across a name's fires and plain leases, and nothing of a fire outlives its record
   * (docs/DESIGN.md §17). The conformance suite checks both.
   */
  complete?(r: CompleteRequest): Promise<boolean>;
}

/**
 * Optional capability: shared (reader) leases beside the exclusive ones (docs/DESIGN.md §18). Its
 * three methods come together on a backend that expires locks itself (not `expiry: "observed"`);
 * that is the capability (`capabilities(backend).shared`), and a mutex refuses `mode: "shared"` on
 * a backend without it.
 */
export interface SharedLocks {
  /**
   * Optional: takes a shared lease on `key` for `ttl` ms under `nonce` when no exclusive lease is
   * live there and no writer is marked waiting (an {@link AcquireRequest.waiter} of a refused
   * `acquire` within its ttl); any number of shared leases hold at once. Answers a token drawn
   * from the same fence counter as `acquire` (`counterOf(key)`), so tokens strictly increase
   * across both modes; refused, `ok: false` with `retryAfter` the exclusive holder's time left
   * when known. On a backend with it, `acquire` is refused while any shared lease is live, a
   * refused `acquire` with a `waiter` marks that writer waiting for its `ttl`, a granted one
   * removes its mark, and `releaseShared` with a waiter's id as `nonce` removes that mark (a writer
   * that gave up). One request.
   *
   * On a backend that keeps a line ({@link QueuedAcquire.acquireQueued}), a waiting shared
   * `acquire()` sends its attempts here with `waiter` and `hold` as it sends a writer's to
   * `acquireQueued`: the reader waits in the same line, which then is the writer preference (first
   * come, first served across both modes), and `releaseShared` with its `waiter` id takes it out.
   * On any other backend the core sends a reader's attempts with neither.
   */
  acquireShared?(r: AcquireRequest & { hold?: number }): Promise<AcquireResult>;
  /** Optional, with `acquireShared`: extends the shared lease of `nonce` to `ttl` ms from now; `false` when it has none. */
  renewShared?(r: RenewRequest): Promise<boolean>;
  /**
   * Optional, with `acquireShared`: frees the shared lease of `nonce`, or the waiting mark of the
   * writer whose `waiter` id is `nonce`; does nothing when there is neither.
   */
  releaseShared?(r: ReleaseRequest): Promise<void>;
}

/**
 * Optional capability: notice of releases, so that a waiting `acquire()` tries again as soon as
 * the lock it waits for may be free instead of after its pause (docs/DESIGN.md §19). Polling
 * stays: a lost notice costs what it costs without this, one pause.
 */
export interface ReleaseNotices {
  /**
   * Optional: listens for releases of `key`. Resolves once it listens: from then until `signal`
   * aborts, every release of `key` the store makes (an exclusive or a shared lease released, a
   * fire completed) calls `wake()` soon after; a call with no release behind it is allowed (the
   * waiter only tries again). Rejects when it cannot listen, or when `signal` aborts first; the
   * waiter then polls. When it stops listening on its own after it resolved (its connection
   * lost), it calls `wake(true)` once: the core ends the watch, and its waiters poll and listen
   * again after their next attempt. Aborting `signal` ends the watch. Every watch of one backend
   * object shares at most one extra connection, closed when the last watch ends.
   */
  watch?(key: string, wake: (stopped?: true) => void, signal: AbortSignal): Promise<void>;
}

/** A {@link RenewMany.renewMany} request: the renewals of several leases, in one request. */
export interface RenewManyRequest {
  /** Each lease to renew, as {@link Backend.renew} takes it (without a signal of its own). */
  requests: readonly Omit<RenewRequest, "signal">[];
  /** Aborts the request; the backend then rejects with the signal's reason. */
  signal?: AbortSignal | undefined;
}

/** Optional capability: renewing many leases in one request (docs/DESIGN.md §4.3, §5.1). */
export interface RenewMany {
  /**
   * Optional: exactly as if {@link Backend.renew} had been called on each of `requests`, in one
   * request: answers one boolean per request, in order, `false` for a key its nonce no longer holds
   * (the others are renewed all the same). Each key's renewal is atomic on its own; the batch
   * need not be. A failure of the request (a rejection) says nothing of any key. The core sends
   * it for the renewals of the exclusive leases of one backend object that come due in one cell
   * of the renewal grid (min(200 ms, ttl/50)), up to 512 in a request; a backend that cannot
   * renew some keys together (a Redis Cluster's keys in different slots) does not have it.
   */
  renewMany?(r: RenewManyRequest): Promise<boolean[]>;
}

/** Options of {@link Close.close}. */
export interface CloseOptions {
  /** The longest to wait for the work in flight, in ms (a finite number ≥ 0); the backend says its default. */
  timeout?: number;
}

/** Optional capability: a backend that sends requests of its own after its operations resolved. */
export interface Close {
  /**
   * Optional: for a backend whose operations leave requests running after they resolved (a
   * quorum's requests to its slower members). Refuses every operation from now on (a
   * non-retryable `BackendError`), waits until the requests in flight, and those they lead to,
   * have settled, at most `timeout` ms, then aborts what is left; nothing more is sent. Call it
   * after the last lease is released, before closing the clients the backend uses. Idempotent: a
   * second call waits for the first. Backends without requests of their own do not have it (their
   * operations wait for their one request): `await backend.close?.()` suits any backend.
   */
  close?(options?: CloseOptions): Promise<void>;
}

/**
 * A storage backend for {@link createMutex} and `createSemaphore`: the four methods every backend
 * has, and the optional capabilities. See `leasehold/testing` to check one.
 */
export interface Backend
  extends BackendBase,
    ObservedExpiry,
    QueuedAcquire,
    AcquireAny,
    RaiseFence,
    FireRecord,
    SharedLocks,
    ReleaseNotices,
    RenewMany,
    Close {}

/** The optional methods, each a function when present. */
const OPTIONAL = [
  "acquireQueued",
  "acquireAny",
  "releaseAny",
  "raiseFence",
  "complete",
  "acquireShared",
  "renewShared",
  "releaseShared",
  "watch",
  "renewMany",
  "close",
] as const;

/**
 * Throws a TypeError from `where` (such as `"createMutex:"`) unless `backend` has the shape of a
 * {@link Backend}: an object with a string `name`, the four methods, and each optional method a
 * function when present. `what` names it in the message.
 */
export function checkBackend(backend: unknown, where: string, what = "backend"): asserts backend is Backend {
  check(typeof backend === "object" && backend !== null, where, `${what} must be a Backend object`);
  const b = backend as Record<string, unknown>;
  const missing = ["acquire", "renew", "release", "inspect"].filter((m) => typeof b[m] !== "function");
  check(typeof b.name === "string", where, `${what}.name must be a string`);
  check(missing.length === 0, where, `${what} is missing method(s): ${missing.join(", ")}`);
  for (const m of OPTIONAL)
    check(
      b[m] === undefined || typeof b[m] === "function",
      where,
      `${what}.${m} must be a function when present`,
    );
}

/** What a backend can do beyond the exclusive lease every backend holds: see {@link capabilities}. */
export interface Capabilities {
  /** `mode: "shared"`: readers beside readers ({@link SharedLocks}; docs/DESIGN.md §18). */
  shared: boolean;
  /** Waiters wait in line and are handed a freed lock in about one round trip ({@link QueuedAcquire}). */
  queued: boolean;
  /** `runOnce` can record a completed fire ({@link FireRecord}). */
  once: boolean;
  /** A waiter is woken by the release of the lock it waits for, not only by its next poll ({@link ReleaseNotices}). */
  watch: boolean;
  /** The renewals of many leases go out together, one request per batch ({@link RenewMany}). */
  batch: boolean;
}

/**
 * Whether `b` has the three methods of {@link SharedLocks} and expires locks itself: shared leases
 * have no takeover by observation (docs/DESIGN.md §18). @internal
 */
export const canShare = (b: Backend): boolean =>
  b.expiry !== "observed" &&
  typeof b.acquireShared === "function" &&
  typeof b.renewShared === "function" &&
  typeof b.releaseShared === "function";

/**
 * What `backend` can do beyond the exclusive lease: shared mode, a line for waiters, a record of
 * completed fires.
 */
export function capabilities(backend: Backend): Capabilities {
  return {
    shared: canShare(backend),
    queued: typeof backend.acquireQueued === "function",
    once: typeof backend.complete === "function",
    watch: typeof backend.watch === "function",
    batch: typeof backend.renewMany === "function",
  };
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
