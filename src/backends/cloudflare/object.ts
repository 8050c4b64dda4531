// Over 300 lines on purpose: the lease, the line of waiters, the alarm and their storage are one
// state machine in one class; the wire format is in protocol.ts, the route in handler.ts.
// LeaseholdLock: the Durable Object that holds one lock. Typed structurally, so this file loads
// on every runtime; workerd constructs it with its real state object.
import {
  json,
  KEEP_PLACE_MS,
  type LockRequest,
  MAX_HOLD_MS,
  parseRequest,
  type Replies,
  readRequest,
} from "./protocol.ts";

/** The part of a Durable Object's storage that {@link LeaseholdLock} uses. */
export interface DurableObjectStorageLike {
  get(key: string): Promise<unknown>;
  put(key: string, value: unknown): Promise<void>;
  setAlarm(scheduledTime: number): Promise<void>;
}

/** The part of `DurableObjectState` (the constructor's first argument) that {@link LeaseholdLock} uses. */
export interface DurableObjectStateLike {
  readonly storage: DurableObjectStorageLike;
  blockConcurrencyWhile<T>(callback: () => Promise<T>): Promise<T>;
}

/** What is kept in storage under "lock": the fence counter and the lease, without its expiry time. */
interface Saved {
  fence: number;
  lease: { nonce: string; owner: string; token: number; ttl: number } | null;
}

interface Held {
  nonce: string;
  owner: string;
  token: number;
  ttl: number;
  /** Date.now() at which it expires on this object. */
  until: number;
}

interface Waiter {
  id: string;
  nonce: string;
  owner: string;
  ttl: number;
  /** The request held open for it, if one is. */
  held?: { resolve: (reply: Replies["acquire"]) => void; timer: ReturnType<typeof setTimeout> } | undefined;
  /** While no request is held: when it loses its place (Date.now()). */
  keepUntil: number;
}

/**
 * The Durable Object class that holds leasehold locks: one object per lock name
 * (`idFromName(name)`). Export it from your Worker and bind it (see `durableObject`):
 *
 * - the lease and the fence counter live in the object's storage and are written before any
 *   answer that depends on them, so a restart or a move never loses a holder nor sets a token
 *   back; a lease read back after a restart counts as renewed at that moment (its holder's own
 *   deadline is earlier, so this can only delay a takeover);
 * - expiry is judged on the object's clock; an alarm at the lease's expiry frees it and serves
 *   the next waiter even when nobody calls;
 * - waiters (`acquireQueued`) are served first come, first served: a waiting request is held open
 *   (at most 30 s, and as long as the caller asks) and answered with the lease as soon as the
 *   lock is released or expires; a waiter keeps its place for 1 s between two requests, and a
 *   lock freed in that gap is reserved for it for that long.
 */
export class LeaseholdLock {
  readonly #storage: DurableObjectStorageLike;
  #fence = 0;
  #lease: Held | null = null;
  /** Waiters, oldest first. In memory: a restart drops them (they come back with their next request). */
  #line: Waiter[] = [];
  /** Whether the lease or fence changed since the last save; whether a new lease needs an alarm. */
  #dirty = false;
  #arm = false;
  /** When the alarm this instance set will fire (undefined: none known). */
  #alarmAt: number | undefined;
  /** Answers to send once the state they depend on is saved. */
  #after: (() => void)[] = [];
  #timer: ReturnType<typeof setTimeout> | undefined;

  /**
   * Called by the Workers runtime with the object's `DurableObjectState` (and the Worker's
   * environment, unused).
   */
  constructor(state: DurableObjectStateLike, _env?: unknown) {
    this.#storage = state.storage;
    void state.blockConcurrencyWhile(async () => {
      const saved = (await this.#storage.get("lock")) as Saved | undefined;
      if (!saved) return;
      this.#fence = saved.fence;
      // Its expiry time died with the old instance: count it as renewed now (only later, never earlier).
      if (saved.lease) this.#lease = { ...saved.lease, until: Date.now() + saved.lease.ttl };
    });
  }

  /**
   * One operation (`POST`, a JSON body). Called through the stub by `durableObject(namespace)` and
   * by `lockHandler`.
   *
   * @param request The operation.
   * @returns Its JSON answer; 400 for a malformed request.
   */
  async fetch(request: Request): Promise<Response> {
    if (request.method !== "POST") return json({ error: "POST only" }, 405);
    const body = await readRequest(request);
    if (body === undefined) return json({ error: "request too large" }, 413);
    const r = parseRequest(body);
    if (typeof r === "string") return json({ error: r }, 400);
    return json(await this.#run(r));
  }

  /** Called by the Workers runtime at the lease's expiry: frees it and serves the next waiter. */
  async alarm(): Promise<void> {
    this.#alarmAt = undefined;
    this.#serve(Date.now());
    // A lease that outlived the alarm (renewed, or granted while an earlier alarm was pending):
    // the next alarm at its expiry.
    this.#arm = this.#lease !== null;
    this.#dirty ||= this.#arm;
    await this.#commit();
  }

  /** Runs one operation; every change is saved before its answer (and the answers it unblocked). */
  async #run(r: LockRequest): Promise<unknown> {
    const now = Date.now();
    this.#serve(now);
    await this.#commit();
    const reply = await this.#apply(r, now);
    await this.#commit();
    return reply;
  }

  #apply(r: LockRequest, now: number): Replies[LockRequest["op"]] | Promise<Replies["acquire"]> {
    switch (r.op) {
      case "acquire":
        return this.#acquire(r, now);
      case "renew": {
        const lease = this.#lease;
        const ok = lease?.nonce === r.nonce;
        if (ok) this.#extend(lease, r.ttl, now);
        return { ok } satisfies Replies["renew"];
      }
      case "release": {
        if (this.#lease?.nonce === r.nonce) {
          this.#lease = null;
          this.#dirty = true;
        } else {
          // The nonce of a waiter's last attempt: it gave up, so it leaves the line.
          const w = this.#line.find((x) => x.nonce === r.nonce);
          if (w) this.#leave(w);
        }
        this.#serve(now);
        return { ok: true } satisfies Replies["release"];
      }
      case "raise": {
        // leasehold/quorum: the holder's token and the fence become at least `token`.
        const lease = this.#lease;
        const ok = lease?.nonce === r.nonce;
        if (ok) {
          lease.token = Math.max(lease.token, r.token);
          this.#fence = Math.max(this.#fence, r.token);
          this.#dirty = true;
        }
        return { ok } satisfies Replies["raise"];
      }
      case "inspect": {
        const lease = this.#lease;
        const holder = lease && { owner: lease.owner, token: lease.token, ttlLeft: lease.until - now };
        return { holder, waiters: this.#line.length } satisfies Replies["inspect"];
      }
    }
  }

  #acquire(
    r: Extract<LockRequest, { op: "acquire" }>,
    now: number,
  ): Replies["acquire"] | Promise<Replies["acquire"]> {
    const lease = this.#lease;
    if (lease?.nonce === r.nonce) {
      // A retried acquire: the same token, extended.
      this.#extend(lease, r.ttl, now);
      return { ok: true, token: lease.token };
    }
    let w = r.waiter === undefined ? undefined : this.#line.find((x) => x.id === r.waiter);
    const head = this.#line[0];
    if (!lease && (!head || head === w)) {
      if (w) this.#leave(w);
      return { ok: true, token: this.#grant(r, now) };
    }
    const hold = Math.min(r.hold ?? 0, MAX_HOLD_MS);
    if (r.waiter === undefined || hold <= 0) {
      return { ok: false, retryAfter: Math.max(0, (lease ? lease.until : head!.keepUntil) - now) };
    }
    if (!w) {
      w = { id: r.waiter, nonce: r.nonce, owner: r.owner, ttl: r.ttl, keepUntil: 0 };
      this.#line.push(w);
    } else {
      // A new attempt of the same waiter supersedes its older one, if that is still held.
      this.#answer(w, { ok: false, retryAfter: 0 });
      Object.assign(w, { nonce: r.nonce, owner: r.owner, ttl: r.ttl });
    }
    const waiter = w;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        if (waiter.held?.timer === timer) this.#answer(waiter, { ok: false, retryAfter: 0 });
      }, hold);
      waiter.held = { resolve, timer };
      this.#schedule();
    });
  }

  /**
   * Ends `w`'s held request with `reply`; `w` keeps its place for KEEP_PLACE_MS (a granted waiter
   * has already left the line). `later` defers the reply until the next commit has saved.
   */
  #answer(w: Waiter, reply: Replies["acquire"], later = false): void {
    const held = w.held;
    if (!held) return;
    clearTimeout(held.timer);
    w.held = undefined;
    w.keepUntil = Date.now() + KEEP_PLACE_MS;
    if (later) this.#after.push(() => held.resolve(reply));
    else held.resolve(reply);
    this.#schedule();
  }

  /** A new lease for `r`, with the next token; saved (with an alarm at its expiry) by the next commit. */
  #grant(r: { nonce: string; owner: string; ttl: number }, now: number): number {
    const token = ++this.#fence;
    this.#lease = { nonce: r.nonce, owner: r.owner, token, ttl: r.ttl, until: now + r.ttl };
    this.#dirty = true;
    this.#arm = true;
    return token;
  }

  #extend(lease: Held, ttl: number, now: number): void {
    lease.until = now + ttl;
    // The stored ttl is what a restart counts from: keep it true when it changes.
    if (lease.ttl !== ttl) {
      lease.ttl = ttl;
      this.#dirty = true;
    }
  }

  /** Takes `w` out of the line, answering its held request (if any) with "not yet". */
  #leave(w: Waiter): void {
    this.#line.splice(this.#line.indexOf(w), 1);
    this.#answer(w, { ok: false, retryAfter: 0 });
  }

  /**
   * Brings the state to `now`: frees an expired lease, drops waiters that lost their place, and
   * hands a free lock to the oldest waiter whose request is held (its answer waits for the save).
   */
  #serve(now: number): void {
    if (this.#lease && this.#lease.until <= now) {
      this.#lease = null;
      this.#dirty = true;
    }
    for (;;) {
      this.#line = this.#line.filter((w) => w.held || w.keepUntil > now);
      const head = this.#line[0];
      if (this.#lease || !head?.held) break;
      const token = this.#grant(head, now);
      this.#line.shift();
      this.#answer(head, { ok: true, token }, true);
    }
    this.#schedule();
  }

  /** One timer at the next moment the line can move: the lease's expiry, or a waiter losing its place. */
  #schedule(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    let next = this.#line.length > 0 && this.#lease ? this.#lease.until : Number.POSITIVE_INFINITY;
    for (const w of this.#line) if (!w.held) next = Math.min(next, w.keepUntil);
    if (next === Number.POSITIVE_INFINITY) return;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        this.#serve(Date.now());
        void this.#commit().catch(() => {});
      },
      Math.max(0, next - Date.now()),
    );
  }

  /** Saves the state when it changed, then sends the answers that depend on it. */
  async #commit(): Promise<void> {
    const after = this.#after.splice(0);
    if (this.#dirty) {
      this.#dirty = false;
      const lease = this.#lease;
      const saved: Saved = {
        fence: this.#fence,
        lease: lease && { nonce: lease.nonce, owner: lease.owner, token: lease.token, ttl: lease.ttl },
      };
      const writes = [this.#storage.put("lock", saved)];
      // One pending alarm at or before the lease's expiry is enough: it re-arms when it fires.
      if (this.#arm && lease && !(this.#alarmAt !== undefined && this.#alarmAt <= lease.until)) {
        this.#alarmAt = lease.until;
        writes.push(this.#storage.setAlarm(lease.until));
      }
      this.#arm = false;
      await Promise.all(writes);
    }
    for (const send of after) send();
  }
}
