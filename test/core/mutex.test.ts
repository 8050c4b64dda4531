// Unit tests of the time and safety rules (docs/DESIGN.md §4) with fake timers. The backend is
// memory() with single methods replaced where a test needs a fault the real store cannot make
// (a hang, a late reply, a failure): that is the only mocking here.
import { runInNewContext } from "node:vm";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Backend } from "../../src/backend.ts";
import { memory } from "../../src/backends/memory.ts";
import {
  BackendError,
  createMutex,
  isLockError,
  type Lease,
  LeaseLostError,
  LockTimeoutError,
} from "../../src/index.ts";

const never = <T>(signal?: AbortSignal, onAbort?: () => void): Promise<T> =>
  new Promise((_, reject) =>
    signal?.addEventListener("abort", () => {
      onAbort?.();
      reject(signal.reason);
    }),
  );

const transient = () => new BackendError("boom", { backend: "test", retryable: true });

/** memory() with some methods replaced. */
function backendWith(overrides: Partial<Backend> = {}): Backend {
  return { ...memory(), ...overrides };
}

beforeEach(() => {
  vi.useFakeTimers({
    toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "performance", "Date"],
  });
});
afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const t0 = () => performance.now();

describe("deadline: t_send + ttl − guard (guard = ceil(1 % ttl) + 2 ms + stopMargin)", () => {
  it("counts from just before the acquire request, not from its reply", async () => {
    // ttl 1000, stopMargin 100 → guard = 10 + 2 + 100 = 112 → deadline 888 ms after t_send.
    const inner = memory();
    const backend = backendWith({
      acquire: async (r) => {
        await new Promise((resolve) => setTimeout(resolve, 300)); // the reply takes 300 ms
        return inner.acquire(r);
      },
    });
    const mutex = createMutex(backend, { name: "d", ttl: 1_000, stopMargin: 100, renew: false });
    const start = t0();
    const pending = mutex.tryAcquire();
    await vi.advanceTimersByTimeAsync(300);
    const lease = (await pending)!;
    expect(lease).not.toBeNull();
    await vi.advanceTimersByTimeAsync(887 - (t0() - start));
    expect(lease.signal.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(lease.signal.aborted).toBe(true);
    expect(lease.signal.reason).toBeInstanceOf(LeaseLostError);
    expect(t0() - start).toBe(888);
  });

  it("uses the default stopMargin min(1000, ttl/5)", async () => {
    const mutex = createMutex(memory(), { name: "d", ttl: 15_000, renew: false });
    const lease = (await mutex.tryAcquire())!;
    // guard = 150 + 2 + 1000 → deadline at 13 848 ms
    await vi.advanceTimersByTimeAsync(13_847);
    expect(lease.signal.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(lease.signal.aborted).toBe(true);
  });

  it("follows the monotonic clock, not the wall clock", async () => {
    const mutex = createMutex(memory(), { name: "d", ttl: 1_000, renew: false });
    const lease = (await mutex.tryAcquire())!;
    vi.setSystemTime(Date.now() + 3_600_000); // the wall clock jumps an hour ahead
    await vi.advanceTimersByTimeAsync(10);
    expect(lease.signal.aborted).toBe(false);
    expect(lease.expiresAt - Date.now()).toBeGreaterThan(700);
  });

  it("is moved by a successful renewal to t_send(renew) + ttl − guard", async () => {
    const mutex = createMutex(memory(), { name: "d", ttl: 1_000, stopMargin: 100, renew: false });
    const lease = (await mutex.tryAcquire())!;
    await vi.advanceTimersByTimeAsync(500);
    await lease.renew();
    await vi.advanceTimersByTimeAsync(887);
    expect(lease.signal.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(lease.signal.aborted).toBe(true);
  });
});

describe("background renewal", () => {
  it("renews every ttl/3 within ±10 %", async () => {
    const inner = memory();
    const times: number[] = [];
    const backend = backendWith({
      ...inner,
      renew: (r) => {
        times.push(t0());
        return inner.renew(r);
      },
    });
    for (const [random, expected] of [
      [0, 270],
      [0.5, 300],
      [0.999999, 330],
    ] as const) {
      vi.spyOn(Math, "random").mockReturnValue(random);
      times.length = 0;
      const start = t0();
      const lease = (await createMutex(backend, { name: `r${random}`, ttl: 900 }).tryAcquire())!;
      await vi.advanceTimersByTimeAsync(1_000);
      const seen = times.map((t) => t - start);
      expect(seen).toHaveLength(3);
      // timers run at whole milliseconds: allow 1 ms of rounding per period
      for (const [i, t] of seen.entries())
        expect(Math.abs(t - expected * (i + 1))).toBeLessThanOrEqual(i + 1);
      await lease.release();
    }
  });

  it("retries quickly after a failed renewal, and the lease is lost at the deadline", async () => {
    const times: number[] = [];
    const backend = backendWith({
      renew: async () => {
        times.push(t0());
        throw transient();
      },
    });
    const start = t0();
    const lease = (await createMutex(backend, { name: "r", ttl: 3_000, stopMargin: 100 }).tryAcquire())!;
    const deadline = 3_000 - (30 + 2 + 100);
    await vi.advanceTimersByTimeAsync(deadline - 1);
    expect(lease.signal.aborted).toBe(false);
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    expect(times.length).toBeGreaterThan(5); // many attempts between ttl/3 and the deadline
    expect(Math.max(...gaps)).toBeLessThanOrEqual(3_000 / 10 + 30);
    await vi.advanceTimersByTimeAsync(1);
    expect(lease.signal.aborted).toBe(true);
    expect(t0() - start).toBe(deadline);
    expect((lease.signal.reason as LeaseLostError).cause).toBeInstanceOf(BackendError);
  });

  it("recovers when a retry succeeds before the deadline", async () => {
    const inner = memory();
    let fail = 2;
    const backend = backendWith({
      ...inner,
      renew: async (r) => (fail-- > 0 ? Promise.reject(transient()) : inner.renew(r)),
    });
    const lease = (await createMutex(backend, { name: "r", ttl: 1_000 }).tryAcquire())!;
    await vi.advanceTimersByTimeAsync(5_000);
    expect(lease.signal.aborted).toBe(false);
    await lease.release();
  });

  it("gives a hanging renewal its own timeout of min(ttl/5, time left)", async () => {
    const aborts: number[] = [];
    const backend = backendWith({ renew: (r) => never(r.signal, () => aborts.push(t0())) });
    vi.spyOn(Math, "random").mockReturnValue(0.5);
    const start = t0();
    const lease = (await createMutex(backend, { name: "h", ttl: 1_500 }).tryAcquire())!;
    await vi.advanceTimersByTimeAsync(800);
    // first renewal at 500, aborted at 500 + 300
    expect(aborts.map((t) => t - start)).toEqual([800]);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(lease.signal.aborted).toBe(true);
    // every attempt was aborted no later than the deadline
    const deadline = 1_500 - (15 + 2 + 300);
    expect(Math.max(...aborts) - start).toBeLessThanOrEqual(deadline);
  });

  it("does not resurrect the lease with a reply that arrives after the deadline", async () => {
    let answer: (ok: boolean) => void = () => {};
    // This backend ignores its signal, so its reply can land after the deadline.
    const backend = backendWith({ renew: () => new Promise<boolean>((resolve) => (answer = resolve)) });
    const lease = (await createMutex(backend, { name: "late", ttl: 1_000, renew: false }).tryAcquire())!;
    const renewal = lease.renew();
    await vi.advanceTimersByTimeAsync(1_000); // past the deadline (888 ms)
    expect(lease.signal.aborted).toBe(true);
    const before = lease.expiresAt;
    answer(true);
    await expect(renewal).rejects.toBeInstanceOf(LeaseLostError);
    expect(lease.signal.aborted).toBe(true);
    expect(lease.expiresAt).toBeLessThanOrEqual(before);
    await expect(lease.renew()).rejects.toBeInstanceOf(LeaseLostError);
  });

  it("does not resurrect when the reply is handled before the overdue deadline timer (a stalled loop)", async () => {
    let answer: (ok: boolean) => void = () => {};
    const backend = backendWith({ renew: () => new Promise<boolean>((resolve) => (answer = resolve)) });
    const lease = (await createMutex(backend, { name: "stall", ttl: 1_000, renew: false }).tryAcquire())!;
    const renewal = lease.renew();
    await vi.advanceTimersByTimeAsync(100);
    // The loop stalls past the deadline (888 ms): the clock jumps, no timer has run yet.
    const stalled = performance.now() + 900;
    vi.spyOn(performance, "now").mockReturnValue(stalled);
    answer(true);
    await expect(renewal).rejects.toBeInstanceOf(LeaseLostError);
    expect(lease.signal.aborted).toBe(true);
    expect((lease.signal.reason as Error).message).toMatch(/answered after its deadline/);
  });

  it("loses the lease when the backend says it is someone else's", async () => {
    const backend = backendWith({ renew: async () => false });
    const lease = (await createMutex(backend, { name: "gone", ttl: 900 }).tryAcquire())!;
    await vi.advanceTimersByTimeAsync(330);
    expect(lease.signal.aborted).toBe(true);
    expect(isLockError(lease.signal.reason) && lease.signal.reason.code).toBe("ERR_LEASE_LOST");
    await expect(lease.renew()).rejects.toBe(lease.signal.reason);
    await lease.release(); // never throws for a lost lease
  });
});

describe("lease.valid", () => {
  it("is false as soon as the deadline has passed, before any timer ran, and aborts the signal then", async () => {
    vi.useRealTimers();
    const mutex = createMutex(memory(), { name: "v", ttl: 100, stopMargin: 10 });
    const lease = (await mutex.tryAcquire())!;
    expect(lease.valid).toBe(true);
    // A stalled process: no timer can run while this loop spins past the deadline (100 − 13 ms).
    const end = performance.now() + 150;
    while (performance.now() < end) {}
    expect(lease.signal.aborted).toBe(false); // the timers have not run yet
    expect(lease.valid).toBe(false);
    expect(lease.signal.aborted).toBe(true);
    expect(lease.signal.reason).toBeInstanceOf(LeaseLostError);
    await lease.release();
    expect(lease.valid).toBe(false);
  });
});

describe("release", () => {
  it("clears every timer and aborts the signal; idempotent", async () => {
    const lease = (await createMutex(memory(), { name: "t", ttl: 900 }).tryAcquire())!;
    expect(vi.getTimerCount()).toBe(2); // deadline + renewal
    await lease.release();
    expect(vi.getTimerCount()).toBe(0);
    expect(lease.signal.aborted).toBe(true);
    await lease.release();
    await lease[Symbol.asyncDispose]();
  });

  it("a lost lease with a failing backend release still resolves", async () => {
    const backend = backendWith({
      renew: async () => false,
      release: async () => Promise.reject(transient()),
    });
    const lease = (await createMutex(backend, { name: "t", ttl: 900 }).tryAcquire())!;
    await vi.advanceTimersByTimeAsync(400);
    expect(lease.signal.aborted).toBe(true);
    await expect(lease.release()).resolves.toBeUndefined();
  });

  it("rejects with the backend error for a held lease whose release failed", async () => {
    const backend = backendWith({ release: async () => Promise.reject(transient()) });
    const lease = (await createMutex(backend, { name: "t", ttl: 900 }).tryAcquire())!;
    await expect(lease.release()).rejects.toBeInstanceOf(BackendError);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe("acquire: waiting, timeout, abort", () => {
  const taken = (retryAfter?: number, times: number[] = []) =>
    backendWith({
      acquire: async () => {
        times.push(t0());
        return retryAfter === undefined ? { ok: false } : { ok: false, retryAfter };
      },
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
      const ctrl = new AbortController();
      const result = mutex.acquire({ signal: ctrl.signal }).catch(() => {});
      await vi.advanceTimersByTimeAsync(3_000);
      ctrl.abort();
      await result;
      const gaps = times.slice(1).map((t, i) => t - times[i]!);
      const expected = [25, 50, 100, 200, 300, 300].map((d) => d * factor);
      for (const [i, g] of gaps.slice(0, 6).entries())
        expect(Math.abs(g - expected[i]!)).toBeLessThanOrEqual(1);
      expect(Math.max(...gaps)).toBeLessThanOrEqual(300 + 1);
    }
  });

  it("sleeps no longer than the holder's remaining time when the backend reports it", async () => {
    const times: number[] = [];
    const mutex = createMutex(taken(40, times), { name: "w", retryDelay: 5_000 });
    const ctrl = new AbortController();
    const result = mutex.acquire({ signal: ctrl.signal }).catch(() => {});
    await vi.advanceTimersByTimeAsync(1_000);
    ctrl.abort();
    await result;
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
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

describe("options are checked at createMutex", () => {
  const ok = memory();
  it.each([
    [{ name: "" }, RangeError, /name must be 1-255/],
    [{ name: "x".repeat(256) }, RangeError, /name must be 1-255/],
    [{ name: "a b" }, RangeError, /name "a b" is invalid/],
    [{ name: "a//b" }, RangeError, /invalid/],
    [{ name: "ends." }, RangeError, /invalid/],
    [{ name: "/starts" }, RangeError, /invalid/],
    [{ name: "a/../b" }, RangeError, /invalid/],
    [{ name: "a/./b" }, RangeError, /invalid/],
    [{ name: 3 }, TypeError, /name must be a string/],
    [{ name: "n", ttl: 0 }, RangeError, /ttl must be an integer number of ms from 10/],
    [{ name: "n", ttl: Number.NaN }, RangeError, /ttl/],
    [{ name: "n", ttl: Number.POSITIVE_INFINITY }, RangeError, /ttl/],
    [{ name: "n", ttl: 1500.5 }, RangeError, /ttl/],
    [{ name: "n", ttl: 1_000, stopMargin: 500 }, RangeError, /stopMargin must be .* < ttl \/ 2 \(500\)/],
    [{ name: "n", stopMargin: -1 }, RangeError, /stopMargin/],
    [{ name: "n", retryDelay: -1 }, RangeError, /retryDelay must be a number of ms from 0/],
    [{ name: "n", renew: "yes" }, TypeError, /renew must be a boolean/],
    [{ name: "n", owner: "" }, TypeError, /owner must be a well-formed string of 1-256/],
    [{ name: "n", owner: "a\uD800b" }, TypeError, /owner must be a well-formed string/],
  ])("%o", (options, ErrorType, message) => {
    expect(() => createMutex(ok, options as never)).toThrow(ErrorType);
    expect(() => createMutex(ok, options as never)).toThrow(message);
  });

  it("accepts names with the allowed punctuation", () => {
    for (const name of ["a", "jobs/nightly-report", "tenant:42@eu+1", "v1.2_x"]) {
      expect(createMutex(ok, { name }).name).toBe(name);
    }
  });

  it("rejects a backend missing a method, naming it", () => {
    const { release: _, ...partial } = memory();
    expect(() => createMutex(partial as never, { name: "n" })).toThrow(/missing method\(s\): release/);
    expect(() => createMutex(null as never, { name: "n" })).toThrow(TypeError);
  });

  it("rejects a ttl outside the backend's range, saying the range", () => {
    const ranged = { ...memory(), name: "ranged", ttlRange: [15_000, 60_000] as const };
    expect(() => createMutex(ranged, { name: "n", ttl: 10_000 })).toThrow(
      /ttl must be from 15000 to 60000 ms for the ranged backend/,
    );
    expect(createMutex(ranged, { name: "n", ttl: 60_000 }).name).toBe("n");
  });

  it("rejects a bad acquire timeout", async () => {
    await expect(createMutex(ok, { name: "n" }).acquire({ timeout: -1 })).rejects.toThrow(RangeError);
  });

  it("rejects bad options of acquire, tryAcquire, holder, lead and watch with a TypeError naming the option", async () => {
    const mutex = createMutex(ok, { name: "n" });
    const task = async () => {};
    const bad = null as never;
    const cases: [Promise<unknown> | (() => unknown), RegExp][] = [
      [mutex.acquire(bad), /acquire: options must be an object, got null/],
      [mutex.acquire({ signal: "x" as never }), /acquire: signal must be an AbortSignal, got string/],
      [mutex.acquire({ onError: 1 as never }), /acquire: onError must be a function/],
      [mutex.acquire({ timeout: "5" as never }), /acquire: timeout must be a number of ms >= 0, got string/],
      [mutex.tryAcquire(bad), /tryAcquire: options must be an object/],
      [mutex.tryAcquire({ signal: {} as never }), /tryAcquire: signal must be an AbortSignal/],
      [mutex.holder({ signal: 3 as never }), /holder: signal must be an AbortSignal/],
      [mutex.lead(task, bad), /lead: options must be an object/],
      [mutex.lead(task, { signal: "x" as never }), /lead: signal must be an AbortSignal, got string/],
      [mutex.lead(task, { onError: "log" as never }), /lead: onError must be a function/],
      [mutex.lead(task, { stopTimeout: Number.NaN }), /lead: stopTimeout must be a number of ms >= 0/],
      [() => mutex.watch(bad), /watch: options must be an object/],
      [() => mutex.watch({ signal: true as never }), /watch: signal must be an AbortSignal/],
      [() => mutex.watch({ interval: Number.POSITIVE_INFINITY }), /watch: interval must be a finite number/],
    ];
    for (const [call, message] of cases) {
      const error = await (typeof call === "function" ? Promise.resolve().then(call) : call).catch(
        (e: unknown) => e,
      );
      expect(error, String(message)).toBeInstanceOf(Error);
      expect((error as Error).name).toMatch(/^(TypeError|RangeError)$/);
      expect((error as Error).message).toMatch(message);
    }
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe("errors", () => {
  it("carry stable codes and names", () => {
    const e = new BackendError("nope", { backend: "upstash", status: 401, retryable: false, auth: true });
    expect([e.code, e.name, e.status, e.backend, e.message]).toEqual([
      "ERR_BACKEND_AUTH",
      "BackendError",
      401,
      "upstash",
      "[leasehold] [upstash] nope",
    ]);
    expect(new LockTimeoutError("t").code).toBe("ERR_LOCK_TIMEOUT");
    expect(new LeaseLostError("l").code).toBe("ERR_LEASE_LOST");
  });

  it("isLockError works across realms and rejects look-alikes", () => {
    const foreign = runInNewContext(
      "(() => { const e = new Error('x'); Object.defineProperty(e, 'name', { value: 'LeaseLostError' }); e.code = 'ERR_LEASE_LOST'; return e; })()",
    );
    expect(foreign instanceof Error).toBe(false);
    expect(isLockError(foreign)).toBe(true);
    expect(isLockError(new Error("x"))).toBe(false);
    expect(isLockError({ name: "TypeError", code: "ERR_X" })).toBe(false);
    expect(isLockError(null)).toBe(false);
  });
});
