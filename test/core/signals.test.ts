// The per-request bound (src/signals.ts requestSignal): one timer for every request in flight,
// each request aborted at its own bound and not before, nothing left armed after the last one,
// the AbortSignal made only when read, and a backend the core races (RACED) handed no signal;
// and the other src/signals.ts helpers, where a test of the faces above them would not pin them down.
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Backend } from "../../src/backend.ts";
import { BackendError, createMutex } from "../../src/index.ts";
import { abortable, RACED, requestSignal } from "../../src/signals.ts";
import { backendWith, useFakeClock } from "../harness/doubles.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.unstubAllGlobals();
  vi.restoreAllMocks();
});

const t = () => performance.now();

describe("requestSignal: the bound of one request", () => {
  it("aborts each of many requests in flight at its own bound, not before, with one timer for all", async () => {
    useFakeClock();
    const bounds = [50, 10, 30, 30, 5, 100, 70, 1, 45, 20];
    const aborted: { at: number; due: number; reason: unknown }[] = [];
    const start = t();
    const all = [];
    // Started 3 ms apart, in no order of their bounds.
    for (const [k, ms] of bounds.entries()) {
      const b = requestSignal("test", `op${k}`, ms);
      const due = t() + ms;
      b.signal.addEventListener("abort", () => aborted.push({ at: t(), due, reason: b.signal.reason }));
      all.push(b);
      expect(vi.getTimerCount()).toBe(1); // one timer serves every request in flight
      await vi.advanceTimersByTimeAsync(3);
    }
    while (t() - start < 200) await vi.advanceTimersByTimeAsync(1);
    expect(aborted).toHaveLength(bounds.length);
    for (const { at, due, reason } of aborted) {
      expect(at).toBeGreaterThanOrEqual(due); // never before its bound
      expect(at - due).toBeLessThanOrEqual(1); // and at it (the fake clock has no lateness)
      expect(reason).toBeInstanceOf(BackendError);
      expect((reason as BackendError).retryable).toBe(true);
      expect((reason as Error).message).toMatch(/^\[leasehold\] \[test\] op\d got no answer within \d+ ms$/);
    }
    expect(vi.getTimerCount()).toBe(0);
    for (const b of all) b.done(); // after the abort: harmless
    expect(vi.getTimerCount()).toBe(0);
  });

  it("leaves a settled request unaborted, and nothing armed after the last one settles", async () => {
    useFakeClock();
    const a = requestSignal("test", "a", 100);
    const b = requestSignal("test", "b", 20);
    const c = requestSignal("test", "c", 60);
    const signals = [a.signal, b.signal, c.signal];
    await vi.advanceTimersByTimeAsync(10);
    b.done(); // the earliest settles: the timer stays armed for it, and re-arms when it fires
    await vi.advanceTimersByTimeAsync(30);
    expect(signals.map((s) => s.aborted)).toEqual([false, false, false]);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(25); // past c's bound (60)
    expect(signals.map((s) => s.aborted)).toEqual([false, false, true]);
    a.done();
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(signals.map((s) => s.aborted)).toEqual([false, false, true]);
  });

  it("holds no timer for an unbounded request, and none alive in the process after the last one (real timers)", async () => {
    const timeouts = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
    const before = timeouts();
    const unbounded = requestSignal("test", "x", Number.POSITIVE_INFINITY);
    expect(timeouts()).toBe(before);
    const many = Array.from({ length: 100 }, (_, k) => requestSignal("test", "y", 1_000 + k));
    expect(timeouts()).toBe(before + 1);
    for (const b of many.reverse()) b.done();
    unbounded.done();
    expect(timeouts()).toBe(before);
  });

  it("serves 200 000 requests in flight with one timer, firing early for none of them", async () => {
    useFakeClock();
    const many = Array.from({ length: 200_000 }, (_, k) => requestSignal("test", "z", 1_000 + (k % 7)));
    const first = requestSignal("test", "first", 5);
    first.done(); // the timer, armed for 5 ms, fires with no request due and re-arms for the earliest
    await vi.advanceTimersByTimeAsync(999);
    expect(vi.getTimerCount()).toBe(1);
    const sample = many.filter((_, k) => k % 1_000 === 0);
    expect(sample.some((b) => b.signal.aborted)).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(sample.map((b) => b.signal.aborted)).toContain(true);
    for (const b of many) b.done();
    expect(vi.getTimerCount()).toBe(0);
  });

  it("rejects a hung request raced by the core with its retryable no-answer error at its bound (real timers)", async () => {
    // Timed from before the bound is made: it counts from then (a pause between the two, 3 ms in a
    // loaded run, made the wait look short when timed from after).
    const start = t();
    const b = requestSignal("test", "renew", 30);
    b.signalFor({ [RACED]: true });
    const error = await b.race(new Promise(() => {})).catch((e: unknown) => e);
    b.done();
    expect(t() - start).toBeGreaterThanOrEqual(29); // timers may fire up to 1 ms early
    expect(error).toBeInstanceOf(BackendError);
    expect((error as BackendError).retryable).toBe(true);
    expect((error as Error).message).toMatch(/renew got no answer within 30 ms/);
  });

  it("aborts at once with the caller's signal, its reason, whether the signal is read before or after", async () => {
    useFakeClock();
    const caller = new AbortController();
    const read = requestSignal("test", "a", 1_000, caller.signal);
    const early = read.signal;
    const raced = requestSignal("test", "b", 1_000, caller.signal);
    expect(raced.signalFor({ [RACED]: true })).toBeUndefined();
    const racing = raced.race(new Promise(() => {})).catch((e: unknown) => e);
    const reason = new Error("shutting down");
    caller.abort(reason);
    expect(early.aborted).toBe(true);
    expect(early.reason).toBe(reason);
    expect(await racing).toBe(reason);
    expect(raced.signal.reason).toBe(reason); // made after the abort: already aborted, same reason
    expect(vi.getTimerCount()).toBe(0);
    // An already aborted caller's signal: aborted from the start.
    const late = requestSignal("test", "c", 1_000, caller.signal);
    expect(late.signal.reason).toBe(reason);
    for (const b of [read, raced, late]) b.done();
  });

  it("makes no AbortSignal until one is read", () => {
    let made = 0;
    const Real = globalThis.AbortController;
    vi.stubGlobal(
      "AbortController",
      class extends Real {
        constructor() {
          super();
          made++;
        }
      },
    );
    const b = requestSignal("test", "a", 1_000);
    b.signalFor({ [RACED]: true });
    expect(made).toBe(0);
    b.done();
    const c = requestSignal("test", "b", 1_000);
    expect(c.signalFor({})).toBeInstanceOf(AbortSignal);
    expect(made).toBe(1);
    c.done();
  });

  it("on Workers, gives each request a timer of its own (a timer lives in its invocation)", async () => {
    useFakeClock();
    vi.stubGlobal("navigator", { userAgent: "Cloudflare-Workers" });
    vi.resetModules();
    const { requestSignal: own } = await import("../../src/signals.ts");
    const a = own("test", "a", 100);
    const b = own("test", "b", 50);
    expect(vi.getTimerCount()).toBe(2);
    await vi.advanceTimersByTimeAsync(50);
    expect([a.signal.aborted, b.signal.aborted]).toEqual([false, true]);
    a.done();
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe("a backend the core races (RACED)", () => {
  const raced = (overrides: Partial<Backend>): Backend =>
    Object.assign(backendWith(overrides), { [RACED]: true }) as Backend;

  it("is handed no signal; one that is not gets one", async () => {
    const seen: unknown[] = [];
    for (const make of [raced, backendWith]) {
      const backend = make({
        acquire: async (r) => {
          seen.push(r.signal);
          return { ok: true, token: 1 };
        },
      });
      const lease = await createMutex(backend, { name: "r", ttl: 1_000 }).tryAcquire();
      await lease?.release();
    }
    expect(seen[0]).toBeUndefined();
    expect(seen[1]).toBeInstanceOf(AbortSignal);
  });

  it("a hung acquire rejects with the retryable no-answer error at ttl − guard", async () => {
    useFakeClock();
    const released: string[] = [];
    const backend = raced({
      acquire: () => new Promise(() => {}),
      release: async (r) => {
        released.push(r.nonce);
      },
    });
    const mutex = createMutex(backend, { name: "h", ttl: 1_000 });
    const start = t();
    const result = mutex.tryAcquire().catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(1_000);
    const error = await result;
    expect(error).toBeInstanceOf(BackendError);
    expect((error as BackendError).retryable).toBe(true);
    // ttl − guard: 1 000 − (10 + 2 + 200)
    expect((error as Error).message).toMatch(/acquire got no answer within 788 ms/);
    expect(released).toHaveLength(1); // the ambiguous attempt is freed
    expect(t() - start).toBe(1_000);
  });

  it("a hung renewal ends at its bound, min(ttl/5, time left), and the caller's abort ends an acquire at once", async () => {
    useFakeClock();
    const backend = raced({ renew: () => new Promise(() => {}) });
    const lease = (await createMutex(backend, { name: "n", ttl: 1_000, renew: false }).tryAcquire())!;
    const start = t();
    const renewing = lease.renew().catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(200);
    expect(((await renewing) as Error).message).toMatch(/renew got no answer within 200 ms/);
    expect(t() - start).toBe(200);
    await lease.release();

    const waiting = createMutex(raced({ acquire: () => new Promise(() => {}) }), { name: "w" });
    const caller = new AbortController();
    const result = waiting.tryAcquire({ signal: caller.signal }).catch((e: unknown) => e);
    const reason = new Error("stop");
    caller.abort(reason);
    expect(await result).toBe(reason);
    expect(vi.getTimerCount()).toBe(0);
  });
});

it("abortable on a signal already aborted: rejects with its reason, and the promise's later rejection is handled", async () => {
  // A backend's watch (docs/DESIGN.md §19) started as the wait's signal aborts rejects later: it
  // must not surface as an unhandled rejection, which ends a Node or Bun process.
  const unhandled: unknown[] = [];
  const record = (reason: unknown) => unhandled.push(reason);
  process.on("unhandledRejection", record);
  try {
    let fail!: (error: Error) => void;
    const later = new Promise<never>((_, reject) => {
      fail = reject;
    });
    await expect(abortable(later, AbortSignal.abort(new Error("stop")))).rejects.toThrow("stop");
    fail(new Error("late"));
    await new Promise((r) => setTimeout(r, 20));
    expect(unhandled).toEqual([]);
  } finally {
    process.off("unhandledRejection", record);
  }
});
