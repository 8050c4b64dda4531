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
  // A store that polls (no watch): a listening waiter pauses retryDelay from the first (§19).
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

  it("listening for releases (a store with watch), pauses retryDelay from the first, after the attempt at once", async () => {
    vi.spyOn(Math, "random").mockReturnValue(0.999999);
    const times: number[] = [];
    const store = memory();
    const mutex = createMutex(
      {
        ...store,
        acquire: async () => {
          times.push(t0());
          return { ok: false };
        },
      },
      { name: "l", retryDelay: 300 },
    );
    await waitFor(mutex, 1_000);
    const gaps = gapsOf(times);
    expect(gaps[0]).toBeLessThanOrEqual(1); // listening, then at once
    for (const g of gaps.slice(1)) expect(Math.abs(g - 300)).toBeLessThanOrEqual(1);
    expect(gaps.length).toBeGreaterThanOrEqual(3);
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
