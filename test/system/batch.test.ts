// Batched renewal (src/batch.ts, docs/DESIGN.md §4.3) against the real servers: redis() over
// ioredis on the shared redis-server, and upstash() through the Upstash REST bridge. The leases of
// one backend object renew together in one renewMany request; each lease keeps the guarantees of a
// renewal of its own: its deadline counts from the batch's send time, a key refused in a batch
// loses only its lease, a batch that fails leaves each lease to retry, and an answer that arrives
// after a lease's deadline does not revive it.
//
// The servers cannot be made to fail one chosen request or to answer late, so two checks wrap the
// real backend: one fails a renewMany with a retryable BackendError (as a dropped connection
// would), one blocks the event loop past a deadline before handing the real answer on.
import { Redis as Upstash } from "@upstash/redis";
import { Redis as IORedis } from "ioredis";
import { afterAll, describe, expect, inject, it } from "vitest";
import { redis } from "../../src/backends/redis/index.ts";
import { upstash } from "../../src/backends/upstash/index.ts";
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
  const backend: Backend = {
    ...base,
    renewMany: (r) => {
      calls.push({ at: performance.now(), keys: r.requests.map((q) => q.key) });
      const send = () => base.renewMany!(r);
      return around ? around(r, send) : send();
    },
  };
  return { backend, calls };
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

for (const [label, target] of Object.entries(TARGETS)) {
  describe(`batched renewal on ${label}`, () => {
    it("has renewMany: the leases of one backend object renew in one request", () => {
      expect(typeof target.backend().renewMany).toBe("function");
    });

    it("a batch renews each lease, and each deadline counts from the batch's send time", async () => {
      const { backend, calls } = recorded(target.backend());
      const { names, leases } = await hold(backend, 4, false);
      const asked = performance.now();
      await Promise.all(leases.map((l) => l.renew()));
      expect(calls).toHaveLength(1);
      expect([...calls[0]!.keys].sort()).toEqual([...names].sort());
      const sent = calls[0]!.at;
      // Sent after the renewals were asked for (the batch's window), so a deadline counted from
      // the ask would come out earlier than one counted from the send.
      expect(sent).toBeGreaterThan(asked);
      for (const lease of leases) {
        // Counted from a moment between the ask and the send: never later than the send, never
        // before the ask (deadlineOf reads two clocks, and a pause between its reads makes a
        // deadline look earlier: a loaded run saw 8 ms, so the lower bound is the ask's).
        const deadline = deadlineOf(lease);
        expect(deadline).toBeGreaterThan(asked + TTL - GUARD - 3);
        expect(deadline).toBeLessThan(sent + TTL - GUARD + 3);
        expect(lease.valid).toBe(true);
      }
      for (const name of names) {
        const info = await backend.inspect({ key: name });
        expect(info?.ttlLeft).toBeGreaterThan(TTL - 500); // renewed on the server to a full ttl
      }
      await Promise.all(leases.map((l) => l.release()));
    });

    it("a key refused in a batch loses only its lease", async () => {
      const { backend, calls } = recorded(target.backend());
      const { names, leases, events } = await hold(backend, 3, false);
      await target.del(lockKey(names[1]!)); // deleted behind its holder's back
      const results = await Promise.allSettled(leases.map((l) => l.renew()));
      expect(calls).toHaveLength(1);
      expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
      expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(LeaseLostError);
      expect(leases[1]!.signal.aborted).toBe(true);
      expect(events[names[1]!]!.filter((e) => e.type === "lost")).toMatchObject([{ reason: "gone" }]);
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

    it("no resurrection: a batch answered after a lease's deadline loses that lease and renews the others", async () => {
      let block = 0; // block the event loop until this time (monotonic) before answering
      const { backend } = recorded(target.backend(), async (_r, send) => {
        const answers = await send();
        while (performance.now() < block);
        return answers;
      });
      const { names, leases, events } = await hold(backend, 1, false);
      await sleep(1_000);
      const later = await hold(backend, 1, false); // its deadline is a second later
      const [early, late] = [leases[0]!, later.leases[0]!];
      // Renew both in one batch shortly before the first one's deadline, and let the answer arrive
      // just after it (the request's own bound cannot fire while the loop is blocked).
      await sleep(deadlineOf(early) - performance.now() - 300);
      block = deadlineOf(early) + 20;
      const results = await Promise.allSettled([early.renew(), late.renew()]);
      expect(results[0]!.status).toBe("rejected");
      expect((results[0] as PromiseRejectedResult).reason).toBeInstanceOf(LeaseLostError);
      expect(early.valid).toBe(false);
      expect(early.signal.aborted).toBe(true);
      expect(events[names[0]!]!.filter((e) => e.type === "lost")).toMatchObject([{ reason: "late" }]);
      expect(events[names[0]!]!.some((e) => e.type === "renewed")).toBe(false);
      expect(results[1]!.status).toBe("fulfilled");
      expect(late.valid).toBe(true);
      await Promise.all([early.release(), late.release()]);
    });
  });
}
