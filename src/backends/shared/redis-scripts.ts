// The Redis lock shared by the upstash backend (REST) and the redis backend (any TCP client): the
// key layout and the reading of the replies of the Lua scripts (redis-lua.ts, one per operation,
// each run atomically by Redis). One module, so that the two cannot drift: a lock taken through one excludes
// the other on the same database.
//
// Keys, for a lock named `n` and a prefix `p`: `p{n}` holds the lease (a string
// `nonce|token|owner` with a PX expiry) and `p{n}:fence` the fence counter, which never expires
// so tokens keep increasing across holders. The braces are a Redis hash tag: both keys of a name
// live in one slot, as a multi-key script needs on a cluster. A semaphore's slot `s:permit:i`
// (createSemaphore) is `p{s}:permit:i` and `p{s}:permit:i:fence`: the semaphore's name is the hash
// tag, so all its slots live in one cluster slot, as ACQUIRE_ANY needs (docs/DESIGN.md §15). A
// fire of runOnce, `n:fire:<id>`, is `p{n}:fire:<id>` and draws its tokens from `p{n}:fence`,
// its mutex name's counter (src/slots.ts counterOf), so it has no counter of its own; its
// completion is recorded in its lock key itself, as `|token|owner` with a PX expiry of `retain`,
// and nothing of the fire outlives that (docs/DESIGN.md §17). Shared mode (docs/DESIGN.md §18)
// adds `<lock key>:readers` and `<lock key>:writers` (sorted sets, redis-lua.ts), in the same slot.
import type { AcquireResult, Backend, FireHolder, HolderInfo } from "../../backend.ts";
import { BackendError } from "../../errors.ts";
import { check } from "../../options.ts";
import { counterOf, isPlain, slotOf } from "../../slots.ts";
import {
  ACQUIRE_ANY,
  ACQUIRE_SHARED,
  ACQUIRE_WAITING,
  CHANNEL,
  COMPLETE,
  RAISE,
  RAISE_SHARED,
  RELEASE,
  RELEASE_ANY,
  RELEASE_SHARED,
  RENEW,
  RENEW_MANY,
  RENEW_SHARED,
} from "./redis-lua.ts";

/** Whether `value` is a token: a safe integer > 0. */
const isToken = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) > 0;

/**
 * Whether `value` is a token a grant may answer: an integer > 0. One past the safe range (the
 * counter was raised to its end) is passed on: the core refuses it as an exhausted fence counter
 * and gives the lock back (docs/DESIGN.md §5.1).
 */
const isGrant = (value: unknown): value is number => Number.isInteger(value) && (value as number) > 0;

/** How many lock names a backend remembers the highest token of (least recently seen dropped). */
const SEEN_KEYS = 4_096;

/**
 * What `onFenceHealed` (an option of `upstash()` and `redis()`) is told when a lock's fence
 * counter went back and the backend raised it instead of handing out a token it had seen.
 */
export interface FenceHealed {
  /** The backend's name: `"upstash"` or `"redis"`. */
  backend: string;
  /** The lock's name (a semaphore's slot key for a permit). */
  name: string;
  /** The highest token this backend had seen for the lock before the acquire was sent. */
  seen: number;
  /** The token the database answered: not above `seen`, so its counter went back. */
  got: number;
  /** The token the lease was granted with: the counter was raised to it, above every token seen. */
  token: number;
  /** The whole story in one line, as the default prints it with `console.warn`; no secret. */
  message: string;
}

/**
 * A lock name's Redis keys: its fence counter's name (counterOf), its lock key, its fence key;
 * and, on a counter's own name, `top`: the highest token seen from that counter (0: none).
 */
interface Names {
  counter: string;
  lock: string;
  fence: string;
  top: number;
}

/** How a backend runs the scripts; everything else is {@link scriptBackend}'s. */
export interface ScriptRunner {
  /** The backend's name, such as `"upstash"`. */
  name: string;
  /** Prepended to every key. */
  prefix: string;
  /** Runs a writing script (ACQUIRE_ANY, RENEW, RELEASE, RELEASE_ANY, RAISE, COMPLETE); resolves its reply as plain values. */
  evaluate(script: string, keys: string[], args: (string | number)[], signal?: AbortSignal): Promise<unknown>;
  /**
   * Runs INSPECT on the lock key `key` and its readers `key:readers` (or reads the same): null,
   * `[value, pttl]`, or for a lock held shared `[value, pttl, live readers]`.
   */
  read(key: string, signal?: AbortSignal): Promise<unknown>;
  /** The error for a reply that is none of the expected ones. */
  malformed(reply: unknown): BackendError;
  /** What can have lost the fence counter on this database, and what to do (a sentence part). */
  counterLoss: string;
  /** Told when the fence counter went back and was raised (the backend's option); default `console.warn`. */
  onFenceHealed?: ((info: FenceHealed) => void) | undefined;
  /**
   * Optional: `watch` (docs/DESIGN.md §19) on the pub/sub `channel` the scripts publish a lock's
   * releases on (`leasehold:` and its lock key): a backend without it is not watched.
   */
  listen?: ((channel: string, wake: () => void, signal: AbortSignal) => Promise<void>) | undefined;
}

/**
 * The backend over `runner`: acquire and acquireAny (for createSemaphore) with one script, renew,
 * release, releaseAny (createSemaphore's give-back), raiseFence (for leasehold/quorum) and
 * inspect with one each; watch on the lock's channel when the runner can `listen`. Each backend
 * remembers the highest token it has seen per lock name (the last 4 096 names). A fresh lease
 * whose token is not above the highest seen before the request was sent means the counter went
 * back: the backend raises the lease and the counter past every token it saw (RAISE, one more
 * request), grants with that token and tells `onFenceHealed`; when the raise fails, the lock is
 * freed again and the acquire fails (retryable as the raise's failure was). So a counter that
 * went back never repeats a token this backend saw, and never locks it out of the name.
 */
export function scriptBackend(runner: ScriptRunner): Backend {
  const { name, prefix, evaluate, read, malformed } = runner;
  check(
    runner.onFenceHealed === undefined || typeof runner.onFenceHealed === "function",
    `[${name}]`,
    "option onFenceHealed must be a function",
  );
  const told = runner.onFenceHealed ?? ((info: FenceHealed) => console.warn(info.message));

  // Each lock name's Redis keys, worked out once (a semaphore's acquire names every slot, and
  // working them out per request took six regular-expression matches per slot, issue 29), and
  // for a counter's own name the highest token seen from it (acquire, acquireAny, inspect): the
  // last SEEN_KEYS names used, the least recently used forgotten first.
  const names = new Map<string, Names>();
  function namesOf(key: string): Names {
    let n = names.get(key);
    if (n) names.delete(key);
    else {
      // A semaphore's slot key (src/slots.ts slotKey: `name:permit:i`) is tagged by the
      // semaphore's name; a fire's key (`name:fire:<id>`) by its mutex name's, beside that name's
      // counter, which it draws its tokens from.
      const counter = counterOf(key);
      const tag = counter === key ? (slotOf(key)?.name ?? key) : "";
      const lock = tag
        ? `${prefix}{${tag}}${key.slice(tag.length)}`
        : namesOf(counter).lock + key.slice(counter.length);
      n = { counter, lock, fence: tag ? `${lock}:fence` : namesOf(counter).fence, top: 0 };
      if (names.size >= SEEN_KEYS) names.delete(names.keys().next().value as string);
    }
    names.set(key, n);
    return n;
  }
  // A name that is no slot's or fire's key is its own counter and tag: its lock key needs no
  // lookup, so the renewals of more names than the map holds do not churn it (10 000 leases renew
  // 2 000 names a second).
  const lockKey = (key: string) => (isPlain(key) ? `${prefix}{${key}}` : namesOf(key).lock);
  const fenceKey = (key: string) => namesOf(key).fence;
  /** The entry of `key`'s fence counter: its `top` is the highest token seen from it (0: none). */
  const counterEntry = (key: string) => namesOf(namesOf(key).counter);
  const floorOf = (key: string) => counterEntry(key).top;
  /** Records `token` for `key`'s counter. */
  function see(key: string, token: number): void {
    const c = counterEntry(key);
    c.top = Math.max(c.top, token);
  }

  const ttlArg = (ttl: number) => Math.ceil(ttl);
  const nonceArg = (nonce: string) => {
    // The nonce is the value's first field; "|" would make it ambiguous, and "*" is a lock held
    // shared (redis-lua.ts).
    check(
      typeof nonce === "string" && nonce !== "" && nonce !== "*" && !nonce.includes("|"),
      `[${name}]`,
      'nonce must be non-empty without |, and not "*"',
    );
    return nonce;
  };

  /** Runs RENEW, RELEASE, RAISE or COMPLETE, whose reply is 1 when the lock was ours and 0 when not. */
  async function ours(script: string, keys: string[], args: (string | number)[], signal?: AbortSignal) {
    const r = await evaluate(script, keys, args, signal);
    if (r !== 0 && r !== 1) throw malformed(r);
    return r === 1;
  }

  /**
   * The fresh lease of `key` (lock key `lock`, ours under `nonce`) was granted with `got`, not
   * above `floor`, the highest token seen before the request left: the database lost the counter.
   * Raises the lease and the counter to one above every token seen, tells `onFenceHealed` and
   * resolves that token. When the raise fails (or finds the lock no longer ours), frees the lock
   * and rejects, retryable as the raise's failure was; an abort rejects with the signal's reason
   * (the core frees an attempt it gave up on).
   */
  async function heal(
    key: string,
    lock: string,
    nonce: string,
    floor: number,
    got: number,
    signal: AbortSignal | undefined,
    // A reader's grant (§18): raised by RAISE_SHARED, freed by RELEASE_SHARED.
    reader?: { owner: string },
  ): Promise<number> {
    const token = Math.max(floor, floorOf(key)) + 1;
    const lost =
      `the fence counter of lock ${JSON.stringify(key)} went back (seen ${floor}, got ${got}): the ` +
      `database lost ${fenceKey(key)}, ${runner.counterLoss}.`;
    let failure: unknown;
    try {
      const raised = reader
        ? ours(RAISE_SHARED, [lock, fenceKey(key), `${lock}:readers`], [nonce, token, reader.owner], signal)
        : ours(RAISE, [lock, fenceKey(key)], [nonce, token], signal);
      if (await raised) {
        see(key, token);
        const message =
          `[leasehold] [${name}] ${lost} The counter was raised to ${token}, above every token this ` +
          `process saw, and the lease granted with it. A holder from before the loss may still be ` +
          `running, and tokens only other processes saw may be higher: fence your resource with ` +
          `lease.token.`;
        try {
          told({ backend: name, name: key, seen: floor, got, token, message });
        } catch {}
        return token;
      }
    } catch (error) {
      if (signal?.aborted && error === signal.reason) throw error;
      failure = error;
    }
    await (reader
      ? evaluate(RELEASE_SHARED, [lock, `${lock}:readers`, `${lock}:writers`], [nonce], signal)
      : evaluate(RELEASE, [lock], [nonce], signal)
    ).catch(() => {});
    const why = failure instanceof Error ? failure.message : "the lock was no longer ours";
    throw new BackendError(
      `${lost} Raising it to ${token} failed (${why}), so the lease was not granted and the lock ` +
        `was freed. Once no older holder can still write, set the counter past the old tokens (SET ` +
        `${fenceKey(key)} ${floor}), or use a new lock name.`,
      {
        backend: name,
        retryable: !(failure instanceof BackendError) || failure.retryable,
        cause: failure,
      },
    );
  }

  /**
   * ACQUIRE_ANY on `keys` (acquire: one key). The holders' tokens it answers count as seen. A
   * fresh grant (kind 1; 2 is a retried acquire keeping its token) whose token is not above the
   * highest seen before the request left means the counter went back: it is healed (`heal`).
   * On one key holding a completed fire's record (kind 3), the refusal says who completed it.
   */
  async function take(
    {
      keys,
      owner,
      nonce,
      ttl,
      signal,
    }: {
      keys: readonly string[];
      owner: string;
      nonce: string;
      ttl: number;
      signal?: AbortSignal | undefined;
    },
    // Shared mode (§18): ACQUIRE_WAITING or ACQUIRE_SHARED on one key, with their keys and args.
    variant?: { script: string; keys: string[]; args: string[] },
  ): Promise<
    { ok: true; token: number; index: number } | { ok: false; retryAfter?: number; done?: FireHolder }
  > {
    // Only tokens seen before this request leaves must be below its token: one seen meanwhile
    // (a concurrent call's answer) may be this very token, or a later holder's.
    // A plain loop: flatMap and spreads cost a semaphore of limit 50 about 15 µs per acquire.
    const floors: number[] = [];
    const locks: string[] = [];
    for (const key of keys) {
      const { counter, lock, fence } = namesOf(key);
      floors.push(namesOf(counter).top);
      locks.push(lock, fence);
    }
    const r = await evaluate(
      variant?.script ?? ACQUIRE_ANY,
      variant ? locks.concat(variant.keys) : locks,
      [nonceArg(nonce), ttlArg(ttl), owner, ...(variant?.args ?? [])],
      signal,
    );
    if (!Array.isArray(r)) throw malformed(r);
    const [kind, value, ...rest] = r as unknown[];
    const i = rest[0] as number;
    const key = keys[i];
    if (
      (kind === 1 || kind === 2) &&
      rest.length === 1 &&
      isGrant(value) &&
      Number.isInteger(i) &&
      key !== undefined
    ) {
      const floor = floors[i]!;
      see(key, value);
      if (kind === 2 || value > floor) return { ok: true, token: value, index: i };
      const reader = variant?.script === ACQUIRE_SHARED ? { owner } : undefined;
      return {
        ok: true,
        token: await heal(key, locks[2 * i]!, nonce, floor, value, signal, reader),
        index: i,
      };
    }
    if (
      kind === 3 &&
      keys.length === 1 &&
      isToken(value) &&
      typeof rest[0] === "string" &&
      rest.length === 1
    ) {
      see(keys[0]!, value);
      return { ok: false, done: { owner: rest[0], token: value } };
    }
    if (kind === 0 && r.length === 2 + keys.length && r.every((n) => typeof n === "number")) {
      // Each holder's token counts as seen (the fence check); the holders themselves are not
      // reported. retryAfter: the earliest expiry.
      keys.forEach((key, j) => {
        const token = r[j + 2];
        if (isToken(token)) see(key, token);
      });
      return (value as number) > 0 ? { ok: false, retryAfter: value as number } : { ok: false };
    }
    throw malformed(r);
  }

  const { listen } = runner;
  return {
    name,

    ...(listen && { watch: (key: string, wake, signal) => listen(CHANNEL + lockKey(key), wake, signal) }),

    acquireAny: take,

    async acquire({ key, owner, nonce, ttl, signal, waiter }): Promise<AcquireResult> {
      // The fields by name rather than a copy of the request by spread, as on the core's hot path.
      // A waiting writer's attempt marks it waiting, or unmarks it when granted (§18).
      const variant =
        waiter === undefined
          ? undefined
          : { script: ACQUIRE_WAITING, keys: [`${lockKey(key)}:writers`], args: [waiter] };
      const r = await take({ keys: [key], owner, nonce, ttl, signal }, variant);
      return r.ok ? { ok: true, token: r.token } : r;
    },

    // Shared mode (docs/DESIGN.md §18): one script per operation, beside the lock key.
    async acquireShared({ key, owner, nonce, ttl, signal }): Promise<AcquireResult> {
      const lock = lockKey(key);
      const variant = { script: ACQUIRE_SHARED, keys: [`${lock}:readers`, `${lock}:writers`], args: [] };
      const r = await take({ keys: [key], owner, nonce, ttl, signal }, variant);
      return r.ok ? { ok: true, token: r.token } : r;
    },

    renewShared: ({ key, nonce, ttl, signal }) =>
      ours(RENEW_SHARED, [lockKey(key), `${lockKey(key)}:readers`], [nonceArg(nonce), ttlArg(ttl)], signal),

    async releaseShared({ key, nonce, signal }): Promise<void> {
      const lock = lockKey(key);
      await ours(RELEASE_SHARED, [lock, `${lock}:readers`, `${lock}:writers`], [nonceArg(nonce)], signal);
    },

    renew: ({ key, nonce, ttl, signal }) =>
      ours(RENEW, [lockKey(key)], [nonceArg(nonce), ttlArg(ttl)], signal),

    // The renewals of many leases in one script (RENEW_MANY): one answer per key.
    async renewMany({ requests, signal }): Promise<boolean[]> {
      const r = await evaluate(
        RENEW_MANY,
        requests.map((q) => lockKey(q.key)),
        requests.flatMap((q) => [nonceArg(q.nonce), ttlArg(q.ttl)]),
        signal,
      );
      if (!Array.isArray(r) || r.length !== requests.length || r.some((x) => x !== 0 && x !== 1))
        throw malformed(r);
      return r.map((x) => x === 1);
    },

    async release({ key, nonce, signal }): Promise<void> {
      await ours(RELEASE, [lockKey(key)], [nonceArg(nonce)], signal);
    },

    async releaseAny({ keys, nonce, signal }): Promise<void> {
      const r = await evaluate(RELEASE_ANY, keys.map(lockKey), [nonceArg(nonce)], signal);
      if (!(Number.isSafeInteger(r) && (r as number) >= 0 && (r as number) <= keys.length))
        throw malformed(r);
    },

    async raiseFence({ key, nonce, token, signal }): Promise<boolean> {
      check(isToken(token), `[${name}]`, "token must be a positive integer");
      const raised = await ours(RAISE, [lockKey(key), fenceKey(key)], [nonceArg(nonce), token], signal);
      if (raised) see(key, token);
      return raised;
    },

    async complete({ key, nonce, retain, signal }): Promise<boolean> {
      check(Number.isSafeInteger(retain) && retain >= 1, `[${name}]`, "retain must be a positive integer");
      return ours(COMPLETE, [lockKey(key)], [nonceArg(nonce), retain], signal);
    },

    async inspect({ key, signal }): Promise<HolderInfo | null> {
      const r = await read(lockKey(key), signal);
      if (r === null) return null;
      if (
        !Array.isArray(r) ||
        r.length !== (typeof r[0] === "string" && r[0].startsWith("*|") ? 3 : 2) ||
        typeof r[0] !== "string" ||
        !r.slice(1).every((n) => Number.isSafeInteger(n))
      ) {
        throw malformed(r);
      }
      const [value, pttl, readers] = r as [string, number, number?];
      // `nonce|token|owner`
      const m = /^[^|]*\|(\d+)\|/.exec(value);
      const token = Number(m?.[1]);
      if (!Number.isSafeInteger(token)) {
        throw new BackendError("the lock key holds a value leasehold did not write", {
          backend: name,
          retryable: false,
        });
      }
      see(key, token);
      const holder: HolderInfo = { owner: value.slice(m![0].length), token };
      if (pttl > 0) holder.ttlLeft = pttl;
      if (value.startsWith("|")) holder.done = true; // a completed fire's record (COMPLETE)
      // Held shared (§18): the newest reader granted, and how many are live.
      if (readers !== undefined) holder.readers = readers;
      return holder;
    },
  };
}
