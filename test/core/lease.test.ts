// The lease's time and safety rules (docs/DESIGN.md §4) with fake timers: the local deadline,
// background renewal, stall detection, lease.valid and release. The backend is memory() with
// single methods replaced where a test needs a fault the real store cannot make (a hang, a late
// reply, a failure): that is the only mocking here.
import { describe, expect, it, vi } from "vitest";
import { memory } from "../../src/backends/memory/index.ts";
import { BackendError, createMutex, isLockError, LeaseLostError } from "../../src/index.ts";
import { backendWith, fakeClockInEachTest, never, transient } from "../harness/doubles.ts";

fakeClockInEachTest();

const t0 = () => performance.now();

/** A memory store whose grants are answered `ms` after they were made; it records each renewal's time. */
function lateGrants(ms: number) {
  const inner = memory();
  const renewals: number[] = [];
  const backend = backendWith({
    ...inner,
    acquire: async (r) => {
      const granted = await inner.acquire(r);
      await new Promise((resolve) => setTimeout(resolve, ms));
      return granted;
    },
    renew: (r) => {
      renewals.push(t0());
      return inner.renew(r);
    },
  });
  return { backend, renewals };
}

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

  it("schedules renewals from the deadline the lease has: a grant answered late (largest stopMargin) renews in time", async () => {
    // ttl 1 000 with the largest stopMargin allowed (< ttl/2): guard = 10 + 2 + 499 = 511, so
    // the deadline is 489 ms after t_send. The grant is answered 250 ms after t_send (a hand-over
    // a quarter of a ttl into a held request): a renewal due ttl/3 after the *reply* (583 ± 33 ms
    // after t_send) would come after the deadline; due ttl/3 after t_send it comes in time.
    for (const random of [0, 0.5, 0.999999]) {
      const { backend, renewals } = lateGrants(250);
      vi.spyOn(Math, "random").mockReturnValue(random);
      const mutex = createMutex(backend, { name: `late${random}`, ttl: 1_000, stopMargin: 499 });
      const start = t0();
      const pending = mutex.tryAcquire();
      await vi.advanceTimersByTimeAsync(250);
      const lease = (await pending)!;
      await vi.advanceTimersByTimeAsync(3_000);
      expect(lease.signal.aborted).toBe(false);
      // The first renewal at t_send + ttl/3 (±10 %), before the deadline at 489 ms.
      expect(renewals[0]! - start).toBeLessThanOrEqual(Math.ceil(1_000 / 3 + 34));
      expect(renewals.length).toBeGreaterThanOrEqual(8);
      await lease.release();
    }
  });

  it("renews at once a grant answered after its renewal was due", async () => {
    // ttl 1 000, stopMargin 499: deadline 489 ms after t_send; the grant is answered 400 ms after.
    const { backend, renewals } = lateGrants(400);
    const mutex = createMutex(backend, { name: "later", ttl: 1_000, stopMargin: 499 });
    const start = t0();
    const pending = mutex.tryAcquire();
    await vi.advanceTimersByTimeAsync(400);
    const lease = (await pending)!;
    await vi.advanceTimersByTimeAsync(1);
    // Renewed at once (a zero-delay timer runs within 1 ms; not taken for a stalled loop), well
    // before the deadline at 489 ms.
    expect(renewals).toHaveLength(1);
    expect(renewals[0]! - start).toBeLessThanOrEqual(401);
    await vi.advanceTimersByTimeAsync(3_000);
    expect(lease.signal.aborted).toBe(false);
    await lease.release();
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

describe("stall detection", () => {
  it("a renewal timer that fires later than stopMargin aborts the lease first and frees the lock", async () => {
    const store = memory();
    const renew = vi.fn(store.renew);
    const mutex = createMutex({ ...store, renew }, { name: "s", ttl: 3_000, stopMargin: 200 });
    vi.spyOn(Math, "random").mockReturnValue(0.5);
    const lease = (await mutex.tryAcquire())!;
    // The renewal is due at 1 000 ms; the loop is blocked for 1 300 ms, then timers run.
    const stalled = performance.now() + 1_300;
    vi.spyOn(performance, "now").mockReturnValue(stalled);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(lease.signal.aborted).toBe(true);
    expect((lease.signal.reason as Error).message).toMatch(/event loop stalled/);
    expect(renew).not.toHaveBeenCalled();
    vi.restoreAllMocks();
    await vi.advanceTimersByTimeAsync(1);
    expect(await mutex.holder()).toBeNull();
  });

  // With stopMargin 0, a renewal timer 1 ms late counted as a stall and cost the lease (CHANGELOG.md, Fixed).
  it("ordinary timer lateness within the guard's allowance is not a stall, even with stopMargin 0", async () => {
    vi.spyOn(Math, "random").mockReturnValue(0.5);
    const mutex = createMutex(memory(), { name: "s", ttl: 3_000, stopMargin: 0 });
    const lease = (await mutex.tryAcquire())!;
    // The renewal is due at 1 000 ms; it runs 5 ms late, within ceil(1 % × 3000) + 2 = 32 ms.
    const late = performance.now() + 1_000 + 5;
    vi.spyOn(performance, "now").mockReturnValue(late);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(lease.signal.aborted).toBe(false);
    vi.restoreAllMocks();
    await lease.release();
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
    expect(vi.getTimerCount()).toBe(1); // one timer: the next renewal or the deadline
    await lease.release();
    expect(vi.getTimerCount()).toBe(0);
    expect(lease.signal.aborted).toBe(true);
    await lease.release();
    await lease[Symbol.asyncDispose]();
  });

  it("renew, release and asyncDispose work unbound (as listeners, destructured)", async () => {
    const backend = memory();
    const mutex = createMutex(backend, { name: "u", ttl: 900 });
    const lease = (await mutex.tryAcquire())!;
    const { renew, release, signal, valid, expiresAt } = lease;
    expect([signal.aborted, valid, expiresAt > Date.now()]).toEqual([false, true, true]);
    await renew();
    await release();
    expect(signal.aborted).toBe(true);
    expect(await mutex.holder()).toBeNull();
    const next = (await mutex.tryAcquire())!;
    await next[Symbol.asyncDispose].call(undefined);
    expect(await mutex.holder()).toBeNull();
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

  it("a signal read before the end aborts then; one first read after the end is already aborted, same reason", async () => {
    const backend = backendWith({ renew: async () => false });
    const mutex = createMutex(backend, { name: "late", ttl: 900 });
    // Released: the signal read early aborts on release with the reason renew() then rejects with.
    const early = (await mutex.tryAcquire())!;
    const watched = early.signal;
    expect(watched.aborted).toBe(false);
    await early.release();
    expect(watched.aborted).toBe(true);
    expect(watched.reason).toBeInstanceOf(LeaseLostError);
    await expect(early.renew()).rejects.toBe(watched.reason);
    // Released, the signal never read before: aborted at first read, with the release's reason.
    const quiet = (await mutex.tryAcquire())!;
    await quiet.release();
    await expect(quiet.renew()).rejects.toBeInstanceOf(LeaseLostError);
    expect(quiet.signal.aborted).toBe(true);
    expect(String(quiet.signal.reason?.message)).toMatch(/was released/);
    await expect(quiet.renew()).rejects.toBe(quiet.signal.reason);
    // Lost (the backend says it is someone else's), the signal never read before: same.
    const lost = (await mutex.tryAcquire())!;
    await vi.advanceTimersByTimeAsync(330);
    expect(lost.valid).toBe(false);
    expect(lost.signal.aborted).toBe(true);
    expect(String(lost.signal.reason?.message)).toMatch(
      /the backend no longer has it \(it expired there or was deleted, or another owner took it\)/,
    );
    await lost.release();
  });

  it("release aborts a renewal in flight with the lease's reason", async () => {
    const backend = backendWith({ renew: (r) => never(r.signal) });
    const lease = (await createMutex(backend, { name: "t", ttl: 900, renew: false }).tryAcquire())!;
    const renewing = lease.renew();
    await lease.release();
    await expect(renewing).rejects.toBe(lease.signal.reason);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("arms no timer when released from a renewal's own continuation while the background tick shares it", async () => {
    // A manual renew() in flight; the background renewal falls due and joins it; its caller
    // releases as soon as it resolves, before the background renewal's callback runs.
    let answer: (ours: boolean) => void = () => {};
    const backend = backendWith({ renew: () => new Promise<boolean>((resolve) => (answer = resolve)) });
    const lease = (await createMutex(backend, { name: "t", ttl: 300 }).tryAcquire())!;
    await vi.advanceTimersByTimeAsync(80);
    const released = lease.renew().then(() => lease.release());
    await vi.advanceTimersByTimeAsync(35); // past the renewal due at 100 ms ± 10 %
    answer(true);
    await released;
    await vi.advanceTimersByTimeAsync(0);
    expect(lease.signal.aborted).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("release clears the bound of a renewal in flight even when the backend ignores its signal", async () => {
    const backend = backendWith({ renew: () => new Promise<boolean>(() => {}) }); // never settles
    const lease = (await createMutex(backend, { name: "t", ttl: 900, renew: false }).tryAcquire())!;
    const renewing = lease.renew();
    renewing.catch(() => {});
    await lease.release();
    expect(vi.getTimerCount()).toBe(0);
  });

  it("rejects with the backend error for a held lease whose release failed", async () => {
    const backend = backendWith({ release: async () => Promise.reject(transient()) });
    const lease = (await createMutex(backend, { name: "t", ttl: 900 }).tryAcquire())!;
    await expect(lease.release()).rejects.toBeInstanceOf(BackendError);
    expect(vi.getTimerCount()).toBe(0);
  });
});
