// Batched renewal (src/batch.ts, docs/DESIGN.md §4.3) against the real servers: redis() over
// ioredis on the shared redis-server, and upstash() through the Upstash REST bridge. The
// background renewals of one backend object's leases that come due together go in one renewMany
// request; each lease keeps the guarantees of a renewal of its own: its deadline counts from the
// batch's send time, a key refused in a batch loses only its lease, a batch that fails leaves each
// lease to retry, and an answer that arrives after a lease's deadline does not revive it.
// `lease.renew()` is not batched: it sends its own request at once.
//
// Which background renewals share a batch depends on when each comes due (drawn at random), so
// the batch itself is checked through src/batch.ts's `renewInBatch` (what a lease's timer calls),
// and each lease's handling of its answer through leases renewing in the background: a lease
// handles its answer alike whether the batch carried it alone or with others.
//
// The servers cannot be made to fail one chosen request or to answer late, so two checks wrap the
// real backend: one fails a renewMany with a retryable BackendError (as a dropped connection
// would), one blocks the event loop past a deadline before handing the real answer on.
import { Redis as Upstash } from "@upstash/redis";
import { Redis as IORedis } from "ioredis";
import { afterAll, describe, expect, inject, it } from "vitest";
import { redis } from "../../src/backends/redis/index.ts";
import { upstash } from "../../src/backends/upstash/index.ts";
import { type Pending, renewInBatch } from "../../src/batch.ts";
import {
  type Backend,
  BackendError,
  createMutex,
  type Lease,
  LeaseLostError,
  type LockEvent,
  type RenewManyRequest,
} from "../../src/index.ts";
import { sleep } from "../../src/time.ts";
import { defaultStopMargin, guardOf } from "../../src/timing.ts";
import { lockKey } from "../harness/upstash.ts";

const TTL = 3_000;
const GUARD = guardOf(TTL, defaultStopMargin(TTL));

const up = inject("upstash");
const ctx = inject("redis");
const ioredis = new IORedis({
  host: ctx.host,
  port: ctx.port,
  username: ctx.username,
  password: ctx.password,
});
const sdk = new Upstash({ url: up.url, token: up.token });
afterAll(() => ioredis.quit());

const TARGETS: Record<string, { backend: () => Backend; del: (key: string) => Promise<unknown> }> = {
  "redis (ioredis)": { backend: () => redis(ioredis), del: (key) => ioredis.del(key) },
  "upstash (bridge)": {
    backend: () => upstash({ url: up.url, token: up.token }),
    del: (key) => sdk.del(key),
  },
};

/** `base` with its renewMany calls recorded (when sent, which keys); `around` may change one. */
function recorded(
  base: Backend,
  around?: (r: RenewManyRequest, send: () => Promise<boolean[]>) => Promise<boolean[]>,
) {
  const calls: { at: number; keys: string[] }[] = [];
  const renews: string[] = [];
  const backend: Backend = {
    ...base,
    renew: (r) => {
      renews.push(r.key);
      return base.renew(r);
    },
    renewMany: (r) => {
      calls.push({ at: performance.now(), keys: r.requests.map((q) => q.key) });
      const send = () => base.renewMany!(r);
      return around ? around(r, send) : send();
    },
  };
  return { backend, calls, renews };
}

/** `count` leases on fresh names, on one backend object, with their events. */
async function hold(backend: Backend, count: number, renew: boolean) {
  const events: Record<string, LockEvent[]> = {};
  const names = Array.from({ length: count }, (_, i) => `batch-${i}-${crypto.randomUUID().slice(0, 8)}`);
  const leases: Lease[] = [];
  for (const name of names) {
    events[name] = [];
    const mutex = createMutex(backend, { name, ttl: TTL, renew, onEvent: (e) => events[name]!.push(e) });
    leases.push((await mutex.tryAcquire())!);
  }
  return { names, leases, events };
}

/** The lease's deadline on the monotonic clock (expiresAt is in epoch ms). */
const deadlineOf = (lease: Lease) => performance.now() + (lease.expiresAt - Date.now());

/** Resolves once `events` has an event of one of `types` (polled), with it; rejects after `ms`. */
async function first(events: LockEvent[], types: LockEvent["type"][], ms = 3 * TTL): Promise<LockEvent> {
  for (const until = performance.now() + ms; performance.now() < until; await sleep(10)) {
    const e = events.find((x) => types.includes(x.type));
    if (e) return e;
  }
  throw new Error(`no ${types.join(" or ")} event within ${ms} ms: ${JSON.stringify(events)}`);
}

/** Locks on fresh names taken with the backend's own acquire, with their nonces (for renewInBatch). */
async function taken(backend: Backend, count: number) {
  const locks: { key: string; nonce: string }[] = [];
  for (let i = 0; i < count; i++) {
    const lock = { key: `batch-raw-${i}-${crypto.randomUUID().slice(0, 8)}`, nonce: crypto.randomUUID() };
    expect(await backend.acquire({ ...lock, owner: "batch-test", ttl: TTL })).toMatchObject({ ok: true });
    locks.push(lock);
  }
  return locks;
}

/** Adds a renewal of `lock` to `backend`'s next batch, as a lease's timer does; its settlement. */
function join(backend: Backend, lock: { key: string; nonce: string }, deadline = performance.now() + TTL) {
  return new Promise<[number, boolean]>((resolve, reject) => {
    const p: Pending = { ...lock, ttl: TTL, deadline, resolve, reject };
    renewInBatch(backend, p);
  });
}

for (const [label, target] of Object.entries(TARGETS)) {
  describe(`batched renewal on ${label}`, () => {
    it("has renewMany: the leases of one backend object renew in one request", () => {
      expect(typeof target.backend().renewMany).toBe("function");
    });

    it("renewals that join a batch together go in one request, sent after they joined; each is answered with the batch's send time and its own key's answer", async () => {
      const { backend, calls } = recorded(target.backend());
      const locks = await taken(backend, 4);
      await target.del(lockKey(locks[2]!.key)); // deleted behind its holder's back
      const joined = performance.now();
      const answers = await Promise.all(locks.map((lock) => join(backend, lock)));
      expect(calls).toHaveLength(1);
      expect(calls[0]!.keys).toEqual(locks.map((l) => l.key));
      const sent = calls[0]!.at;
      expect(sent).toBeGreaterThan(joined); // the batch's window: a few ms after the first joined
      for (const [i, [tSend, ours]] of answers.entries()) {
        expect(ours).toBe(i !== 2);
        // Read just before the request was handed to the backend (the recorder reads it after).
        expect(tSend).toBeGreaterThan(joined);
        expect(tSend).toBeLessThanOrEqual(sent);
      }
      for (const i of [0, 1, 3]) {
        const info = await backend.inspect({ key: locks[i]!.key });
        expect(info?.ttlLeft).toBeGreaterThan(TTL - 500); // renewed on the server to a full ttl
      }
      expect(await backend.inspect({ key: locks[2]!.key })).toBeNull(); // not taken by the batch
      await Promise.all(locks.map((lock) => backend.release(lock)));
    });

    it("a renewal whose deadline has come by the batch's send is left out of it and fails retryably; the others go", async () => {
      const { backend, calls } = recorded(target.backend());
      const [due, live] = await taken(backend, 2);
      // The batch leaves min(20 ms, ttl / 50) after its first renewal joined: `due`'s deadline is before.
      const results = await Promise.allSettled([
        join(backend, due!, performance.now() + 1),
        join(backend, live!),
      ]);
      expect(results[0]).toMatchObject({
        status: "rejected",
        reason: { code: "ERR_BACKEND", retryable: true },
      });
      expect(results[1]).toMatchObject({ status: "fulfilled", value: [expect.any(Number), true] });
      expect(calls.map((c) => c.keys)).toEqual([[live!.key]]);
      await Promise.all([due!, live!].map((lock) => backend.release(lock)));
    });

    it("a lease's background renewal goes in a batch, and its new deadline counts from the batch's send time", async () => {
      const { backend, calls, renews } = recorded(target.backend());
      const { names, leases, events } = await hold(backend, 1, true);
      const renewed = await first(events[names[0]!]!, ["renewed", "lost"]);
      expect(renewed.type).toBe("renewed");
      const call = calls.find((c) => c.keys.includes(names[0]!));
      expect(call).toBeDefined();
      expect(renews).toEqual([]); // never a request of its own
      // Counted from the send, read just before the recorder's `at`: never later than that. (Not
      // much earlier either; deadlineOf reads two clocks, and a pause between its reads makes a
      // deadline look earlier: a loaded run saw 8 ms, hence the margin below.)
      const deadline = deadlineOf(leases[0]!);
      expect(deadline).toBeLessThanOrEqual(call!.at + TTL - GUARD + 1);
      expect(deadline).toBeGreaterThan(call!.at + TTL - GUARD - 50);
      await leases[0]!.release();
    });

    it("lease.renew() is not batched: it sends a request of its own at once", async () => {
      const { backend, calls, renews } = recorded(target.backend());
      const { names, leases } = await hold(backend, 2, false);
      // Their acquires' deadlines now lie 200 ms or more before a renewal's (the margin below,
      // 50 ms, is for deadlineOf's two clock reads, which a loaded run saw 8 ms apart).
      await sleep(200);
      const asked = performance.now();
      await Promise.all(leases.map((l) => l.renew()));
      expect(calls).toEqual([]);
      expect(renews).toEqual(names);
      for (const lease of leases) {
        const deadline = deadlineOf(lease);
        expect(deadline).toBeGreaterThan(asked + TTL - GUARD - 50);
        expect(lease.valid).toBe(true);
      }
      await Promise.all(leases.map((l) => l.release()));
    });

    it("a key refused in a batch loses only its lease", async () => {
      const { backend } = recorded(target.backend());
      const { names, leases, events } = await hold(backend, 3, true);
      await target.del(lockKey(names[1]!)); // deleted behind its holder's back
      // Each lease's first background renewal (due within ttl / 3 × 1.1 of its acquire).
      const answered = await Promise.all(names.map((name) => first(events[name]!, ["renewed", "lost"])));
      expect(answered.map((e) => e.type)).toEqual(["renewed", "lost", "renewed"]);
      expect(answered[1]).toMatchObject({ reason: "gone" });
      expect(leases[1]!.signal.aborted).toBe(true);
      expect(leases[1]!.signal.reason).toBeInstanceOf(LeaseLostError);
      for (const i of [0, 2]) {
        expect(leases[i]!.valid).toBe(true);
        expect(leases[i]!.signal.aborted).toBe(false);
        expect(events[names[i]!]!.some((e) => e.type === "lost")).toBe(false);
      }
      await Promise.all(leases.map((l) => l.release()));
    });

    it("a batch that fails leaves each lease to retry on its own: none is lost", async () => {
      let failed = 0;
      const { backend, calls } = recorded(target.backend(), async (_r, send) => {
        if (failed++ === 0)
          throw new BackendError("fault: the connection dropped", { backend: "test", retryable: true });
        return send();
      });
      const { names, leases, events } = await hold(backend, 3, true);
      // Past the first ttl: every lease renewed in the background, after the failed batch.
      await sleep(TTL + 500);
      expect(failed).toBeGreaterThan(1);
      expect(calls.length).toBeGreaterThan(1);
      const failedKeys = calls[0]!.keys;
      for (const [i, name] of names.entries()) {
        expect(leases[i]!.valid).toBe(true);
        const types = events[name]!.map((e) => e.type);
        expect(types).not.toContain("lost");
        if (failedKeys.includes(name)) {
          // Its retry came after the failure, and renewed it.
          expect(types.indexOf("renewed")).toBeGreaterThan(types.indexOf("renew-failed"));
          expect(types.indexOf("renew-failed")).toBeGreaterThanOrEqual(0);
        }
      }
      await Promise.all(leases.map((l) => l.release()));
    });

    it("no resurrection: a batch answered after the lease's deadline loses it, unrenewed", async () => {
      let block = 0; // block the event loop until this time (monotonic) before answering
      let deadline = 0;
      const { backend } = recorded(target.backend(), async (_r, send) => {
        const answers = await send();
        block = deadline + 20;
        while (performance.now() < block);
        return answers;
      });
      const { names, leases, events } = await hold(backend, 1, true);
      deadline = deadlineOf(leases[0]!);
      // Its first background renewal is answered just after its deadline (the request's own
      // bound cannot fire while the loop is blocked).
      const answered = await first(events[names[0]!]!, ["renewed", "lost"]);
      expect(block).toBeGreaterThan(0);
      expect(answered).toMatchObject({ type: "lost", reason: "late" });
      expect(leases[0]!.valid).toBe(false);
      expect(leases[0]!.signal.aborted).toBe(true);
      expect(events[names[0]!]!.some((e) => e.type === "renewed")).toBe(false);
      await leases[0]!.release();
    });
  });
}
