// runOnce and nearestTick (docs/DESIGN.md §17) on memory(), with fake timers where the rules are
// about time: the fire's key, done and running, a failed or lost run left runnable, the standby's
// wait and takeover, the record's expiry, and the checks of the arguments.
import { describe, expect, it, vi } from "vitest";
import type { CompleteRequest } from "../../src/backend.ts";
import { memory } from "../../src/backends/memory/index.ts";
import {
  BackendError,
  createMutex,
  LeaseLostError,
  LockTimeoutError,
  nearestTick,
  runOnce,
} from "../../src/index.ts";
import { fireId, fireKey } from "../../src/once.ts";
import { counterOf } from "../../src/slots.ts";
import { backendWith, fakeClockInEachTest, never } from "../harness/doubles.ts";

fakeClockInEachTest();

describe("the fire's key", () => {
  it("names a Date and its epoch ms alike, keeps plain ids readable and encodes the rest", async () => {
    const at = Date.UTC(2026, 10, 24, 3);
    expect(await fireKey("job", new Date(at))).toBe(`job:fire:${at}`);
    expect(await fireKey("job", at)).toBe(`job:fire:${at}`);
    expect(await fireKey("job", "2026-11-24")).toBe("job:fire:2026-11-24");
    expect(await fireKey("job", "a b+€")).toBe("job:fire:a+20b+2B+E2+82+AC");
    expect(await fireKey("job", "a.b/c")).toBe("job:fire:a+2Eb+2Fc");
    expect(await fireKey("job", "x+20")).not.toBe(await fireKey("job", "x "));
  });

  it("hashes an id whose key would pass 255 characters, and refuses a name too long for that", async () => {
    const id = "é".repeat(100);
    const key = await fireKey("job", id);
    expect(key).toMatch(/^job:fire@[0-9A-F]{64}$/);
    expect(await fireKey("job", id)).toBe(key);
    expect(await fireKey("job", "è".repeat(100))).not.toBe(key);
    expect((await fireKey("n".repeat(185), id)).length).toBe(255);
    await expect(fireKey("n".repeat(186), id)).rejects.toThrow(/at most 185 characters/);
  });

  it("refuses anything but a safe integer, a valid Date or a 1-128 character string", () => {
    for (const bad of [
      1.5,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      new Date(Number.NaN),
      "",
      "x".repeat(129),
      "a\nb",
      "\uD800",
    ])
      expect(() => fireId(bad)).toThrow(RangeError);
    for (const bad of [null, undefined, {}, 1n, [1]]) expect(() => fireId(bad)).toThrow(TypeError);
    expect(() => fireId(1.5)).toThrow(
      /fire must be an integer number of epoch ms, a valid Date, or a string/,
    );
    expect(fireId("x".repeat(128))).toBe("x".repeat(128));
  });
});

describe("runOnce", () => {
  const setup = (ttl = 1_000) => {
    const store = memory();
    const make = (owner: string) => createMutex(store, { name: "job", ttl, owner, retryDelay: 50 });
    return { store, make };
  };

  it("runs a fire once: a later call finds it done, in one request, and says who ran it", async () => {
    const { store, make } = setup();
    let runs = 0;
    const first = await runOnce(make("a"), 42, async () => ++runs);
    expect(first).toEqual({ ran: true, value: 1, token: 1 });
    const acquire = vi.spyOn(store, "acquire");
    const late = await runOnce(make("b"), new Date(42), async () => ++runs);
    expect(late).toEqual({ ran: false, reason: "done", by: { owner: "a", token: 1 } });
    expect(acquire).toHaveBeenCalledTimes(1);
    expect(runs).toBe(1);
    expect(await store.inspect({ key: "job:fire:42" })).toMatchObject({ owner: "a", token: 1, done: true });
    // Another fire, and the mutex itself, are unaffected.
    expect(await runOnce(make("b"), 43, async () => ++runs)).toMatchObject({ ran: true, value: 2 });
    expect(await make("b").holder()).toBeNull();
  });

  it("answers running at once while the fire runs elsewhere, without standby", async () => {
    const { make } = setup();
    let finish = () => {};
    const first = runOnce(
      make("a"),
      "t",
      () => new Promise<string>((resolve) => (finish = () => resolve("ok"))),
    );
    await vi.advanceTimersByTimeAsync(1);
    expect(await runOnce(make("b"), "t", () => "no")).toEqual({ ran: false, reason: "running" });
    finish();
    expect(await first).toMatchObject({ ran: true, value: "ok" });
  });

  it("leaves a fire whose fn threw runnable, and rethrows the error", async () => {
    const { make } = setup();
    const boom = new Error("boom");
    await expect(runOnce(make("a"), "t", () => Promise.reject(boom))).rejects.toBe(boom);
    expect(await runOnce(make("b"), "t", () => "ok")).toEqual({ ran: true, value: "ok", token: 2 });
  });

  it("a standby waits for a running fire and answers done when it completes", async () => {
    const { make } = setup();
    let finish = () => {};
    const first = runOnce(make("a"), "t", () => new Promise<void>((resolve) => (finish = resolve)));
    await vi.advanceTimersByTimeAsync(1);
    let ran = false;
    const standby = runOnce(make("b"), "t", () => (ran = true), { standby: true });
    await vi.advanceTimersByTimeAsync(500);
    finish();
    await vi.advanceTimersByTimeAsync(200);
    expect(await first).toMatchObject({ ran: true, token: 1 });
    expect(await standby).toEqual({ ran: false, reason: "done", by: { owner: "a", token: 1 } });
    expect(ran).toBe(false);
  });

  it("reports its steps to the mutex's observer: a standby that finds the fire done ends with acquire-failed, code done", async () => {
    const store = memory();
    const events: { type: string; code?: string; outcome?: string; name?: string; owner?: string }[] = [];
    const make = (owner: string) =>
      createMutex(store, { name: "job", ttl: 1_000, owner, retryDelay: 50, onEvent: (e) => events.push(e) });
    let finish = () => {};
    const first = runOnce(make("a"), "t", () => new Promise<void>((resolve) => (finish = resolve)));
    await vi.advanceTimersByTimeAsync(1);
    const standby = runOnce(make("b"), "t", () => 0, { standby: true });
    await vi.advanceTimersByTimeAsync(100);
    finish();
    await vi.advanceTimersByTimeAsync(100);
    await first;
    expect(await standby).toMatchObject({ ran: false, reason: "done" });
    expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(["acquired", "released", "acquiring"]));
    expect(events.filter((e) => e.type === "acquire-failed")).toEqual([
      expect.objectContaining({ code: "done" }),
    ]);
    // The standby's last attempt, and a late call's only one, say done with the runner's token.
    const late = await runOnce(make("c"), "t", () => 0);
    expect(late).toMatchObject({ ran: false, reason: "done", by: { owner: "a" } });
    const done = events.filter((e) => e.type === "attempt" && e.outcome === "done");
    expect(done).toEqual([
      expect.objectContaining({ name: "job", owner: "b", token: late.ran ? 0 : late.by?.token }),
      expect.objectContaining({ name: "job", owner: "c", token: late.ran ? 0 : late.by?.token }),
    ]);
  });

  it("a standby takes over a silent runner's fire with a greater token", async () => {
    const { store, make } = setup();
    const key = await fireKey("job", "t");
    const silent = await store.acquire({ key, owner: "silent", nonce: crypto.randomUUID(), ttl: 1_000 });
    expect(silent).toEqual({ ok: true, token: 1 });
    const standby = runOnce(make("b"), "t", (_signal, lease) => lease.token, { standby: true });
    await vi.advanceTimersByTimeAsync(1_200);
    expect(await standby).toEqual({ ran: true, value: 2, token: 2 });
  });

  it("a standby's timeout rejects with LockTimeoutError", async () => {
    const { store, make } = setup();
    await store.acquire({
      key: await fireKey("job", "t"),
      owner: "x",
      nonce: crypto.randomUUID(),
      ttl: 10_000,
    });
    const standby = runOnce(make("b"), "t", () => 1, { standby: true, timeout: 300 });
    const caught = standby.catch((error: unknown) => error);
    await vi.advanceTimersByTimeAsync(400);
    expect(await caught).toBeInstanceOf(LockTimeoutError);
  });

  it("a lease lost before complete rejects with LeaseLostError and records nothing", async () => {
    const store = memory();
    const backend = backendWith({ ...store, complete: async () => false });
    const mutex = createMutex(backend, { name: "job", ttl: 1_000 });
    await expect(runOnce(mutex, "t", () => 1)).rejects.toBeInstanceOf(LeaseLostError);
    expect(await store.inspect({ key: "job:fire:t" })).toMatchObject({ owner: mutex.owner });
    expect((await store.inspect({ key: "job:fire:t" }))?.done).toBeUndefined();
  });

  // The faults below (a busy store, a lost answer) are doubles: a real store cannot be made to
  // fail one given request. test/system/once-fleet.test.ts meets them for real on Deno KV.
  const busy = () => new BackendError("database is locked", { backend: "memory", retryable: true });
  /** What `p` settles to once the fake clock has moved past the 1 s lease's deadline. */
  const settled = async <T>(p: Promise<T>): Promise<{ value?: T; error?: unknown }> => {
    const out = p.then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    await vi.advanceTimersByTimeAsync(2_000);
    return out;
  };

  it("a record that fails retryably is sent again while the lock is ours: the fire ran, so it is recorded", async () => {
    const store = memory();
    let failures = 2;
    const complete = vi.fn((r: CompleteRequest) =>
      failures-- > 0 ? Promise.reject(busy()) : store.complete!(r),
    );
    const mutex = createMutex(backendWith({ ...store, complete }), { name: "job", ttl: 1_000 });
    const runs = vi.fn(() => "sent");
    expect((await settled(runOnce(mutex, "t", runs))).value).toEqual({ ran: true, value: "sent", token: 1 });
    expect(runs).toHaveBeenCalledTimes(1);
    expect(complete).toHaveBeenCalledTimes(3);
    expect(await runOnce(createMutex(store, { name: "job" }), "t", runs)).toMatchObject({
      ran: false,
      reason: "done",
      by: { owner: mutex.owner, token: 1 },
    });
  });

  it("a record whose answer was lost, sent again, is found to be the lease's own", async () => {
    const store = memory();
    let lost = true;
    const complete = async (r: CompleteRequest) => {
      const done = await store.complete!(r);
      if (!lost) return done;
      lost = false;
      throw busy();
    };
    const mutex = createMutex(backendWith({ ...store, complete }), { name: "job", ttl: 1_000 });
    expect((await settled(runOnce(mutex, "t", () => 1))).value).toEqual({ ran: true, value: 1, token: 1 });
  });

  it("a record that keeps failing is tried until the lease's deadline, then rejects with LeaseLostError (its cause the store's error); a non-retryable error at once", async () => {
    const store = memory();
    const complete = vi.fn(() => Promise.reject(busy()));
    const mutex = createMutex(backendWith({ ...store, complete }), { name: "job", ttl: 1_000 });
    const t0 = Date.now();
    let failed = 0;
    const { error } = await settled(runOnce(mutex, "t", () => 1).finally(() => (failed = Date.now() - t0)));
    expect(error).toBeInstanceOf(LeaseLostError);
    expect(String(error)).toMatch(/fn ran, but its record kept failing until the lease's deadline/);
    expect(String((error as Error).cause)).toMatch(/database is locked/);
    // Retried 25, 50, 100… ms apart, never past the lease's local deadline.
    expect(complete.mock.calls.length).toBeGreaterThan(3);
    expect(failed).toBeLessThan(1_000);
    const denied = new BackendError("forbidden", { backend: "memory", retryable: false });
    const once = vi.fn(() => Promise.reject(denied));
    const other = createMutex(backendWith({ ...store, complete: once }), { name: "job2", ttl: 1_000 });
    await expect(runOnce(other, "t", () => 1)).rejects.toBe(denied);
    expect(once).toHaveBeenCalledTimes(1);
  });

  it("a record sent again after its lock was taken over is not the lease's: LeaseLostError", async () => {
    const store = memory();
    let first = true;
    const complete = async (r: CompleteRequest) => {
      if (!first) return store.complete!(r);
      first = false;
      // Lost behind the runner's back (deleted on the store), and taken by another owner.
      await store.release({ key: r.key, nonce: r.nonce });
      await store.acquire({ key: r.key, owner: "other", nonce: "other-nonce", ttl: 5_000 });
      throw busy();
    };
    const mutex = createMutex(backendWith({ ...store, complete }), { name: "job", ttl: 1_000 });
    const { error } = await settled(runOnce(mutex, "t", () => 1));
    expect(error).toBeInstanceOf(LeaseLostError);
    expect(String(error)).toMatch(/no longer had it/);
    expect(await store.inspect({ key: "job:fire:t" })).toMatchObject({ owner: "other" });
  });

  it("a record whose first request never answers is sent again after that request's bound", async () => {
    const store = memory();
    let calls = 0;
    const complete = (r: CompleteRequest): Promise<boolean> =>
      calls++ === 0 ? never(r.signal) : store.complete!(r);
    const mutex = createMutex(backendWith({ ...store, complete }), { name: "job", ttl: 10_000 });
    // The first request's bound, max(ttl / 5, 1 s) = 2 s, then the retry.
    const out = runOnce(mutex, "t", () => "sent").then((value) => ({ value }));
    await vi.advanceTimersByTimeAsync(4_000);
    expect((await out).value).toEqual({ ran: true, value: "sent", token: 1 });
    expect(calls).toBe(2);
  });

  it("an acquire whose answer was lost rejects once its grant was given back, so a retry of the call runs the fire", async () => {
    const store = memory();
    let lose = true;
    // The store takes the lock, but the answer is lost (on a real store: no answer within the
    // bound, a reset); the give-back that follows takes 300 ms.
    const mutex = createMutex(
      backendWith({
        ...store,
        async acquire(r) {
          const result = await store.acquire(r);
          if (!lose) return result;
          lose = false;
          throw busy();
        },
        release: async (r) => {
          await new Promise((resolve) => setTimeout(resolve, 300));
          return store.release(r);
        },
      }),
      { name: "job", ttl: 1_000 },
    );
    const runs = vi.fn(() => "sent");
    const first = runOnce(mutex, "t", runs).catch((error: unknown) => error);
    let answered = false;
    void first.then(() => (answered = true));
    await vi.advanceTimersByTimeAsync(200);
    expect(answered).toBe(false); // its grant is still being given back
    await vi.advanceTimersByTimeAsync(200);
    expect(await first).toBeInstanceOf(BackendError);
    // Retried (as a scheduler would): the fire is free, not `running` on the lost grant.
    expect((await settled(runOnce(mutex, "t", runs))).value).toEqual({ ran: true, value: "sent", token: 2 });
    expect(runs).toHaveBeenCalledTimes(1);
  });

  it("a lease lost during fn is not recorded: the fire runs again", async () => {
    const { store, make } = setup();
    const renew = vi.spyOn(store, "renew").mockResolvedValue(false);
    await expect(
      runOnce(make("a"), "t", async (signal) => {
        await vi.advanceTimersByTimeAsync(500);
        expect(signal.aborted).toBe(true);
      }),
    ).rejects.toBeInstanceOf(LeaseLostError);
    renew.mockRestore();
    expect(await runOnce(make("b"), "t", () => "again")).toMatchObject({
      ran: true,
      value: "again",
      token: 2,
    });
  });

  it("the record expires after retain; the next run has a greater token", async () => {
    const { make } = setup();
    await runOnce(make("a"), "t", () => 1, { retain: 5_000 });
    await vi.advanceTimersByTimeAsync(4_990);
    expect(await runOnce(make("b"), "t", () => 2)).toMatchObject({ ran: false, reason: "done" });
    await vi.advanceTimersByTimeAsync(20);
    expect(await runOnce(make("b"), "t", () => 2)).toEqual({ ran: true, value: 2, token: 2 });
  });

  it("on an observed-expiry store, the record still expires after retain", async () => {
    const store = memory({ expiry: "observed" });
    const mutex = createMutex(store, { name: "job", ttl: 1_000 });
    await runOnce(mutex, "t", () => 1, { retain: 100 });
    expect(await runOnce(mutex, "t", () => 2)).toMatchObject({ ran: false, reason: "done" });
    await vi.advanceTimersByTimeAsync(150);
    expect(await runOnce(mutex, "t", () => 2)).toMatchObject({ ran: true, token: 2 });
  });

  it("refuses a backend without complete, naming it, and bad options", async () => {
    const { store, make } = setup();
    const { complete: _, ...rest } = store;
    const without = createMutex({ ...rest, name: "plain" }, { name: "job" });
    await expect(runOnce(without, 1, () => 1)).rejects.toThrow(
      /the plain backend cannot record a completed fire/,
    );
    await expect(runOnce({} as never, 1, () => 1)).rejects.toThrow(TypeError);
    await expect(runOnce(make("a"), 1, "x" as never)).rejects.toThrow(/fn must be a function/);
    await expect(runOnce(make("a"), 1, () => 1, { retain: 0 })).rejects.toThrow(RangeError);
    await expect(runOnce(make("a"), 1, () => 1, { retain: 2 ** 31 })).rejects.toThrow(RangeError);
    await expect(runOnce(make("a"), 1, () => 1, { standby: "yes" as never })).rejects.toThrow(TypeError);
    await expect(runOnce(make("a"), 1.5, () => 1)).rejects.toThrow(RangeError);
  });

  it("refuses a retain outside the backend's retainRange at the call, naming the backend and the range", async () => {
    const { store } = setup();
    let calls = 0;
    const narrow = { ...store, name: "narrow", retainRange: [1_000, 60_000] as const };
    const mutex = createMutex(narrow, { name: "job" });
    const job = () => ++calls;
    await expect(runOnce(mutex, 1, job, { retain: 60_001 })).rejects.toThrow(
      "runOnce: retain must be from 1000 to 60000 ms for the narrow backend, got 60001",
    );
    await expect(runOnce(mutex, 1, job)).rejects.toThrow(/for the narrow backend, got 86400000/);
    expect(calls).toBe(0);
    expect(await runOnce(mutex, 1, job, { retain: 60_000 })).toMatchObject({ ran: true, value: 1 });
  });
});

describe("the done record and the rest of the contract (memory)", () => {
  it("renew, release and raiseFence never touch a done record; a non-holder cannot complete", async () => {
    const store = memory();
    const nonce = crypto.randomUUID();
    expect(await store.acquire({ key: "k", owner: "a", nonce, ttl: 1_000 })).toEqual({ ok: true, token: 1 });
    expect(await store.complete!({ key: "k", nonce: crypto.randomUUID(), retain: 1_000 })).toBe(false);
    expect(await store.complete!({ key: "k", nonce, retain: 1_000 })).toBe(true);
    expect(await store.complete!({ key: "k", nonce, retain: 1_000 })).toBe(false);
    expect(await store.renew({ key: "k", nonce, ttl: 1_000 })).toBe(false);
    expect(await store.renew({ key: "k", nonce: "", ttl: 1_000 })).toBe(false);
    await store.release({ key: "k", nonce: "" });
    expect(await store.raiseFence!({ key: "k", owner: "a", nonce: "", token: 9 })).toBe(false);
    expect(await store.acquire({ key: "k", owner: "b", nonce: "n2", ttl: 1_000 })).toEqual({
      ok: false,
      done: { owner: "a", token: 1 },
    });
    expect(await store.acquireAny!({ keys: ["k"], owner: "b", nonce: "n3", ttl: 1_000 })).toMatchObject({
      ok: false,
    });
  });
});

describe("nearestTick", () => {
  it("rounds to the nearest multiple of the period", () => {
    expect(nearestTick(60_000, 120_000)).toBe(120_000);
    expect(nearestTick(60_000, 149_999)).toBe(120_000);
    expect(nearestTick(60_000, 150_000)).toBe(180_000);
    expect(nearestTick(60_000, 91_000)).toBe(120_000);
    expect(nearestTick(1_000)).toBe(Math.round(Date.now() / 1_000) * 1_000);
  });

  it("refuses a period that is no positive integer, and a now that is no finite number", () => {
    expect(() => nearestTick(0)).toThrow(RangeError);
    expect(() => nearestTick(1.5)).toThrow(RangeError);
    expect(() => nearestTick("1" as never)).toThrow(TypeError);
    expect(() => nearestTick(1_000, Number.NaN)).toThrow(RangeError);
  });
});

describe("counterOf: the fence counter a lock key draws from (DESIGN §17)", () => {
  it("is the mutex name for a fire's key, the key itself for any other", async () => {
    const long = await fireKey("job", "x".repeat(128).replace(/x/g, "é"));
    expect(long).toMatch(/^job:fire@[0-9A-F]{64}$/);
    for (const [key, counter] of [
      [await fireKey("job", 1_700_000_000_000), "job"],
      [await fireKey("job", "a:fire:b"), "job"],
      [long, "job"],
      [await fireKey("s:permit:3", "t"), "s:permit:3"], // a slot's fire: the slot's counter
      ["job", "job"],
      ["job:fire", "job:fire"],
      ["job:fire:", "job:fire:"],
      ["job:fire@abc", "job:fire@abc"],
      ["a:fire:b:permit:3", "a:fire:b:permit:3"], // a slot key keeps its own counter
      ["s:permit:3", "s:permit:3"],
      [await fireKey("job", "x:permit:3"), "job"], // an id never reads as a slot
      [await fireKey("job:fire", "t"), "job:fire"], // the name may hold :fire
      [await fireKey("job:fire:x", "t"), "job"], // a look-alike name shares job's counter, like its plain key
      ["job:fire:x", "job"],
    ]) {
      expect(counterOf(key!), key).toBe(counter);
    }
    expect(await fireKey("job", "2026-11-24T10:00")).toBe("job:fire:2026-11-24T10+3A00");
  });

  it("a mutex named job:fire, and a fire id with :permit:, draw from the same counter as their name's plain leases", async () => {
    const store = memory();
    for (const name of ["job:fire", "job"]) {
      const plain = createMutex(store, { name, owner: "plain" });
      let last = 0;
      for (let i = 0; i < 3; i++) {
        const lease = await plain.tryAcquire();
        last = lease!.token;
        await lease!.release();
      }
      const fired = await runOnce(plain, name === "job" ? "x:permit:3" : "t", (_s, lease) => lease.token);
      expect(fired.ran && fired.token, name).toBeGreaterThan(last);
    }
  });
});
