// The timers of batched renewals (src/lease.ts inCell, docs/DESIGN.md §4.3): the grid's cell is
// min(200 ms, ttl / 50); the leases whose renewals come due in one cell share one timer, cleared
// when the last leaves, and one request of up to 512 renewals; a cell armed under fake timers
// since removed is never joined; on Workers, where a timer lives in the invocation that set it,
// leases renew alone, with timers of their own.
import { describe, expect, it, vi } from "vitest";
import { memory } from "../../src/backends/memory/index.ts";
import type { Backend, Lease } from "../../src/index.ts";
import { createMutex } from "../../src/index.ts";
import { onGrid } from "../../src/timing.ts";
import { fakeClockInEachTest, useFakeClock } from "../harness/doubles.ts";

fakeClockInEachTest();

const TTL = 15_000;

/** memory() with renewMany (each key renewed as by renew), recording each batch's size and each lone renew. */
function batching(): { backend: Backend; batches: number[]; alone: () => number } {
  const m = memory();
  const batches: number[] = [];
  let alone = 0;
  const backend: Backend = {
    ...m,
    renew: (r) => {
      alone++;
      return m.renew(r);
    },
    renewMany: ({ requests, signal }) => {
      batches.push(requests.length);
      return Promise.all(requests.map((r) => m.renew({ ...r, signal })));
    },
  };
  return { backend, batches, alone: () => alone };
}

/** Acquires `n` fresh names on `backend` with `make` (createMutex), each with its own lease. */
async function hold(make: typeof createMutex, backend: Backend, n: number, tag: string): Promise<Lease[]> {
  const leases: Lease[] = [];
  for (let i = 0; i < n; i++) {
    const lease = await make(backend, { name: `${tag}-${i}`, ttl: TTL }).tryAcquire();
    if (!lease) throw new Error("a fresh name was held");
    leases.push(lease);
  }
  return leases;
}

describe("batched renewals' timers", () => {
  it("leases due in one cell of the grid share one timer, renew in one batch, and leave no timer once released", async () => {
    vi.spyOn(Math, "random").mockReturnValue(0.5); // every lease due at the same instant
    const { backend, batches } = batching();
    const leases = await hold(createMutex, backend, 50, "cell");
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(TTL);
    expect(batches.length).toBeGreaterThanOrEqual(2);
    expect(batches.every((n) => n === 50)).toBe(true);
    expect(leases.every((l) => l.valid)).toBe(true);
    expect(vi.getTimerCount()).toBe(1);
    await Promise.all(leases.map((l) => l.release()));
    expect(vi.getTimerCount()).toBe(0);
  });

  it("the grid's cell is min(200 ms, ttl / 50): a renewal due in it comes at its start", () => {
    expect(onGrid(1_334, 15_000)).toBe(1_200);
    expect(onGrid(1_400, 15_000)).toBe(1_400);
    expect(onGrid(1_334, 5_000)).toBe(1_300);
    expect(onGrid(1_334, 1_000)).toBe(1_320);
  });

  it("a request carries up to 512 renewals: 600 due in one cell go in two", async () => {
    vi.spyOn(Math, "random").mockReturnValue(0.5);
    const { backend, batches } = batching();
    const leases = await hold(createMutex, backend, 600, "full");
    await vi.advanceTimersByTimeAsync(TTL / 2);
    expect(batches).toEqual([512, 88]);
    await Promise.all(leases.map((l) => l.release()));
  });

  it("a cell armed under fake timers since removed is not joined: a lease due then still renews", async () => {
    vi.spyOn(Math, "random").mockReturnValue(0.5);
    const { backend, batches } = batching();
    // Left held under a clock that is then removed: its cell's timer never fires.
    const [stranded] = await hold(createMutex, backend, 1, "stranded");
    vi.useRealTimers();
    useFakeClock(); // a new fake clock, from the same start: the same cell's instant
    const [lease] = await hold(createMutex, backend, 1, "fresh");
    await vi.advanceTimersByTimeAsync(TTL * 2);
    expect(batches.length).toBeGreaterThanOrEqual(4);
    expect(lease!.valid).toBe(true);
    await lease!.release();
    await stranded!.release();
  });

  it("on Workers, leases renew alone, each with a timer of its own", async () => {
    vi.stubGlobal("navigator", { userAgent: "Cloudflare-Workers" });
    vi.resetModules();
    try {
      const { createMutex: onWorkers } = await import("../../src/index.ts");
      vi.spyOn(Math, "random").mockReturnValue(0.5);
      const { backend, batches, alone } = batching();
      const leases = await hold(onWorkers, backend, 3, "workers");
      expect(vi.getTimerCount()).toBe(3);
      await vi.advanceTimersByTimeAsync(TTL);
      expect(batches).toEqual([]);
      expect(alone()).toBeGreaterThanOrEqual(6);
      expect(leases.every((l) => l.valid)).toBe(true);
      await Promise.all(leases.map((l) => l.release()));
    } finally {
      vi.unstubAllGlobals();
      vi.resetModules();
    }
  });
});
