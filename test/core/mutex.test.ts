// The mutex: acquire (waiting, backoff, timeout, abort), run and holder, with fake timers where
// the rules are about time. The backend is memory() with single methods replaced where a test
// needs a fault the real store cannot make (a hang, a late reply, a failure): that is the only
// mocking here. Tests of Node's own timers and of requests that never answer use real timers.
import { beforeEach, describe, expect, it, vi } from "vitest";
import type { Backend } from "../../src/backend.ts";
import { memory } from "../../src/backends/memory/index.ts";
import { upstash } from "../../src/backends/upstash/index.ts";
import {
  BackendError,
  createMutex,
  isLockError,
  type Lease,
  LockTimeoutError,
  type Mutex,
} from "../../src/index.ts";
import { sleep } from "../../src/time.ts";
import { backendWith, fakeClockInEachTest, hanging, never, transient } from "../harness/doubles.ts";

fakeClockInEachTest();

const t0 = () => performance.now();
/** Lets `mutex.acquire` wait `ms` of fake time, then aborts it. */
async function waitFor(mutex: Mutex, ms: number): Promise<void> {
  const ctrl = new AbortController();
  const result = mutex.acquire({ signal: ctrl.signal }).catch(() => {});
  await vi.advanceTimersByTimeAsync(ms);
  ctrl.abort();
  await result;
}
/** The time between consecutive attempts. */
const gapsOf = (times: number[]) => times.slice(1).map((t, i) => t - times[i]!);

describe("acquire: waiting, timeout, abort", () => {
  // A store that tells no releases: the waiter polls (wake on release has its own tests below).
  const taken = (retryAfter?: number, times: number[] = []) =>
    backendWith({
      acquire: async () => {
        times.push(t0());
        return retryAfter === undefined ? { ok: false } : { ok: false, retryAfter };
      },
      watch: undefined,
    });

  it("rejects with LockTimeoutError at the timeout, without sleeping after giving up", async () => {
    const times: number[] = [];
    const mutex = createMutex(taken(undefined, times), { name: "w", retryDelay: 200 });
    const start = t0();
    const result = mutex.acquire({ timeout: 1_000 }).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(1_000);
    const error = await result;
    expect(error).toBeInstanceOf(LockTimeoutError);
    expect((error as LockTimeoutError).code).toBe("ERR_LOCK_TIMEOUT");
    expect(t0() - start).toBe(1_000);
    expect(Math.max(...times) - start).toBeLessThanOrEqual(1_000);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("rejects with the signal's reason when aborted while waiting, and leaves no timer", async () => {
    const mutex = createMutex(taken(), { name: "w" });
    const ctrl = new AbortController();
    const result = mutex.acquire({ signal: ctrl.signal }).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(300);
    const reason = new Error("shutting down");
    ctrl.abort(reason);
    expect(await result).toBe(reason);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("backs off exponentially from 25 ms, jittered into [0.6, 1]×, never above retryDelay", async () => {
    for (const [random, factor] of [
      [0, 0.6],
      [0.999999, 1],
    ] as const) {
      vi.spyOn(Math, "random").mockReturnValue(random);
      const times: number[] = [];
      const mutex = createMutex(taken(undefined, times), { name: "j", retryDelay: 300 });
      await waitFor(mutex, 3_000);
      const gaps = gapsOf(times);
      const expected = [25, 50, 100, 200, 300, 300].map((d) => d * factor);
      for (const [i, g] of gaps.slice(0, 6).entries())
        expect(Math.abs(g - expected[i]!)).toBeLessThanOrEqual(1);
      expect(Math.max(...gaps)).toBeLessThanOrEqual(300 + 1);
    }
  });

  it("sleeps no longer than the holder's remaining time when the backend reports it", async () => {
    const times: number[] = [];
    const mutex = createMutex(taken(40, times), { name: "w", retryDelay: 5_000 });
    await waitFor(mutex, 1_000);
    const gaps = gapsOf(times);
    expect(Math.max(...gaps.slice(0, 10))).toBeLessThanOrEqual(40);
    expect(times.length).toBeGreaterThan(15);
  });

  it("retries retryable backend errors and rejects at once on a non-retryable one", async () => {
    let calls = 0;
    const flaky = backendWith({
      acquire: async () => (++calls < 3 ? Promise.reject(transient()) : { ok: true, token: 7 }),
    });
    const pending = createMutex(flaky, { name: "f" }).acquire();
    await vi.advanceTimersByTimeAsync(200);
    const lease = await pending;
    expect(lease.token).toBe(7);
    await lease.release();

    const fatal = new BackendError("denied", { backend: "test", retryable: false, auth: true });
    const denied = backendWith({ acquire: async () => Promise.reject(fatal) });
    await expect(createMutex(denied, { name: "f" }).acquire({ timeout: 5_000 })).rejects.toBe(fatal);
  });

  it("bounds a hanging acquire: tryAcquire rejects after ttl − guard, acquire at its timeout; no lease", async () => {
    const released: string[] = [];
    const nonces: string[] = [];
    const backend = backendWith({
      acquire: (r) => {
        nonces.push(r.nonce);
        return never(r.signal);
      },
      release: async (r) => void released.push(r.nonce),
    });
    const mutex = createMutex(backend, { name: "h", ttl: 1_000, stopMargin: 100 });
    const start = t0();
    const one = mutex.tryAcquire().catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(888);
    const error = await one;
    expect(error).toBeInstanceOf(BackendError);
    expect((error as BackendError).retryable).toBe(true);
    expect(t0() - start).toBe(888);
    // the request may have been applied: its nonce is released, best effort
    expect(released).toEqual(nonces);

    // A timeout cuts the request in flight, and its cause says the backend never answered.
    const waited = mutex.acquire({ timeout: 500 }).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(500);
    const timeout = await waited;
    expect(timeout).toBeInstanceOf(LockTimeoutError);
    expect((timeout as LockTimeoutError).cause).toBeInstanceOf(BackendError);
    expect(String((timeout as LockTimeoutError).cause)).toMatch(/acquire got no answer within 500 ms/);

    // timeout 0 is one attempt with tryAcquire's bound (ttl − guard), then the timeout error.
    const once = mutex.acquire({ timeout: 0 }).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(888);
    const cut = (await once) as LockTimeoutError;
    expect(cut).toBeInstanceOf(LockTimeoutError);
    expect(String(cut.cause)).toMatch(/acquire got no answer within 888 ms/);
    await vi.advanceTimersByTimeAsync(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("timeout 0 takes a free lock: one attempt, not cut short by the timeout", async () => {
    const inner = memory();
    const backend: Backend = {
      ...inner,
      acquire: async (r) => {
        await new Promise((resolve) => setTimeout(resolve, 30)); // a 30 ms round trip
        return inner.acquire(r);
      },
    };
    const mutex = createMutex(backend, { name: "z" });
    const pending = mutex.acquire({ timeout: 0 });
    await vi.advanceTimersByTimeAsync(30);
    const lease = await pending;
    expect(lease.token).toBe(1);
    await lease.release();
    // taken: one attempt, then the timeout, with no cause (the backend answered)
    const holding = mutex.acquire();
    await vi.advanceTimersByTimeAsync(30);
    const holder = await holding;
    const again = mutex.acquire({ timeout: 0 }).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(30);
    const error = await again;
    expect(error).toBeInstanceOf(LockTimeoutError);
    expect((error as LockTimeoutError).cause).toBeUndefined();
    await holder.release();
  });

  it("reports each retryable failure to onError while waiting, and the last one is the timeout's cause", async () => {
    let calls = 0;
    const backend = backendWith({
      acquire: async () => {
        calls++;
        throw new BackendError(`down ${calls}`, { backend: "test", retryable: true });
      },
    });
    const seen: unknown[] = [];
    const mutex = createMutex(backend, { name: "f", retryDelay: 100 });
    const result = mutex.acquire({ timeout: 1_000, onError: (e) => seen.push(e) }).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(1_000);
    const error = (await result) as LockTimeoutError;
    expect(error).toBeInstanceOf(LockTimeoutError);
    expect(seen.length).toBe(calls);
    expect(seen.length).toBeGreaterThan(3);
    expect(error.cause).toBe(seen.at(-1));
    // an onError that throws ends the wait with its error
    const boom = new Error("stop waiting");
    const thrown = mutex
      .acquire({
        onError: () => {
          throw boom;
        },
      })
      .catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(10);
    expect(await thrown).toBe(boom);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("never yields a lease for a malformed or too-late acquire reply", async () => {
    const released: string[] = [];
    const bad = backendWith({
      acquire: async () => ({ ok: true, token: Number.NaN }),
      release: async (r) => void released.push(r.nonce),
    });
    await expect(createMutex(bad, { name: "m" }).tryAcquire()).rejects.toBeInstanceOf(BackendError);
    expect(released).toHaveLength(1);

    const late = backendWith({
      acquire: async () => {
        await new Promise((resolve) => setTimeout(resolve, 900)); // past ttl − guard (888)
        return { ok: true, token: 1 };
      },
      release: async (r) => void released.push(r.nonce),
    });
    const attempt = createMutex(late, { name: "m", ttl: 1_000, stopMargin: 100 }).tryAcquire();
    await vi.advanceTimersByTimeAsync(900);
    expect(await attempt).toBeNull();
    expect(released).toHaveLength(2);
  });
});

describe("acquire: wake on release (docs/DESIGN.md §19)", () => {
  /** memory() refusing every acquire, with `watch` replaced (the fault under test) and the attempts' times. */
  const refusing = (watch: Backend["watch"], times: number[] = []) =>
    backendWith({
      acquire: async () => {
        times.push(t0());
        return { ok: false };
      },
      watch,
    });

  it("listens after the first refusal, tries once more at once, and a wake ends the pause", async () => {
    const times: number[] = [];
    let wake = () => {};
    let listening: AbortSignal | undefined;
    const backend = refusing(async (_key, w, signal) => {
      wake = w;
      listening = signal;
    }, times);
    const ctrl = new AbortController();
    const result = createMutex(backend, { name: "w", retryDelay: 60_000 })
      .acquire({ signal: ctrl.signal })
      .catch(() => {});
    await vi.advanceTimersByTimeAsync(10_000);
    const before = times.length;
    expect(times[1]! - times[0]!).toBeLessThan(1); // the at-once retry once listening
    wake();
    await vi.advanceTimersByTimeAsync(0);
    expect(times).toHaveLength(before + 1);
    expect(listening?.aborted).toBe(false);
    ctrl.abort();
    await result;
    expect(listening?.aborted).toBe(true); // the watch ends with the wait
    expect(vi.getTimerCount()).toBe(0);
  });

  it("a wake during an attempt skips the next pause", async () => {
    const times: number[] = [];
    let wake = () => {};
    const backend = backendWith({
      acquire: async () => {
        times.push(t0());
        if (times.length === 4) wake(); // a release while this attempt is in flight
        return { ok: false };
      },
      watch: async (_key, w) => {
        wake = w;
      },
    });
    const ctrl = new AbortController();
    const result = createMutex(backend, { name: "w", retryDelay: 60_000 })
      .acquire({ signal: ctrl.signal })
      .catch(() => {});
    await vi.advanceTimersByTimeAsync(1_000);
    ctrl.abort();
    await result;
    expect(times[4]! - times[3]!).toBeLessThan(1);
  });

  it("polls, never held up, when the store cannot listen: a watch that rejects, or one that never starts", async () => {
    for (const watch of [
      async () => Promise.reject(transient()),
      (_key: string, _wake: () => void, signal: AbortSignal) => never<void>(signal),
    ]) {
      const times: number[] = [];
      const mutex = createMutex(refusing(watch, times), { name: "w", retryDelay: 300 });
      await waitFor(mutex, 5_000);
      // Polling goes on as without a watch: never held up by it.
      expect(times.length).toBeGreaterThan(10);
      expect(Math.max(...gapsOf(times))).toBeLessThanOrEqual(300 + 1);
      expect(vi.getTimerCount()).toBe(0);
    }
  });

  it("a watch that fails is started again after the next attempt, up to 3 more times in one wait; one that stops (wake(true)) likewise, and listens again", async () => {
    // Rejects every time: 1 watch and 3 more, each after an attempt, then polling alone.
    let calls = 0;
    const times: number[] = [];
    const failing = createMutex(
      refusing(async () => {
        calls++;
        return Promise.reject(transient());
      }, times),
      { name: "w", retryDelay: 300 },
    );
    await waitFor(failing, 5_000);
    expect(calls).toBe(4);
    expect(times.length).toBeGreaterThan(10);
    // Stops listening after it listened (its connection lost): listens again, and a wake then
    // ends the pause as before.
    let wake: (stopped?: true) => void = () => {};
    const signals: AbortSignal[] = [];
    const attempts: number[] = [];
    const backend = refusing(async (_key, w, signal) => {
      wake = w;
      signals.push(signal);
    }, attempts);
    const ctrl = new AbortController();
    const result = createMutex(backend, { name: "w", retryDelay: 60_000 })
      .acquire({ signal: ctrl.signal })
      .catch(() => {});
    await vi.advanceTimersByTimeAsync(10_000);
    expect(signals).toHaveLength(1);
    wake(true);
    expect(signals[0]!.aborted).toBe(true); // the stopped watch ends
    await vi.advanceTimersByTimeAsync(60_000); // the next attempt, after the pause
    expect(signals).toHaveLength(2);
    const before = attempts.length;
    wake();
    await vi.advanceTimersByTimeAsync(0);
    expect(attempts).toHaveLength(before + 1);
    ctrl.abort();
    await result;
    expect(signals[1]!.aborted).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("a release wakes the waiter that has waited longest, not every waiter; every waiting reader when that one reads", async () => {
    const store = memory();
    const attempts = new Map<string, number>();
    const backend = backendWith({
      ...store,
      acquire: (r) => {
        attempts.set(r.owner, (attempts.get(r.owner) ?? 0) + 1);
        return store.acquire(r);
      },
      acquireShared: (r) => {
        attempts.set(r.owner, (attempts.get(r.owner) ?? 0) + 1);
        return store.acquireShared!(r);
      },
    });
    const make = (owner: string) => createMutex(backend, { name: "h", owner, retryDelay: 60_000 });
    const holder = await make("holder").acquire();
    const writers = ["w1", "w2", "w3"].map((owner) => make(owner).acquire());
    await vi.advanceTimersByTimeAsync(5_000); // each is refused, listens, and pauses
    const before = new Map(attempts);
    await holder.release();
    await vi.advanceTimersByTimeAsync(0);
    const w1 = await writers[0]!;
    expect(w1.signal.aborted).toBe(false);
    expect(attempts.get("w1")).toBe(before.get("w1")! + 1);
    expect(attempts.get("w2")).toBe(before.get("w2")); // not woken: no attempt that could only lose
    expect(attempts.get("w3")).toBe(before.get("w3"));
    await w1.release(); // the next release wakes the next in arrival order
    await vi.advanceTimersByTimeAsync(0);
    const w2 = await writers[1]!;
    expect(attempts.get("w3")).toBe(before.get("w3"));
    await w2.release();
    await (await writers[2]!).release();
    // Readers: the longest-waiting one is a reader, so every waiting reader is woken.
    const writer = await make("writer").acquire();
    const readers = ["r1", "r2"].map((owner) => make(owner).acquire({ mode: "shared" }));
    await vi.advanceTimersByTimeAsync(5_000);
    const seen = new Map(attempts);
    await writer.release();
    await vi.advanceTimersByTimeAsync(0);
    expect(attempts.get("r1")).toBe(seen.get("r1")! + 1);
    expect(attempts.get("r2")).toBe(seen.get("r2")! + 1);
    for (const r of await Promise.all(readers)) await r.release();
  });

  it("is not asked by tryAcquire, by timeout 0, nor on a backend that keeps a line", async () => {
    let watches = 0;
    const watch = async () => void watches++;
    const mutex = createMutex(refusing(watch), { name: "w" });
    expect(await mutex.tryAcquire()).toBeNull();
    await expect(mutex.acquire({ timeout: 0 })).rejects.toBeInstanceOf(LockTimeoutError);
    const queued = backendWith({
      acquire: async () => ({ ok: false }),
      acquireQueued: async () => ({ ok: false, retryAfter: 0 }),
      watch,
    });
    await waitFor(createMutex(queued, { name: "q" }), 1_000);
    expect(watches).toBe(0);
  });
});

describe("durations beyond setTimeout's range", () => {
  beforeEach(() => {
    vi.useRealTimers(); // the defect was in the runtime's own setTimeout
  });

  // Node and Bun fire a setTimeout above 2^31 - 1 ms after 1 ms: acquire({ timeout: 3e9 })
  // rejected at once (CHANGELOG.md, Fixed: "Long durations fired at once").
  it("acquire({ timeout: 3e9 }) keeps waiting", async () => {
    const store = memory();
    const held = (await createMutex(store, { name: "long" }).tryAcquire())!;
    const ctrl = new AbortController();
    const waiting = createMutex(store, { name: "long", retryDelay: 20 })
      .acquire({ timeout: 3_000_000_000, signal: ctrl.signal })
      .catch((e: unknown) => e);
    await sleep(100);
    const reason = new Error("stop waiting");
    ctrl.abort(reason);
    const outcome = await waiting;
    expect(outcome).not.toBeInstanceOf(LockTimeoutError);
    expect(outcome).toBe(reason);
    await held.release();
  });
});

describe("run", () => {
  it("returns the function's value and releases", async () => {
    const mutex = createMutex(memory(), { name: "run" });
    let seen: Lease | undefined;
    const value = await mutex.run(async (signal, lease) => {
      seen = lease;
      expect(signal).toBe(lease.signal);
      return 42;
    });
    expect(value).toBe(42);
    expect(seen?.signal.aborted).toBe(true);
    expect(await mutex.holder()).toBeNull();
  });

  it("rejects with the function's error, not with a release error", async () => {
    const backend = backendWith({ release: async () => Promise.reject(transient()) });
    const boom = new Error("job failed");
    await expect(
      createMutex(backend, { name: "run" }).run(() => {
        throw boom;
      }),
    ).rejects.toBe(boom);
  });
});

describe("holder", () => {
  beforeEach(() => {
    vi.useRealTimers();
  });

  // holder() called the backend with the caller's signal only, so it (and watch(), which polls
  // through it) never settled against a black-holed backend (CHANGELOG.md, Fixed: "holder() could
  // hang forever"). It is bounded like a release: quietBound(ttl) in src/timing.ts.
  it("holder() against a backend that never answers rejects with a BackendError in bounded time", async () => {
    const mutex = createMutex(
      upstash({ url: "https://x.upstash.io", token: "tok-0123456789", fetch: hanging }),
      { name: "h", ttl: 500 },
    );
    const outcome = await Promise.race([
      mutex.holder().then(
        () => "resolved",
        (e: unknown) => (isLockError(e) ? "LockError" : String(e)),
      ),
      new Promise((r) => setTimeout(() => r("still pending after 1.5 s"), 1_500)),
    ]);
    expect(outcome).toBe("LockError");
  });
});
