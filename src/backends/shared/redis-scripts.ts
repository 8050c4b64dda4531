// The Redis lock shared by the upstash backend (REST) and the redis backend (any TCP client): the
// Lua scripts (one per operation, each run atomically by Redis), the key layout, and the reading
// of their replies. One module, so that the two cannot drift: a lock taken through one excludes
// the other on the same database.
//
// Keys, for a lock named `n` and a prefix `p`: `p{n}` holds the lease (a string
// `nonce|token|owner` with a PX expiry) and `p{n}:fence` the fencing counter, which never expires
// so tokens keep increasing across holders. The braces are a Redis hash tag: both keys of a name
// live in one slot, as a multi-key script needs on a cluster. A semaphore's slot `s:permit:i`
// (createSemaphore) is `p{s}:permit:i` and `p{s}:permit:i:fence`: the semaphore's name is the hash
// tag, so all its slots live in one cluster slot, as ACQUIRE_ANY needs (docs/DESIGN.md §15).
import type { AcquireResult, Backend, HolderInfo } from "../../backend.ts";
import { BackendError } from "../../errors.ts";
import { check } from "../../options.ts";

// KEYS[1] lock, KEYS[2] fence; ARGV nonce, ttl (ms), owner.
// Free: bump the fence, set the lock and return {1, token}. Already ours (a retried acquire):
// extend and return {2, token}, the same token. Taken: return the holder's value and PTTL.
export const ACQUIRE = `local v=redis.call("GET",KEYS[1])
if v then
if string.sub(v,1,#ARGV[1]+1)==ARGV[1].."|" then
redis.call("PEXPIRE",KEYS[1],ARGV[2])
return {2,tonumber(string.match(v,"^[^|]*|(%d+)|"))}
end
return {0,v,redis.call("PTTL",KEYS[1])}
end
local t=redis.call("INCR",KEYS[2])
redis.call("SET",KEYS[1],ARGV[1].."|"..string.format("%d",t).."|"..ARGV[3],"PX",ARGV[2])
return {1,t}`;

// KEYS lock1, fence1, lock2, fence2, ...; ARGV nonce, ttl (ms), owner. ACQUIRE on each pair in
// order, stopping at the first grant: {1 or 2, token, index from 0}; all taken: {0, the smallest
// PTTL among them, or -1}.
export const ACQUIRE_ANY = `local m=-1
for i=1,#KEYS,2 do
local v=redis.call("GET",KEYS[i])
if not v then
local t=redis.call("INCR",KEYS[i+1])
redis.call("SET",KEYS[i],ARGV[1].."|"..string.format("%d",t).."|"..ARGV[3],"PX",ARGV[2])
return {1,t,(i-1)/2}
end
if string.sub(v,1,#ARGV[1]+1)==ARGV[1].."|" then
redis.call("PEXPIRE",KEYS[i],ARGV[2])
return {2,tonumber(string.match(v,"^[^|]*|(%d+)|")),(i-1)/2}
end
local p=redis.call("PTTL",KEYS[i])
if p>0 and (m<0 or p<m) then m=p end
end
return {0,m}`;

// KEYS[1] lock; ARGV nonce, ttl. 1 when extended, 0 when the lock is not ours.
export const RENEW = `local v=redis.call("GET",KEYS[1])
if v and string.sub(v,1,#ARGV[1]+1)==ARGV[1].."|" then return redis.call("PEXPIRE",KEYS[1],ARGV[2]) end
return 0`;

// KEYS[1] lock; ARGV nonce. 1 when deleted, 0 when the lock is not ours.
export const RELEASE = `local v=redis.call("GET",KEYS[1])
if v and string.sub(v,1,#ARGV[1]+1)==ARGV[1].."|" then return redis.call("DEL",KEYS[1]) end
return 0`;

// KEYS[1] lock, KEYS[2] fence; ARGV nonce, token. When the lock is ours: its value's token and
// the fence counter become at least the token (the expiry is kept); 1. Else 0.
export const RAISE = `local v=redis.call("GET",KEYS[1])
if not (v and string.sub(v,1,#ARGV[1]+1)==ARGV[1].."|") then return 0 end
local t=tonumber(ARGV[2])
local n,o=string.match(v,"^[^|]*|(%d+)|(.*)$")
if tonumber(n)<t then redis.call("SET",KEYS[1],ARGV[1].."|"..ARGV[2].."|"..o,"KEEPTTL") end
if tonumber(redis.call("GET",KEYS[2]) or "0")<t then redis.call("SET",KEYS[2],ARGV[2]) end
return 1`;

// KEYS[1] lock. nil when free, else the value and its PTTL. Read-only: may run with EVAL_RO.
export const INSPECT = `local v=redis.call("GET",KEYS[1])
if not v then return nil end
return {v,redis.call("PTTL",KEYS[1])}`;

/** The owner and token of a lock value `nonce|token|owner`; null when leasehold did not write it. */
export function parseValue(value: string): { owner: string; token: number } | null {
  const m = /^[^|]*\|(\d+)\|/.exec(value);
  const token = m ? Number(m[1]) : Number.NaN;
  return m && Number.isSafeInteger(token) ? { owner: value.slice(m[0].length), token } : null;
}

/** A semaphore's slot key: the semaphore's name, then `:permit:` and the slot. */
const SLOT_KEY = /^(.+)(:permit:\d+)$/;

/** How many lock names a backend remembers the highest token of (least recently seen dropped). */
const SEEN_KEYS = 4_096;

/** How a backend runs the scripts; everything else is {@link scriptBackend}'s. */
export interface ScriptRunner {
  /** The backend's name, such as `"upstash"`. */
  name: string;
  /** Prepended to every key. */
  prefix: string;
  /** Runs a writing script (ACQUIRE, ACQUIRE_ANY, RENEW, RELEASE); resolves its reply as plain values. */
  evaluate(script: string, keys: string[], args: (string | number)[], signal?: AbortSignal): Promise<unknown>;
  /** Runs INSPECT on the lock key (or reads the same): null, or `[value, pttl]`. */
  read(key: string, signal?: AbortSignal): Promise<unknown>;
  /** The error for a reply that is none of the expected ones. */
  malformed(reply: unknown): BackendError;
  /** What can have lost the fence counter on this database, and what to do (a sentence part). */
  counterLoss: string;
}

/**
 * The backend over `runner`: acquire, acquireAny (for createSemaphore), renew, release,
 * raiseFence (for leasehold/quorum) and inspect, one script each. Each backend
 * remembers the highest token it has seen per lock name (the last 4 096 names) and refuses a
 * lease whose token is not above the highest seen before the request was sent (non-retryable,
 * and the lock is freed again), so a counter that went back is an error, not a repeated token.
 */
export function scriptBackend(runner: ScriptRunner): Backend {
  const { name, prefix, evaluate, read, malformed } = runner;

  // The highest token seen per lock name (from acquire and inspect), most recent names last.
  const seen = new Map<string, number>();
  /** Records `token` for `key`, as its most recently seen name. */
  function see(key: string, token: number): void {
    const before = seen.get(key) ?? 0;
    seen.delete(key);
    seen.set(key, Math.max(before, token));
    if (seen.size > SEEN_KEYS) seen.delete(seen.keys().next().value as string);
  }

  // A semaphore's slot key (semaphore.ts slotKey: `name:permit:i`) is tagged by the semaphore's name.
  const lockKey = (key: string) => {
    const slot = SLOT_KEY.exec(key);
    return slot ? `${prefix}{${slot[1]}}${slot[2]}` : `${prefix}{${key}}`;
  };
  const ttlArg = (ttl: number) => Math.ceil(ttl);
  const nonceArg = (nonce: string) => {
    // The nonce is the value's first field; "|" would make it ambiguous.
    check(
      typeof nonce === "string" && nonce !== "" && !nonce.includes("|"),
      `[${name}]`,
      "nonce must be non-empty without |",
    );
    return nonce;
  };

  /**
   * Records the token `token` of a grant on `key` (lock key `k`), and refuses it when fresh
   * (`kind` 1; 2 is a retried acquire keeping its token) and not above `floor`, the highest token
   * seen before the request left: the counter went back.
   */
  async function fenceCheck(
    key: string,
    k: string,
    nonce: string,
    kind: number,
    token: number,
    floor: number | undefined,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    see(key, token);
    if (kind !== 1 || floor === undefined || token > floor) return;
    await evaluate(RELEASE, [k], [nonce], signal).catch(() => {});
    throw new BackendError(
      `the fencing counter of lock ${JSON.stringify(key)} went back (seen ${floor}, got ${token}): the ` +
        `database lost ${k}:fence, ${runner.counterLoss}. The lease was not granted and the lock ` +
        `was freed. Once no older holder can still write, set the counter past the old tokens (SET ` +
        `${k}:fence ${floor}), or use a new lock name.`,
      { backend: name, retryable: false },
    );
  }

  return {
    name,

    async acquireAny({ keys, owner, nonce, ttl, signal }) {
      // Only tokens seen before this request leaves must be below its token (see acquire).
      const floors = keys.map((key) => seen.get(key));
      const locks = keys.map(lockKey);
      const r = await evaluate(
        ACQUIRE_ANY,
        locks.flatMap((k) => [k, `${k}:fence`]),
        [nonceArg(nonce), ttlArg(ttl), owner],
        signal,
      );
      if (Array.isArray(r) && r.length === 3 && (r[0] === 1 || r[0] === 2)) {
        const [kind, token, index] = r as unknown[];
        if (
          Number.isSafeInteger(token) &&
          (token as number) > 0 &&
          Number.isInteger(index) &&
          keys[index as number] !== undefined
        ) {
          const i = index as number;
          await fenceCheck(keys[i]!, locks[i]!, nonce, kind as number, token as number, floors[i], signal);
          return { ok: true, token: token as number, index: i };
        }
      }
      if (Array.isArray(r) && r.length === 2 && r[0] === 0 && typeof r[1] === "number") {
        return r[1] > 0 ? { ok: false, retryAfter: r[1] } : { ok: false };
      }
      throw malformed(r);
    },

    async acquire({ key, owner, nonce, ttl, signal }): Promise<AcquireResult> {
      const k = lockKey(key);
      // Only tokens seen before this request leaves must be below its token: one seen meanwhile
      // (a concurrent call's answer) may be this very token, or a later holder's.
      const floor = seen.get(key);
      const r = await evaluate(ACQUIRE, [k, `${k}:fence`], [nonceArg(nonce), ttlArg(ttl), owner], signal);
      if (
        Array.isArray(r) &&
        (r[0] === 1 || r[0] === 2) &&
        r.length === 2 &&
        Number.isSafeInteger(r[1]) &&
        r[1] > 0
      ) {
        await fenceCheck(key, k, nonce, r[0], r[1], floor, signal);
        return { ok: true, token: r[1] };
      }
      if (
        Array.isArray(r) &&
        r[0] === 0 &&
        r.length === 3 &&
        typeof r[1] === "string" &&
        typeof r[2] === "number"
      ) {
        // The holder's token counts as seen (the fence check); the holder itself is not reported.
        const holder = parseValue(r[1]);
        const result: AcquireResult = { ok: false };
        if (holder) see(key, holder.token);
        if (r[2] > 0) result.retryAfter = r[2];
        return result;
      }
      throw malformed(r);
    },

    async renew({ key, nonce, ttl, signal }): Promise<boolean> {
      const r = await evaluate(RENEW, [lockKey(key)], [nonceArg(nonce), ttlArg(ttl)], signal);
      if (r === 0 || r === 1) return r === 1;
      throw malformed(r);
    },

    async release({ key, nonce, signal }): Promise<void> {
      const r = await evaluate(RELEASE, [lockKey(key)], [nonceArg(nonce)], signal);
      if (r !== 0 && r !== 1) throw malformed(r);
    },

    async raiseFence({ key, nonce, token, signal }): Promise<boolean> {
      check(Number.isSafeInteger(token) && token > 0, `[${name}]`, "token must be a positive integer");
      const k = lockKey(key);
      const r = await evaluate(RAISE, [k, `${k}:fence`], [nonceArg(nonce), token], signal);
      if (r !== 0 && r !== 1) throw malformed(r);
      if (r === 1) see(key, token);
      return r === 1;
    },

    async inspect(key, signal): Promise<HolderInfo | null> {
      const r = await read(lockKey(key), signal);
      if (r === null) return null;
      if (Array.isArray(r) && r.length === 2 && typeof r[0] === "string" && typeof r[1] === "number") {
        const holder = parseValue(r[0]);
        if (!holder) {
          throw new BackendError("the lock key holds a value leasehold did not write", {
            backend: name,
            retryable: false,
          });
        }
        see(key, holder.token);
        return r[1] > 0 ? { ...holder, ttlLeft: r[1] } : holder;
      }
      throw malformed(r);
    },
  };
}
