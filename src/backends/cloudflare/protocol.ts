// The wire format between the backend, the Worker route and the Durable Object: one JSON
// request per operation, checked the same way on both sides of the route, and which object
// serves it (objectName).
import { counterOf, MAX_LIMIT, slotKey, slotOf } from "../../slots.ts";
import { MAX_DELAY } from "../../time.ts";
import { readBody } from "../shared/http.ts";

/** The backend's name in errors, and the prefix of option errors. */
export const NAME = "cloudflare";

/**
 * How long a waiter keeps its place in line after an answer, and how long a freed lock stays
 * reserved for the oldest waiter while it is between two attempts, in ms. The core sends again
 * within about one round trip; a waiter that does not (it gave up, crashed, lost its connection)
 * is dropped after this and the next one is served.
 */
export const KEEP_PLACE_MS = 1_000;

/** The longest a request is held open in line, whatever it asks, in ms. */
export const MAX_HOLD_MS = 30_000;

/** The largest request body the route and the object read, in bytes (a request is < 1 KiB). */
export const MAX_REQUEST_BYTES = 8_192;

/**
 * The highest token a `raise` may set: 2^52. A raise is how leasehold/quorum brings a member up to
 * the quorum's token, and a member that was wiped or left behind may need any jump from its own
 * counter, so the bound is absolute, not relative to the counter. 2^52 is far beyond any count of
 * acquires (a million a second for 142 years), and it leaves 2^52 grants, one request each, before
 * a counter could pass Number.MAX_SAFE_INTEGER: no sequence of requests through the route can
 * exhaust a lock's fence (docs/DESIGN.md §5.6).
 */
export const MAX_RAISE = 4_503_599_627_370_496;

/**
 * The HTTP status of an acquire on a lock whose fence counter has reached
 * Number.MAX_SAFE_INTEGER (only a counter raised there before {@link MAX_RAISE} existed can be
 * there): no later token can be granted. The body is `{ error, key? }`, `key` the lock refused.
 */
export const EXHAUSTED = 409;

/** One operation, as sent to the route and forwarded to the object. */
export type LockRequest =
  | { op: "acquire"; key: string; owner: string; nonce: string; ttl: number; waiter?: string; hold?: number }
  | { op: "renew"; key: string; nonce: string; ttl: number }
  | { op: "release"; key: string; nonce: string }
  | { op: "inspect"; key: string }
  | { op: "raise"; key: string; nonce: string; token: number }
  | { op: "complete"; key: string; nonce: string; retain: number }
  | { op: "acquireAny"; name: string; slots: number[]; owner: string; nonce: string; ttl: number }
  | { op: "releaseAny"; name: string; slots: number[]; nonce: string }
  | {
      op: "acquireShared";
      key: string;
      owner: string;
      nonce: string;
      ttl: number;
      waiter?: string;
      hold?: number;
    }
  | { op: "renewShared"; key: string; nonce: string; ttl: number }
  | { op: "releaseShared"; key: string; nonce: string };

/** Who completed a fire: the runner's owner and token (`complete`, for runOnce). */
export interface Done {
  owner: string;
  token: number;
}

/** What the object answers to each operation (HTTP 200, JSON). */
export interface Replies {
  /** `done`: the key holds the record of a completed fire (no retryAfter: it is not freed soon). */
  acquire: { ok: true; token: number } | { ok: false; retryAfter: number } | { ok: false; done: Done };
  /** `index`: the position in `slots` of the slot taken. */
  acquireAny: { ok: true; token: number; index: number } | { ok: false; retryAfter: number };
  renew: { ok: boolean };
  release: { ok: true };
  raise: { ok: boolean };
  complete: { ok: boolean };
  releaseAny: { ok: true };
  /** A shared lease: answered as an acquire. */
  acquireShared: Replies["acquire"];
  renewShared: { ok: boolean };
  releaseShared: { ok: true };
  /**
   * `done`: the holder is the record of a completed fire (`ttlLeft`: of the record). `readers`: the
   * key is held shared by that many live shared leases, and the holder is the newest of them.
   */
  inspect: {
    holder: { owner: string; token: number; ttlLeft: number; done?: true; readers?: number } | null;
    waiters: number;
  };
}

const str = (v: unknown, max: number): v is string => typeof v === "string" && v !== "" && v.length <= max;
const ms = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

/**
 * The request in `body`, or a message saying what is wrong with it. The object trusts nothing
 * the route did: both check.
 */
export function parseRequest(body: string): LockRequest | string {
  let r: Record<string, unknown>;
  try {
    r = JSON.parse(body) as Record<string, unknown>;
  } catch {
    return "the body is not JSON";
  }
  if (typeof r !== "object" || r === null) return "the body is not a JSON object";
  if (r.op === "acquireAny" || r.op === "releaseAny") {
    const { op, slots } = r;
    if (
      !str(r.name, 1_000) ||
      !Array.isArray(slots) ||
      slots.length === 0 ||
      slots.length > MAX_LIMIT ||
      !slots.every((slot) => ms(slot) && slot < MAX_LIMIT)
    )
      return `${op} needs name and slots: 1-${MAX_LIMIT} integers from 0 to ${MAX_LIMIT - 1}`;
    if (op === "releaseAny") return str(r.nonce, 256) ? (r as LockRequest) : "releaseAny needs nonce";
    if (!str(r.nonce, 256) || !ms(r.ttl) || r.ttl === 0 || !str(r.owner, 1_024))
      return "acquireAny needs nonce, owner and ttl > 0";
    return r as LockRequest;
  }
  if (!str(r.key, 1_024)) return "key must be a string of 1-1024 characters";
  const nonce = str(r.nonce, 256);
  const ttl = ms(r.ttl) && (r.ttl as number) > 0;
  switch (r.op) {
    case "acquire":
    case "acquireShared":
      if (!nonce || !ttl || !str(r.owner, 1_024)) return `${r.op} needs nonce, owner and ttl > 0`;
      if (r.waiter !== undefined && (!str(r.waiter, 256) || !ms(r.hold)))
        return `${r.op} with waiter needs hold >= 0`;
      return r as LockRequest;
    case "renew":
    case "renewShared":
      return nonce && ttl ? (r as LockRequest) : `${r.op} needs nonce and ttl > 0`;
    case "release":
    case "releaseShared":
      return nonce ? (r as LockRequest) : `${r.op} needs nonce`;
    case "inspect":
      return r as LockRequest;
    case "raise":
      return nonce && ms(r.token) && (r.token as number) > 0 && (r.token as number) <= MAX_RAISE
        ? (r as LockRequest)
        : `raise needs nonce and a token from 1 to ${MAX_RAISE} (2^52)`;
    case "complete":
      return nonce && ms(r.retain) && (r.retain as number) > 0 && (r.retain as number) <= MAX_DELAY
        ? (r as LockRequest)
        : `complete needs nonce and a retain from 1 to ${MAX_DELAY} ms`;
    default:
      return "op must be acquire, acquireAny, renew, release, releaseAny, inspect, raise, complete, acquireShared, renewShared or releaseShared";
  }
}

/** A JSON reply with `status`. */
export function json(value: unknown, status = 200): Response {
  return new Response(JSON.stringify(value), {
    status,
    headers: { "content-type": "application/json", "cache-control": "no-store" },
  });
}

/**
 * The body of `request`, at most {@link MAX_REQUEST_BYTES}; `undefined` when longer. The route and
 * the object both read it this way: a longer body is refused as soon as its declared length or the
 * bytes that have arrived pass the cap, and the rest is never read (src/backends/shared/http.ts
 * `readBody`, which caps every reply the backends read).
 */
export async function readRequest(request: Request): Promise<string | undefined> {
  return readBody(request, MAX_REQUEST_BYTES);
}

/**
 * The name of the object that holds `key` (`namespace.idFromName(objectName(key))`): the key
 * itself, except for a semaphore's slot key (src/slots.ts `slotOf`: `name:permit:<slot>`), held by
 * the object of the semaphore's `name` with every other slot of it, so that one request can take
 * any free one, and a fire's key (`name:fire:<id>`, runOnce), held by the object of its mutex's
 * name (src/slots.ts `counterOf`), whose fence counter its tokens come from (docs/DESIGN.md §17).
 */
export function objectName(key: string): string {
  return slotOf(key)?.name ?? counterOf(key);
}

/** Whether `r` is a semaphore's request (its slots of one object), by its op: never by its fields. */
export const isSlotRequest = (r: LockRequest): r is Extract<LockRequest, { slots: number[] }> =>
  r.op === "acquireAny" || r.op === "releaseAny";

/** The object that serves request `r`. */
export function objectOf(r: LockRequest): string {
  return isSlotRequest(r) ? r.name : objectName(r.key);
}

/**
 * The request that tries `keys` in order in one object: when every key is a slot key of one
 * semaphore, as {@link slotKey} writes it. `undefined` otherwise.
 */
export function slotsOf(keys: readonly string[]): { name: string; slots: number[] } | undefined {
  const first = keys.length > 0 ? slotOf(keys[0]!) : null;
  if (!first || keys.length > MAX_LIMIT) return undefined;
  const slots: number[] = [];
  for (const key of keys) {
    const s = slotOf(key);
    if (!s || s.name !== first.name) return undefined;
    slots.push(s.slot);
  }
  return { name: first.name, slots };
}
