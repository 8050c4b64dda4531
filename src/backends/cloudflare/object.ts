// One long file for one state machine: the leases, lines of waiters, alarm and storage live in one class.
// (The wire format is in protocol.ts, the route in handler.ts.)
// LeaseholdLock: the Durable Object that holds one lock, or all the slots of one semaphore. Typed
// structurally, so this file loads on every runtime; workerd constructs it with its real state object.
import { counterOf, slotKey } from "../../slots.ts";
import {
  type Done,
  EXHAUSTED,
  isSlotRequest,
  json,
  KEEP_PLACE_MS,
  type LockRequest,
  MAX_HOLD_MS,
  objectName,
  parseRequest,
  type Replies,
  readRequest,
} from "./protocol.ts";

/** The part of a Durable Object's storage that {@link LeaseholdLock} uses. */
export interface DurableObjectStorageLike {
  /** The stored entries whose keys start with `prefix`. */
  list(options: { prefix: string }): Promise<Map<string, unknown>>;
  /** Stores `value` at `key`. */
  put(key: string, value: unknown): Promise<void>;
  /** Deletes the entry at `key` (a fire's, once its record expired). */
  delete(key: string): Promise<boolean>;
  /** Sets the object's alarm to `scheduledTime` (epoch ms). */
  setAlarm(scheduledTime: number): Promise<void>;
}

/** The part of `DurableObjectState` (the constructor's first argument) that {@link LeaseholdLock} uses. */
export interface DurableObjectStateLike {
  /** The object's storage. */
  readonly storage: DurableObjectStorageLike;
  /** Runs `callback` with no other event delivered to the object meanwhile. */
  blockConcurrencyWhile<T>(callback: () => Promise<T>): Promise<T>;
}

/** A lease as stored: without its expiry time, which a restart counts again from its ttl. */
interface Stored {
  nonce: string;
  owner: string;
  token: number;
  ttl: number;
}

/**
 * What is kept in storage for each lock: the fence counter, the lease without its expiry time, the
 * shared leases likewise (`readers`, absent when none and in what an object from before shared mode
 * saved), and the record of a completed fire (`complete`, for runOnce) with the time it ends on this object's
 * clock. Under "lock" for the object's own key (the name it was made for), under "lock:<key>" for
 * a slot key of the semaphore of that name (`name:permit:<slot>`) and for the key of a fire of the
 * mutex of that name (`name:fire:<id>`). A fire's key has no fence of its own (0): its tokens come
 * from the object's own key's counter (src/slots.ts `counterOf`), so its entry is deleted once it
 * holds neither a lease nor a record.
 */
interface Saved {
  fence: number;
  lease: Stored | null;
  readers?: Stored[];
  done?: DoneRecord;
}

/** A completed fire's record: who ran it, and when it ends (Date.now() on this object). */
interface DoneRecord extends Done {
  until: number;
}

/** A lease as {@link Saved} keeps it. */
const stored = ({ nonce, owner, token, ttl }: Held): Stored => ({ nonce, owner, token, ttl });

/** Where a lock's state is stored in its object (see {@link Saved}). */
const storageKey = (key: string): string => (objectName(key) === key ? "lock" : `lock:${key}`);

interface Held extends Stored {
  /** Date.now() at which it expires on this object. */
  until: number;
}

/**
 * An acquire refused because the lock's fence counter has reached Number.MAX_SAFE_INTEGER: the
 * next token could not be told apart from the one after it. Answered with HTTP {@link EXHAUSTED}.
 */
class Exhausted {
  /** The key refused, when the request named it (a waiter's client knows its own). */
  constructor(readonly key?: string) {}
}

/** The lock whose fence counter `lock` draws its tokens from. */
const counter = (lock: Lock): Lock => lock.shares ?? lock;

/** Whether `lock` can grant no more: its next token would pass Number.MAX_SAFE_INTEGER. */
const exhausted = (lock: Lock): boolean => counter(lock).fence >= Number.MAX_SAFE_INTEGER;

/**
 * Whether `lock` can be granted now to a writer (`shared` false) or a reader, `w` in line or a
 * newcomer (undefined), first come first served across both modes (docs/DESIGN.md §18): a writer
 * when nothing is held and nobody is in line before it; a reader when no exclusive lease is held
 * and no writer is in line before it (readers share, so readers ahead of it do not count).
 */
function grantable(lock: Lock, shared: boolean, w: Waiter | undefined): boolean {
  if (lock.lease) return false;
  if (!shared) return lock.readers.size === 0 && (lock.line.length === 0 || lock.line[0] === w);
  const ahead = w ? lock.line.indexOf(w) : lock.line.length;
  return !lock.line.slice(0, ahead).some((x) => !x.shared);
}

/**
 * When `lock` may be free next (Date.now()): the exclusive lease's expiry, else its last reader's,
 * else when the oldest waiter loses its place; a hint for `retryAfter`.
 */
function freeAt(lock: Lock, now: number): number {
  if (lock.lease) return lock.lease.until;
  if (lock.readers.size > 0) return Math.max(...[...lock.readers.values()].map((r) => r.until));
  return lock.line[0]?.keepUntil ?? now;
}

interface Waiter {
  id: string;
  nonce: string;
  owner: string;
  ttl: number;
  /** A reader (acquireShared) rather than a writer. */
  shared: boolean;
  /** The request held open for it, if one is. */
  held?:
    | { resolve: (reply: Replies["acquire"] | Exhausted) => void; timer: ReturnType<typeof setTimeout> }
    | undefined;
  /** While no request is held: when it loses its place (Date.now()). */
  keepUntil: number;
}

/**
 * One lock of the object: its fence, its exclusive lease (or a fire's record), its shared leases
 * and its line of waiters.
 */
interface Lock {
  /** Its storage key. */
  at: string;
  fence: number;
  /** The lock whose fence its tokens come from: for a fire's key, the object's own key; else none (itself). */
  shares?: Lock;
  lease: Held | null;
  /** The shared leases, by nonce (docs/DESIGN.md §18); never beside `lease`. */
  readers: Map<string, Held>;
  /** The record of a completed fire, while it lasts (then the lock is free, with no lease). */
  done: DoneRecord | null;
  /** How many requests use it now: a fire's lock is dropped from memory only when none does. */
  busy: number;
  /**
   * Waiters, readers and writers, oldest first. In memory: a restart drops them (they come back
   * with their next request).
   */
  line: Waiter[];
  /** The timer at the next moment its line can move. */
  timer: ReturnType<typeof setTimeout> | undefined;
}

/**
 * The Durable Object class that holds leasehold locks: one object per lock name
 * (`idFromName(name)`), which also holds every slot of the semaphore of that name
 * (`name:permit:<slot>`). Export it from your Worker and bind it (see `durableObject`):
 *
 * - the leases and fence counters live in the object's storage and are written before any
 *   answer that depends on them, so a restart or a move never loses a holder nor sets a token
 *   back; a lease read back after a restart counts as renewed at that moment (its holder's own
 *   deadline is earlier, so this can only delay a takeover);
 * - expiry is judged on the object's clock; an alarm at the earliest lease's expiry frees it and
 *   serves the next waiter even when nobody calls;
 * - a semaphore's acquire (`acquireAny`) tries its slots in order in one request, exactly as one
 *   acquire per slot would, and its give-back (`releaseAny`) releases them all in one;
 * - waiters (`acquireQueued`) are served first come, first served: a waiting request is held open
 *   (at most 30 s, and as long as the caller asks) and answered with the lease as soon as the
 *   lock is released or expires; a waiter keeps its place for 1 s between two requests, and a
 *   lock freed in that gap is reserved for it for that long;
 * - shared leases (`acquireShared`, `renewShared`, `releaseShared`; docs/DESIGN.md §18) are kept
 *   and saved beside the exclusive one, each renewing and expiring on its own, with tokens from
 *   the same fence counter; readers wait in the same line, first come first served across both
 *   modes: a reader at the head is served with every reader right behind it up to the first
 *   writer, a writer once no lease of either mode is live, and a reader that arrives while a
 *   writer is in line waits behind it;
 * - a fire of runOnce (`name:fire:<id>`) is held by the object of its mutex's name and draws its
 *   tokens from that name's fence counter; `complete` turns its lease into a record (owner, token,
 *   end) that refuses every acquire, and answers everyone in line, with `done` until `retain`
 *   ends, when the alarm deletes it: a fire leaves nothing behind;
 * - a `raise` sets a token of at most 2^52 (`MAX_RAISE`), so requests cannot exhaust a fence; a
 *   counter that reached Number.MAX_SAFE_INTEGER all the same (raised there before that bound)
 *   grants nothing more: an acquire that would be granted (and each waiter in line, when the
 *   lock is freed) is refused with HTTP 409, which the backend reports as a non-retryable error
 *   naming the exhausted fence counter.
 */
export class LeaseholdLock {
  readonly #storage: DurableObjectStorageLike;
  /** The locks, by storage key. */
  readonly #locks = new Map<string, Lock>();
  /** The locks whose lease or fence changed since the last save. */
  readonly #dirty = new Set<Lock>();
  /** When the alarm this instance set will fire (undefined: none known). */
  #alarmAt: number | undefined;
  /** Answers to send once the state they depend on is saved. */
  #after: (() => void)[] = [];

  /**
   * Called by the Workers runtime with the object's `DurableObjectState` (and the Worker's
   * environment, unused).
   */
  constructor(state: DurableObjectStateLike, _env?: unknown) {
    this.#storage = state.storage;
    void state.blockConcurrencyWhile(async () => {
      const saved = await this.#storage.list({ prefix: "lock" });
      const now = Date.now();
      for (const [at, value] of saved) {
        const { fence, lease, readers, done } = value as Saved;
        const lock = this.#lockAt(at);
        lock.fence = fence;
        lock.done = done ?? null;
        // Its expiry time died with the old instance: count it as renewed now (only later, never earlier).
        if (lease) lock.lease = { ...lease, until: now + lease.ttl };
        for (const reader of readers ?? [])
          lock.readers.set(reader.nonce, { ...reader, until: now + reader.ttl });
      }
    });
  }

  /**
   * One operation (`POST`, a JSON body). Called through the stub by `durableObject(namespace)` and
   * by `lockHandler`.
   *
   * @param request The operation.
   * @returns Its JSON answer; 400 for a malformed request, 413 for one over 8 KiB, 409 for an
   *   acquire of a lock whose fence counter is exhausted.
   */
  async fetch(request: Request): Promise<Response> {
    if (request.method !== "POST") return json({ error: "POST only" }, 405);
    const body = await readRequest(request);
    if (body === undefined) return json({ error: "request too large" }, 413);
    const r = parseRequest(body);
    if (typeof r === "string") return json({ error: r }, 400);
    const reply = await this.#run(r);
    if (!(reply instanceof Exhausted)) return json(reply);
    const error = `the fence counter of this lock is exhausted (Number.MAX_SAFE_INTEGER): no later token can be granted; use a new lock name`;
    return json({ error, exhausted: true, key: reply.key }, EXHAUSTED);
  }

  /** Called by the Workers runtime at the earliest lease's expiry: frees it and serves the next waiter. */
  async alarm(): Promise<void> {
    // The next alarm, at the earliest lease left (renewed, or granted while this one was pending),
    // is set by the commit.
    this.#alarmAt = undefined;
    const now = Date.now();
    for (const lock of this.#locks.values()) this.#serve(lock, now);
    await this.#commit();
    this.#sweep();
  }

  /**
   * The lock stored under `at`. The object's own key and a semaphore's slots stay in memory; a
   * fire's lock is dropped by {@link #sweep} once it is idle.
   */
  #lockAt(at: string): Lock {
    let lock = this.#locks.get(at);
    if (!lock) {
      const key = at.slice("lock:".length);
      const fire = at !== "lock" && counterOf(key) !== key;
      lock = {
        at,
        fence: 0,
        lease: null,
        readers: new Map(),
        done: null,
        busy: 0,
        line: [],
        timer: undefined,
      };
      if (fire) lock.shares = this.#lockAt("lock");
      this.#locks.set(at, lock);
    }
    return lock;
  }

  /**
   * Drops from memory each fire's lock that holds nothing (no lease, no record, nobody in line)
   * and that no request uses (one may hold it across an await): what a fire leaves behind is its
   * record, for `retain`, and nothing after it. Its storage entry was deleted by the commit.
   */
  #sweep(): void {
    for (const [at, lock] of this.#locks) {
      if (!lock.shares || lock.lease || lock.readers.size > 0 || lock.done || lock.line.length > 0) continue;
      if (lock.busy === 0 && !this.#dirty.has(lock)) this.#locks.delete(at);
    }
  }

  /** Runs one operation; every change is saved before its answer (and the answers it unblocked). */
  async #run(r: LockRequest): Promise<unknown> {
    const now = Date.now();
    const keys = isSlotRequest(r) ? r.slots.map((slot) => slotKey(r.name, slot)) : [r.key];
    const locks = keys.map((key) => this.#lockAt(storageKey(key)));
    for (const lock of locks) lock.busy++;
    try {
      for (const lock of locks) this.#serve(lock, now);
      await this.#commit();
      const reply = await (r.op === "acquireAny"
        ? this.#acquireAny(r, locks, now)
        : r.op === "releaseAny"
          ? this.#releaseAny(r, locks, now)
          : this.#apply(r, locks[0]!, now));
      await this.#commit();
      return reply;
    } finally {
      for (const lock of locks) lock.busy--;
      this.#sweep();
    }
  }

  #apply(
    r: Exclude<LockRequest, { slots: number[] }>,
    lock: Lock,
    now: number,
  ):
    | Replies[Exclude<LockRequest["op"], "acquireAny" | "releaseAny">]
    | Exhausted
    | Promise<Replies["acquire"] | Exhausted> {
    switch (r.op) {
      case "acquire":
      case "acquireShared":
        return this.#acquire(lock, r, now);
      case "renew": {
        const lease = lock.lease;
        const ok = lease?.nonce === r.nonce;
        if (ok) this.#extend(lock, lease, r.ttl, now);
        return { ok } satisfies Replies["renew"];
      }
      case "renewShared": {
        const reader = lock.readers.get(r.nonce);
        if (reader) this.#extend(lock, reader, r.ttl, now);
        return { ok: reader !== undefined } satisfies Replies["renewShared"];
      }
      case "releaseShared": {
        if (lock.readers.delete(r.nonce)) this.#dirty.add(lock);
        else {
          // A waiter that gave up: the id of its acquire() call (sent by the core when it gives
          // up, writer or reader), or the nonce of its last attempt (an attempt without answer).
          const w = lock.line.find((x) => x.id === r.nonce || x.nonce === r.nonce);
          if (w) this.#leave(lock, w);
        }
        this.#serve(lock, now);
        return { ok: true } satisfies Replies["releaseShared"];
      }
      case "release": {
        if (lock.lease?.nonce === r.nonce) {
          lock.lease = null;
          this.#dirty.add(lock);
        } else {
          // The nonce of a waiter's last attempt: it gave up, so it leaves the line.
          const w = lock.line.find((x) => x.nonce === r.nonce);
          if (w) this.#leave(lock, w);
        }
        this.#serve(lock, now);
        return { ok: true } satisfies Replies["release"];
      }
      case "raise": {
        // leasehold/quorum: the holder's token and the fence become at least `token`.
        const lease = lock.lease;
        const ok = lease?.nonce === r.nonce;
        if (ok) {
          lease.token = Math.max(lease.token, r.token);
          const fence = counter(lock);
          fence.fence = Math.max(fence.fence, r.token);
          this.#dirty.add(lock);
          this.#dirty.add(fence);
        }
        return { ok } satisfies Replies["raise"];
      }
      case "complete": {
        // runOnce: the holder's lease becomes the fire's record, which frees the lock; the fence
        // counter is untouched. Those in line are answered done by #serve once it is saved.
        const lease = lock.lease;
        const ok = lease?.nonce === r.nonce;
        if (ok) {
          lock.lease = null;
          lock.done = { owner: lease.owner, token: lease.token, until: now + r.retain };
          this.#dirty.add(lock);
          this.#serve(lock, now);
        }
        return { ok } satisfies Replies["complete"];
      }
      case "inspect": {
        const { lease, done, readers } = lock;
        // Held shared: the newest reader (the greatest token), and how many hold.
        let newest: Held | undefined;
        for (const reader of readers.values()) if (!newest || reader.token > newest.token) newest = reader;
        const holder = lease
          ? { owner: lease.owner, token: lease.token, ttlLeft: lease.until - now }
          : newest
            ? { owner: newest.owner, token: newest.token, ttlLeft: newest.until - now, readers: readers.size }
            : done && {
                owner: done.owner,
                token: done.token,
                ttlLeft: done.until - now,
                done: true as const,
              };
        return { holder, waiters: lock.line.length } satisfies Replies["inspect"];
      }
    }
  }

  /** An acquire, exclusive or shared (`acquireShared`): granted, refused, or held open in line. */
  #acquire(
    lock: Lock,
    r: Extract<LockRequest, { op: "acquire" | "acquireShared" }>,
    now: number,
  ): Replies["acquire"] | Exhausted | Promise<Replies["acquire"] | Exhausted> {
    const shared = r.op === "acquireShared";
    const { lease, done } = lock;
    // A completed fire: not free before its record ends, so nobody waits for it.
    if (done) return { ok: false, done: { owner: done.owner, token: done.token } };
    const mine = shared ? lock.readers.get(r.nonce) : lease?.nonce === r.nonce ? lease : undefined;
    if (mine) {
      // A retried acquire: the same token, extended.
      this.#extend(lock, mine, r.ttl, now);
      return { ok: true, token: mine.token };
    }
    let w = r.waiter === undefined ? undefined : lock.line.find((x) => x.id === r.waiter);
    if (grantable(lock, shared, w)) {
      if (w) this.#leave(lock, w);
      return exhausted(lock) ? new Exhausted(r.key) : { ok: true, token: this.#grant(lock, r, now, shared) };
    }
    const hold = Math.min(r.hold ?? 0, MAX_HOLD_MS);
    if (r.waiter === undefined || hold <= 0)
      return { ok: false, retryAfter: Math.max(0, freeAt(lock, now) - now) };
    if (!w) {
      w = { id: r.waiter, nonce: r.nonce, owner: r.owner, ttl: r.ttl, shared, keepUntil: 0 };
      lock.line.push(w);
    } else {
      // A new attempt of the same waiter supersedes its older one, if that is still held.
      this.#answer(lock, w, { ok: false, retryAfter: 0 });
      Object.assign(w, { nonce: r.nonce, owner: r.owner, ttl: r.ttl, shared });
    }
    const waiter = w;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        if (waiter.held?.timer === timer) this.#answer(lock, waiter, { ok: false, retryAfter: 0 });
      }, hold);
      waiter.held = { resolve, timer };
      this.#schedule(lock);
    });
  }

  /**
   * A semaphore's acquire: a plain acquire (no waiter) of each lock in order, the first grant kept;
   * all taken: the earliest moment one of them can be free.
   */
  #acquireAny(
    r: Extract<LockRequest, { op: "acquireAny" }>,
    locks: Lock[],
    now: number,
  ): Replies["acquireAny"] | Exhausted {
    let retryAfter = Number.POSITIVE_INFINITY;
    for (const [index, lock] of locks.entries()) {
      const { lease, done } = lock;
      if (done) {
        // A completed fire's record counts as taken, until it ends.
        retryAfter = Math.min(retryAfter, done.until - now);
        continue;
      }
      if (lease?.nonce === r.nonce) {
        this.#extend(lock, lease, r.ttl, now);
        return { ok: true, token: lease.token, index };
      }
      if (!lease && lock.readers.size === 0 && lock.line.length === 0) {
        // As the acquire of this slot would be: refused when its fence counter is exhausted.
        if (exhausted(lock)) return new Exhausted(slotKey(r.name, r.slots[index]!));
        return { ok: true, token: this.#grant(lock, r, now), index };
      }
      retryAfter = Math.min(retryAfter, freeAt(lock, now) - now);
    }
    return { ok: false, retryAfter: Math.max(0, retryAfter) };
  }

  /** A semaphore's give-back of an unanswered acquireAny: a release of each lock with the nonce. */
  #releaseAny(
    r: Extract<LockRequest, { op: "releaseAny" }>,
    locks: Lock[],
    now: number,
  ): Replies["releaseAny"] {
    for (const [i, lock] of locks.entries()) {
      this.#apply({ op: "release", key: slotKey(r.name, r.slots[i]!), nonce: r.nonce }, lock, now);
    }
    return { ok: true };
  }

  /**
   * Ends `w`'s held request with `reply`; `w` keeps its place for KEEP_PLACE_MS (a granted waiter
   * has already left the line). `later` defers the reply until the next commit has saved.
   */
  #answer(lock: Lock, w: Waiter, reply: Replies["acquire"] | Exhausted, later = false): void {
    const held = w.held;
    if (!held) return;
    clearTimeout(held.timer);
    w.held = undefined;
    w.keepUntil = Date.now() + KEEP_PLACE_MS;
    if (later) this.#after.push(() => held.resolve(reply));
    else held.resolve(reply);
    this.#schedule(lock);
  }

  /**
   * A new lease for `r`, exclusive or `shared`, with the next token of its counter; saved (with an
   * alarm at its expiry) by the next commit.
   */
  #grant(lock: Lock, r: { nonce: string; owner: string; ttl: number }, now: number, shared = false): number {
    const fence = counter(lock);
    const token = ++fence.fence;
    const held = { nonce: r.nonce, owner: r.owner, token, ttl: r.ttl, until: now + r.ttl };
    if (shared) lock.readers.set(r.nonce, held);
    else lock.lease = held;
    this.#dirty.add(lock);
    this.#dirty.add(fence);
    return token;
  }

  #extend(lock: Lock, lease: Held, ttl: number, now: number): void {
    lease.until = now + ttl;
    // The stored ttl is what a restart counts from: keep it true when it changes.
    if (lease.ttl !== ttl) {
      lease.ttl = ttl;
      this.#dirty.add(lock);
    }
  }

  /** Takes `w` out of the line, answering its held request (if any) with "not yet". */
  #leave(lock: Lock, w: Waiter): void {
    lock.line.splice(lock.line.indexOf(w), 1);
    this.#answer(lock, w, { ok: false, retryAfter: 0 });
  }

  /**
   * Brings `lock` to `now`: frees an expired lease and expired readers, ends an expired record,
   * answers everyone in line done while a record lasts, drops waiters that lost their place, and
   * serves the line first come first served across both modes (each answer waits for the save): a
   * writer at its head once nothing is held, a reader at its head together with every reader right
   * behind it up to the first writer, once no exclusive lease is held. A waiter whose request is
   * not held (between two attempts) is served when it comes back: the writer keeps the lock
   * reserved meanwhile, a reader its place.
   */
  #serve(lock: Lock, now: number): void {
    if (lock.lease && lock.lease.until <= now) {
      lock.lease = null;
      this.#dirty.add(lock);
    }
    for (const [nonce, reader] of lock.readers)
      if (reader.until <= now) {
        lock.readers.delete(nonce);
        this.#dirty.add(lock);
      }
    if (lock.done && lock.done.until <= now) {
      lock.done = null;
      this.#dirty.add(lock);
    }
    if (lock.done) {
      const { owner, token } = lock.done;
      for (const w of lock.line.splice(0)) this.#answer(lock, w, { ok: false, done: { owner, token } }, true);
    }
    lock.line = lock.line.filter((w) => w.held || w.keepUntil > now);
    const head = lock.line[0];
    if (head && !lock.lease) {
      const writer = lock.line.findIndex((w) => !w.shared);
      const served = !head.shared
        ? head.held && lock.readers.size === 0
          ? [head]
          : []
        : lock.line.slice(0, writer < 0 ? undefined : writer).filter((w) => w.held);
      for (const w of served) {
        if (exhausted(lock)) {
          // No token left for anyone in line: each waiter whose request is held is told so, the
          // others when they come back.
          for (const x of lock.line.splice(0)) this.#answer(lock, x, new Exhausted());
          break;
        }
        const token = this.#grant(lock, w, now, w.shared);
        lock.line.splice(lock.line.indexOf(w), 1);
        this.#answer(lock, w, { ok: true, token }, true);
      }
    }
    this.#schedule(lock);
  }

  /**
   * One timer per lock at the next moment its line can move: the lease's expiry, a reader's, or a
   * waiter losing its place.
   */
  #schedule(lock: Lock): void {
    clearTimeout(lock.timer);
    lock.timer = undefined;
    let next = lock.line.length > 0 && lock.lease ? lock.lease.until : Number.POSITIVE_INFINITY;
    if (lock.line.length > 0) for (const r of lock.readers.values()) next = Math.min(next, r.until);
    for (const w of lock.line) if (!w.held) next = Math.min(next, w.keepUntil);
    if (next === Number.POSITIVE_INFINITY) return;
    lock.timer = setTimeout(
      () => {
        lock.timer = undefined;
        this.#serve(lock, Date.now());
        void this.#commit().catch(() => {});
      },
      Math.max(0, next - Date.now()),
    );
  }

  /**
   * Saves the locks that changed, sets the alarm at the earliest lease's expiry when none is
   * pending at or before it, then sends the answers that depend on them.
   */
  async #commit(): Promise<void> {
    const after = this.#after.splice(0);
    if (this.#dirty.size > 0 || this.#alarmAt === undefined) {
      const writes: Promise<void>[] = [];
      for (const lock of this.#dirty) {
        const { lease, done } = lock;
        if (lock.shares && !lease && lock.readers.size === 0 && !done) {
          // A fire's lock holding nothing: no fence of its own to keep.
          writes.push(this.#storage.delete(lock.at).then(() => {}));
          continue;
        }
        const saved: Saved = {
          fence: lock.fence,
          lease: lease && stored(lease),
          ...(lock.readers.size > 0 ? { readers: [...lock.readers.values()].map(stored) } : {}),
          ...(done ? { done } : {}),
        };
        writes.push(this.#storage.put(lock.at, saved));
      }
      this.#dirty.clear();
      // One pending alarm at or before the earliest expiry (a lease's, a reader's or a record's) is
      // enough: it re-arms when it fires.
      let next = Number.POSITIVE_INFINITY;
      for (const lock of this.#locks.values()) {
        if (lock.lease) next = Math.min(next, lock.lease.until);
        for (const reader of lock.readers.values()) next = Math.min(next, reader.until);
        if (lock.done) next = Math.min(next, lock.done.until);
      }
      if (next !== Number.POSITIVE_INFINITY && !(this.#alarmAt !== undefined && this.#alarmAt <= next)) {
        this.#alarmAt = next;
        writes.push(this.#storage.setAlarm(next));
      }
      await Promise.all(writes);
    }
    for (const send of after) send();
  }
}
