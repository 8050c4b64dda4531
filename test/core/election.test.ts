// The election loop on the memory backend, with real timers and short ttls; stall and health
// checks with fake timers. Wrappers around memory() make the faults (a frozen leader).
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Backend } from "../../src/backend.ts";
import { memory } from "../../src/backends/memory/index.ts";
import {
  BackendError,
  createElection,
  createMutex,
  type LeadershipChange,
  type Lease,
  LeaseLostError,
  type MutexOptions,
} from "../../src/index.ts";
import { sleep } from "../../src/time.ts";
import { renewalWindow } from "../../src/timing.ts";

/** A mutex and its election in one object: the tests campaign, read the holder and take the lock. */
function candidate(backend: Backend, options: MutexOptions) {
  const mutex = createMutex(backend, options);
  const election = createElection(mutex);
  return {
    holder: mutex.holder,
    tryAcquire: mutex.tryAcquire,
    lead: election.lead,
    watch: election.watch,
    health: election.health,
    get isLeader() {
      return election.isLeader;
    },
  };
}

const untilAborted = (signal: AbortSignal) =>
  new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));

/** A backend whose renewals can be made to hang, as if the process froze or was cut off. */
function freezable(store: Backend) {
  let frozen = false;
  const backend: Backend = {
    ...store,
    renew: (r) => (frozen ? new Promise<boolean>(() => {}) : store.renew(r)),
    release: (r) => (frozen ? new Promise<void>(() => {}) : store.release(r)),
  };
  return { backend, freeze: () => (frozen = true) };
}

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe("lead", () => {
  it("runs the task with the lease, and on shutdown stops it, releases, and resolves after it settled", async () => {
    const store = memory();
    const mutex = candidate(store, { name: "l", ttl: 300, retryDelay: 20 });
    const stop = new AbortController();
    const events: string[] = [];
    let lease: Lease | undefined;
    const loop = mutex.lead(
      async (signal, l) => {
        lease = l;
        events.push(`start ${l.token}`);
        await untilAborted(signal);
        await sleep(30); // winding down
        events.push("stopped");
      },
      { signal: stop.signal },
    );
    await sleep(50);
    expect(mutex.isLeader).toBe(true);
    expect((await mutex.holder())?.token).toBe(lease?.token);
    stop.abort();
    await loop;
    expect(events).toEqual(["start 1", "stopped"]);
    expect(mutex.isLeader).toBe(false);
    expect(lease?.signal.aborted).toBe(true);
    expect(await mutex.holder()).toBeNull();
  });

  it("reports a task that throws and campaigns again after a backoff", async () => {
    const mutex = candidate(memory(), { name: "l", ttl: 300, retryDelay: 50 });
    const stop = new AbortController();
    const errors: unknown[] = [];
    const tokens: number[] = [];
    const starts: number[] = [];
    await mutex.lead(
      async (_signal, lease) => {
        starts.push(performance.now());
        tokens.push(lease.token);
        if (tokens.length === 3) stop.abort();
        throw new Error(`task ${tokens.length} failed`);
      },
      { signal: stop.signal, onError: (e) => errors.push(e) },
    );
    expect(tokens).toEqual([1, 2, 3]);
    expect(errors.map((e) => (e as Error).message)).toEqual([
      "task 1 failed",
      "task 2 failed",
      "task 3 failed",
    ]);
    // the backoff after a failure: retryDelay jittered by ±25 %
    for (let i = 1; i < starts.length; i++) expect(starts[i]! - starts[i - 1]!).toBeGreaterThanOrEqual(37);
  });

  it("does not report a task that rejects with its own signal's reason", async () => {
    const mutex = candidate(memory(), { name: "l", ttl: 300, retryDelay: 20 });
    const stop = new AbortController();
    const onError = vi.fn();
    const loop = mutex.lead((signal) => sleep(60_000, signal), { signal: stop.signal, onError });
    await sleep(30);
    stop.abort();
    await loop;
    expect(onError).not.toHaveBeenCalled();
  });

  it("hands over gracefully: a waiting follower leads within one retryDelay of the shutdown", async () => {
    const store = memory();
    const retryDelay = 200;
    const stopA = new AbortController();
    const stopB = new AbortController();
    const running: string[] = [];
    const starts: Record<string, number> = {};
    const task = (who: string) => async (signal: AbortSignal) => {
      running.push(who);
      expect(running).toHaveLength(1); // never two leaders at once in this process
      starts[who] = performance.now();
      await untilAborted(signal);
      running.splice(running.indexOf(who), 1);
    };
    const a = candidate(store, { name: "h", ttl: 1_000, retryDelay, owner: "a" });
    const b = candidate(store, { name: "h", ttl: 1_000, retryDelay, owner: "b" });
    const loopA = a.lead(task("a"), { signal: stopA.signal });
    await sleep(20);
    const loopB = b.lead(task("b"), { signal: stopB.signal });
    await sleep(300); // b is waiting, polling at retryDelay
    expect(a.isLeader).toBe(true);
    expect(b.isLeader).toBe(false);
    const shutdown = performance.now();
    stopA.abort();
    await loopA;
    while (!b.isLeader) await sleep(5);
    const handover = starts.b! - shutdown;
    expect(handover).toBeLessThanOrEqual(retryDelay + 100); // + scheduling slack on a busy machine
    stopB.abort();
    await loopB;
  });

  it("hands over after a crash (no release) within ttl + retryDelay, and the old task's signal aborts first", async () => {
    const store = memory();
    const ttl = 600;
    const retryDelay = 100;
    const frozen = freezable(store);
    const stopB = new AbortController();
    let crashedSignal: AbortSignal | undefined;
    let crashedAt = 0;
    let abortedAt = 0;
    const a = candidate(frozen.backend, { name: "c", ttl, retryDelay, owner: "a" });
    const b = candidate(store, { name: "c", ttl, retryDelay, owner: "b" });
    const loopA = a.lead(
      async (signal) => {
        crashedSignal = signal;
        await sleep(renewalWindow(ttl).earliest - 10); // just before the first renewal
        frozen.freeze(); // the leader freezes: its renewals and releases never arrive
        crashedAt = performance.now();
        await untilAborted(signal);
        abortedAt = performance.now();
      },
      { signal: AbortSignal.timeout(5_000), onError: () => {} },
    );
    await sleep(10);
    let tookOver = 0;
    const loopB = b.lead(
      async (signal) => {
        tookOver = performance.now();
        await untilAborted(signal);
      },
      { signal: stopB.signal },
    );
    while (!tookOver) await sleep(5);
    expect(crashedSignal?.aborted).toBe(true);
    expect(abortedAt).toBeLessThan(tookOver);
    expect(tookOver - crashedAt).toBeLessThanOrEqual(ttl + retryDelay);
    stopB.abort();
    await loopB;
    void loopA; // the frozen instance never finishes its release; it is abandoned like a dead process
  });
});

describe("lead pauses after every term", () => {
  // A task that returned normally made the loop re-acquire at once: followers starved, and a task
  // that returned immediately spun on microtasks, so a timer-driven abort never ran (CHANGELOG.md,
  // Fixed: "Followers starved; a quick task spun the loop").
  it("followers get terms when the leader's task ends normally", async () => {
    const store = memory();
    const stop = new AbortController();
    const terms: Record<string, number> = { a: 0, b: 0 };
    const loop = (who: string) =>
      candidate(store, { name: "turns", ttl: 1_000, retryDelay: 50, owner: who }).lead(
        async () => {
          terms[who]!++;
          await sleep(20);
        },
        { signal: stop.signal },
      );
    const loops = [loop("a"), loop("b")];
    await sleep(1_500);
    stop.abort();
    await Promise.all(loops);
    expect(terms.a).toBeGreaterThan(2);
    expect(terms.b).toBeGreaterThan(2);
  });

  it("a task that returns at once does not starve a timer that stops the loop", async () => {
    const mutex = candidate(memory(), { name: "spin", retryDelay: 10 });
    const stop = new AbortController();
    setTimeout(() => stop.abort(), 100);
    let terms = 0;
    await mutex.lead(
      async () => {
        terms++;
      },
      { signal: stop.signal },
    );
    expect(terms).toBeGreaterThan(0);
    expect(terms).toBeLessThan(100);
  });
});

describe("lead: stopTimeout", () => {
  // Node and Bun fire a setTimeout above 2^31 - 1 ms after 1 ms: stopTimeout: Infinity released
  // after 1 ms (CHANGELOG.md, Fixed: "Long durations fired at once").
  it("lead({ stopTimeout: Infinity }) waits for the task before releasing", async () => {
    const mutex = candidate(memory(), { name: "grace", retryDelay: 20 });
    const stop = new AbortController();
    let heldWhileStopping: unknown;
    const loop = mutex.lead(
      async (signal) => {
        await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        await sleep(50);
        heldWhileStopping = await mutex.holder();
      },
      { signal: stop.signal, stopTimeout: Number.POSITIVE_INFINITY },
    );
    await sleep(30);
    stop.abort();
    await loop;
    expect(heldWhileStopping).not.toBeNull();
    expect(await mutex.holder()).toBeNull();
  });
});

describe("lead: errors", () => {
  it("an onError that throws stops the loop: the lease is released first, then lead rejects with that error", async () => {
    const store = memory();
    const mutex = candidate(store, { name: "oe", ttl: 300, retryDelay: 20 });
    const fatal = new Error("onError gave up");
    let lease: Lease | undefined;
    const loop = mutex.lead(
      async (_signal, l) => {
        lease = l;
        throw new Error("task failed");
      },
      {
        onError: () => {
          throw fatal;
        },
      },
    );
    await expect(loop).rejects.toBe(fatal);
    expect(lease!.signal.aborted).toBe(true);
    expect(mutex.isLeader).toBe(false);
    // released, not left to expire: another instance takes it at once
    const other = await candidate(store, { name: "oe", ttl: 300 }).tryAcquire();
    expect(other).not.toBeNull();
    await other!.release();
  });

  it("an unreachable backend while campaigning: each failure goes to onError, and health() says so", async () => {
    const store = memory();
    let down = true;
    const backend: Backend = {
      ...store,
      acquire: async (r) => {
        if (down) throw new BackendError("connection refused", { backend: "test", retryable: true });
        return store.acquire(r);
      },
    };
    const mutex = candidate(backend, { name: "ub", ttl: 300, retryDelay: 20 });
    const stop = new AbortController();
    const errors: unknown[] = [];
    const elected: number[] = [];
    const loop = mutex.lead(
      async (signal, lease) => {
        elected.push(lease.token);
        await untilAborted(signal);
      },
      { signal: stop.signal, onError: (e) => errors.push(e) },
    );
    await sleep(200);
    expect(errors.length).toBeGreaterThan(2);
    expect(errors.every((e) => e instanceof BackendError && e.retryable)).toBe(true);
    expect(mutex.health()).toMatchObject({ healthy: false, leading: false });
    expect(mutex.health().reason).toMatch(/campaigning, but the backend fails: .*connection refused/);
    down = false;
    await sleep(200);
    expect(elected).toEqual([1]);
    expect(mutex.health()).toMatchObject({ healthy: true, leading: true });
    stop.abort();
    await loop;
    expect(mutex.health()).toEqual({ healthy: true, leading: false });
  });
});

describe("watch", () => {
  it("yields this instance's elected and deposed changes and the leader seen on the backend", async () => {
    const store = memory();
    const mutex = candidate(store, { name: "w", ttl: 300, retryDelay: 20, owner: "me" });
    const other = candidate(store, { name: "w", ttl: 300, retryDelay: 20, owner: "other" });
    const end = new AbortController();
    const seen: LeadershipChange[] = [];
    const collecting = (async () => {
      for await (const change of mutex.watch({ signal: end.signal, interval: 10 })) seen.push(change);
    })();
    await sleep(30);
    const stop = new AbortController();
    const loop = mutex.lead(() => sleep(60_000, stop.signal), { signal: stop.signal });
    await sleep(60);
    stop.abort();
    await loop;
    const lease = (await other.tryAcquire())!;
    await sleep(60);
    await lease.release();
    await sleep(60);
    end.abort();
    await collecting;
    const types = seen.map((c) => (c.type === "leader" ? `leader:${c.leader?.owner ?? "none"}` : c.type));
    expect(types[0]).toBe("leader:none");
    expect(types).toContain("elected");
    expect(types).toContain("deposed");
    expect(types.indexOf("elected")).toBeLessThan(types.indexOf("deposed"));
    expect(types).toContain("leader:me");
    expect(types).toContain("leader:other");
    expect(types.at(-1)).toBe("leader:none");
    const deposed = seen.find((c) => c.type === "deposed");
    expect(deposed?.type === "deposed" && deposed.reason).toBeInstanceOf(LeaseLostError);
  });

  it("ends when the loop breaks", async () => {
    const mutex = candidate(memory(), { name: "w" });
    for await (const change of mutex.watch({ interval: 10 })) {
      expect(change).toEqual({ type: "leader", leader: null });
      break;
    }
  });

  // A single wake slot stranded the first of two pending next() calls forever (CHANGELOG.md,
  // Fixed: "A pending next() of watch could hang").
  it("settles every pending next() when it ends", async () => {
    const watcher = candidate(memory(), { name: "w" }).watch({ interval: 1_000 });
    const first = watcher.next();
    const second = watcher.next();
    await sleep(20);
    await watcher.return?.();
    const results = await Promise.race([Promise.all([first, second]), sleep(500).then(() => "stuck")]);
    expect(results).not.toBe("stuck");
  });
});

describe("health", () => {
  const fake = () =>
    vi.useFakeTimers({
      toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "performance", "Date"],
    });

  it("is healthy while leading in time and unhealthy when leading past the deadline", async () => {
    fake();
    const mutex = candidate(memory(), { name: "s", ttl: 1_000, renew: false });
    expect(mutex.health()).toEqual({ healthy: true, leading: false });
    const stop = new AbortController();
    const loop = mutex.lead((signal) => sleep(60_000, signal), { signal: stop.signal });
    await vi.advanceTimersByTimeAsync(1);
    expect(mutex.health()).toMatchObject({ healthy: true, leading: true });
    // The loop stalls: the clocks move past the deadline, no timer has run.
    const later = performance.now() + 2_000;
    vi.spyOn(performance, "now").mockReturnValue(later);
    vi.setSystemTime(Date.now() + 2_000);
    const health = mutex.health();
    expect(health.healthy).toBe(false);
    expect(health.reason).toMatch(/past the local deadline/);
    vi.restoreAllMocks();
    stop.abort();
    await vi.advanceTimersByTimeAsync(1_000);
    await loop;
  });
});
