// The core's use of the optional waiting capability (Backend.acquireQueued, docs/DESIGN.md §4.7):
// which calls use it, with which hold and waiter, and that the deadline of a lease handed over
// in a held-open request counts from the time that request was sent. The backend is memory()
// with acquireQueued added (a double: the real one is the Durable Object, tested in
// test/backends/cloudflare/); the clock is fake.
import { describe, expect, it, vi } from "vitest";
import type { Backend } from "../../src/backend.ts";
import { memory } from "../../src/backends/memory/index.ts";
import { createMutex } from "../../src/index.ts";
import { sleep } from "../../src/time.ts";
import { defaultStopMargin, guardOf } from "../../src/timing.ts";
import { fakeClockInEachTest } from "../harness/doubles.ts";

fakeClockInEachTest();

type QueuedCall = Parameters<NonNullable<Backend["acquireQueued"]>>[0];

/**
 * memory() plus an acquireQueued that holds each request `delay` ms, then tries the store once and,
 * when taken, answers "not yet" with retryAfter 0, as the Durable Object does.
 */
function queued(delay: number) {
  const store = memory();
  const calls: (QueuedCall & { at: number })[] = [];
  const plain: number[] = [];
  const backend: Backend = {
    ...store,
    acquire: (r) => {
      plain.push(Date.now());
      return store.acquire(r);
    },
    acquireQueued: async (r) => {
      calls.push({ ...r, at: Date.now() });
      await sleep(delay, r.signal);
      const result = await store.acquire(r);
      return result.ok ? result : { ok: false, retryAfter: 0 };
    },
  };
  return { backend, calls, plain };
}

describe("acquire() on a backend with acquireQueued", () => {
  it("the lease handed over in a held request has its deadline from the send time, not the answer's", async () => {
    const ttl = 4_000;
    const { backend, calls } = queued(600);
    const sent = Date.now();
    const acquiring = createMutex(backend, { name: "q", ttl }).acquire();
    await vi.advanceTimersByTimeAsync(600);
    const lease = await acquiring;
    expect(calls).toHaveLength(1);
    expect(Date.now() - sent).toBe(600);
    expect(lease.expiresAt).toBe(sent + ttl - guardOf(ttl, defaultStopMargin(ttl)));
    await lease.release();
  });

  it("sends one waiter id for every attempt of a call, a new one per call, and hold = min(ttl/4, 10 s, time left)", async () => {
    const { backend, calls } = queued(100);
    const holder = await createMutex(memory(), { name: "other" }).acquire(); // unrelated: keeps nothing
    const store = backend;
    // Take the lock first through the plain method, so the queued attempts answer "taken".
    await store.acquire({ key: "q", owner: "h", nonce: "n", ttl: 60_000 });
    const m = createMutex(store, { name: "q", ttl: 2_000 });
    const first = m.acquire({ timeout: 1_000 }).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(1_100);
    expect(await first).toMatchObject({ code: "ERR_LOCK_TIMEOUT" });
    const firstIds = new Set(calls.map((c) => c.waiter));
    expect(firstIds.size).toBe(1);
    expect(calls.length).toBeGreaterThanOrEqual(5);
    expect(calls[0]!.hold).toBe(500); // ttl / 4
    for (const c of calls) expect(c.hold).toBeLessThanOrEqual(1_000 - (c.at - calls[0]!.at));
    // Attempts follow each other at once, not after a backoff: the waiting happened in the backend.
    const gaps = calls.slice(1).map((c, i) => c.at - calls[i]!.at);
    for (const gap of gaps) expect(gap).toBeLessThanOrEqual(101);
    const n = calls.length;
    const second = createMutex(store, { name: "q", ttl: 100_000 })
      .acquire({ timeout: 50_000 })
      .catch(() => null);
    await vi.advanceTimersByTimeAsync(10);
    expect(calls[n]!.waiter).not.toBe(calls[0]!.waiter);
    expect(calls[n]!.hold).toBe(10_000); // capped at 10 s
    await vi.advanceTimersByTimeAsync(50_000);
    await second;
    await holder.release();
  });

  it("tryAcquire() and acquire({ timeout: 0 }) never wait in line", async () => {
    const { backend, calls, plain } = queued(100);
    await backend.acquire({ key: "q", owner: "h", nonce: "n", ttl: 60_000 });
    const m = createMutex(backend, { name: "q", ttl: 2_000 });
    expect(await m.tryAcquire()).toBeNull();
    await expect(m.acquire({ timeout: 0 })).rejects.toMatchObject({ code: "ERR_LOCK_TIMEOUT" });
    expect(calls).toEqual([]);
    expect(plain).toHaveLength(3);
  });

  it("createMutex refuses an acquireQueued that is not a function", () => {
    expect(() => createMutex({ ...memory(), acquireQueued: 1 } as never, { name: "q" })).toThrow(
      /backend\.acquireQueued must be a function/,
    );
  });
});
