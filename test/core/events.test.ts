// The onEvent observer on the memory backend, with real timers and short ttls: the order and the
// contents of the events for each path of a lease's life (free and contended acquire, timeout,
// abort, renewals, each kind of loss, release, leadership), an observer that throws, and no
// secret in any event. Wrappers around memory() make the faults (renewals refused or failing).
import { describe, expect, it } from "vitest";
import type { Backend } from "../../src/backend.ts";
import { memory } from "../../src/backends/memory/index.ts";
import {
  BackendError,
  createElection,
  createMutex,
  createSemaphore,
  type LockEvent,
  type MutexOptions,
} from "../../src/index.ts";
import { aborted as untilAborted } from "../../src/signals.ts";
import { sleep } from "../../src/time.ts";
import { defaultStopMargin, guardOf, renewalWindow } from "../../src/timing.ts";
import { checkNoSecrets } from "../harness/secrets.ts";

/** A mutex with an observer that records every event; `types()` lists them as `type[:outcome]`. */
function observed(backend: Backend, options: MutexOptions) {
  const events: LockEvent[] = [];
  const mutex = createMutex(backend, { ...options, onEvent: (e) => events.push(e) });
  const types = () => events.map((e) => (e.type === "attempt" ? `attempt:${e.outcome}` : e.type));
  return { mutex, events, types };
}

/** Every event carries the lock name, the mutex's owner and a monotonic time, in order. */
function checkCommon(events: LockEvent[], name: string, owner: string) {
  let last = 0;
  for (const e of events) {
    expect(e).toMatchObject({ name, owner });
    expect(e.at).toBeGreaterThanOrEqual(last);
    last = e.at;
  }
}

/** A memory store whose renewals can be switched to answer "not yours" or to fail. */
function faulty(store: Backend = memory()) {
  let mode: "ok" | "gone" | "fail" = "ok";
  const backend: Backend = {
    ...store,
    renew: (r) =>
      mode === "gone"
        ? Promise.resolve(false)
        : mode === "fail"
          ? Promise.reject(new BackendError("renew failed: HTTP 503", { backend: "memory", retryable: true }))
          : store.renew(r),
  };
  return { backend, set: (m: typeof mode) => (mode = m) };
}

describe("onEvent: acquiring", () => {
  it("a free acquire: acquiring, one granted attempt, acquired with the token, waited and 1 attempt", async () => {
    const { mutex, events, types } = observed(memory(), { name: "free", owner: "me", ttl: 1_000 });
    const lease = await mutex.acquire();
    expect(types()).toEqual(["acquiring", "attempt:granted", "acquired"]);
    expect(events[1]).toMatchObject({ type: "attempt", attempt: 1, outcome: "granted", token: lease.token });
    expect((events[1] as { latency: number }).latency).toBeGreaterThanOrEqual(0);
    const acquired = events[2] as LockEvent & { type: "acquired" };
    expect(acquired).toMatchObject({ type: "acquired", token: lease.token, attempts: 1 });
    expect(acquired.waited).toBeGreaterThanOrEqual(0);
    expect(acquired.waited).toBeLessThan(1_000);
    checkCommon(events, "free", "me");
    await lease.release();
  });

  it("a contended acquire: taken attempts with retryAfter, then granted; acquired counts them and the wait", async () => {
    const store = memory();
    const holder = observed(store, { name: "busy", owner: "holder", ttl: 1_000 });
    const waiter = observed(store, { name: "busy", owner: "waiter", ttl: 1_000, retryDelay: 20 });
    const held = await holder.mutex.acquire();
    const pending = waiter.mutex.acquire({ timeout: 2_000 });
    await sleep(150);
    await held.release();
    const lease = await pending;
    const types = waiter.types();
    expect(types[0]).toBe("acquiring");
    expect(types.slice(-2)).toEqual(["attempt:granted", "acquired"]);
    const taken = waiter.events.filter((e) => e.type === "attempt" && e.outcome === "taken");
    expect(taken.length).toBeGreaterThanOrEqual(2);
    expect(taken.length).toBe(types.length - 3);
    for (const e of taken) {
      // memory() says how long the holder's lease has left.
      const retryAfter = (e as { retryAfter?: number }).retryAfter;
      expect(retryAfter).toBeGreaterThan(0);
      expect(retryAfter).toBeLessThanOrEqual(1_000);
    }
    // Attempts are numbered 1, 2, … within the acquire.
    const numbers = waiter.events.flatMap((e) => (e.type === "attempt" ? [e.attempt] : []));
    expect(numbers).toEqual(numbers.map((_, i) => i + 1));
    const acquired = waiter.events.at(-1) as LockEvent & { type: "acquired" };
    expect(acquired).toMatchObject({ token: lease.token, attempts: taken.length + 1 });
    expect(acquired.waited).toBeGreaterThanOrEqual(140);
    expect(acquired.token).toBe(held.token + 1);
    checkCommon(waiter.events, "busy", "waiter");
    // The holder's own story: acquired, then released after about 150 ms.
    expect(holder.types()).toEqual(["acquiring", "attempt:granted", "acquired", "released"]);
    const released = holder.events[3] as LockEvent & { type: "released" };
    expect(released.token).toBe(held.token);
    expect(released.held).toBeGreaterThanOrEqual(140);
    await lease.release();
  });

  it("a timeout: taken attempts, then acquire-failed with ERR_LOCK_TIMEOUT, the attempts and the wait", async () => {
    const store = memory();
    const held = await createMutex(store, { name: "t", ttl: 2_000 }).acquire();
    const { mutex, events, types } = observed(store, { name: "t", owner: "late", retryDelay: 30 });
    await expect(mutex.acquire({ timeout: 200 })).rejects.toMatchObject({ code: "ERR_LOCK_TIMEOUT" });
    const attempts = types().filter((t) => t === "attempt:taken").length;
    expect(attempts).toBeGreaterThanOrEqual(2);
    expect(types()).toEqual(["acquiring", ...Array(attempts).fill("attempt:taken"), "acquire-failed"]);
    const failed = events.at(-1) as LockEvent & { type: "acquire-failed" };
    expect(failed).toMatchObject({ code: "ERR_LOCK_TIMEOUT", attempts });
    expect(failed.waited).toBeGreaterThanOrEqual(195);
    checkCommon(events, "t", "late");
    await held.release();
  });

  it("timeout 0 on a held lock and an aborted wait end with acquire-failed and their codes", async () => {
    const store = memory();
    const held = await createMutex(store, { name: "z", ttl: 2_000 }).acquire();
    const { mutex, events, types } = observed(store, { name: "z" });
    await expect(mutex.acquire({ timeout: 0 })).rejects.toMatchObject({ code: "ERR_LOCK_TIMEOUT" });
    expect(types()).toEqual(["acquiring", "attempt:taken", "acquire-failed"]);
    expect(events[2]).toMatchObject({ code: "ERR_LOCK_TIMEOUT", attempts: 1 });
    events.length = 0;
    await expect(mutex.acquire({ signal: AbortSignal.timeout(50) })).rejects.toMatchObject({
      name: "TimeoutError",
    });
    expect(events.at(-1)).toMatchObject({ type: "acquire-failed", code: "TimeoutError" });
    await held.release();
  });

  it("tryAcquire: one attempt; granted adds acquired, taken adds nothing", async () => {
    const store = memory();
    const a = observed(store, { name: "try" });
    const b = observed(store, { name: "try" });
    const lease = await a.mutex.tryAcquire();
    expect(a.types()).toEqual(["attempt:granted", "acquired"]);
    expect(a.events[1]).toMatchObject({ attempts: 1, token: lease?.token });
    expect(await b.mutex.tryAcquire()).toBeNull();
    expect(b.types()).toEqual(["attempt:taken"]);
    await lease?.release();
  });

  it("a failing backend: error attempts carry the code and retryable, never the message", async () => {
    // Not registered as a secret (the suite would then fail on the errors themselves): the events
    // must not quote it all the same. test/backends/upstash/events.test.ts checks registered ones.
    const secret = "evt-not-in-events-4242424242";
    const store = memory();
    let failures = 0;
    const backend: Backend = {
      ...store,
      acquire: (r) =>
        ++failures <= 2
          ? Promise.reject(
              new BackendError(`HTTP 503 from https://x.test/?token=${secret}`, {
                backend: "memory",
                status: 503,
                retryable: true,
              }),
            )
          : failures === 3
            ? store.acquire(r)
            : Promise.reject(
                new BackendError(`HTTP 401 for ${secret}`, {
                  backend: "memory",
                  retryable: false,
                  auth: true,
                }),
              ),
    };
    const { mutex, events, types } = observed(backend, { name: "err", retryDelay: 10 });
    const lease = await mutex.acquire({ timeout: 2_000, onError: () => {} });
    expect(types()).toEqual(["acquiring", "attempt:error", "attempt:error", "attempt:granted", "acquired"]);
    expect(events[1]).toMatchObject({ outcome: "error", code: "ERR_BACKEND", retryable: true });
    expect(events[4]).toMatchObject({ attempts: 3 });
    await lease.release();
    events.length = 0;
    await expect(mutex.acquire({ timeout: 1_000 })).rejects.toMatchObject({ code: "ERR_BACKEND_AUTH" });
    expect(types()).toEqual(["acquiring", "attempt:error", "acquire-failed"]);
    expect(events[1]).toMatchObject({ code: "ERR_BACKEND_AUTH", retryable: false });
    expect(events[2]).toMatchObject({ code: "ERR_BACKEND_AUTH", attempts: 1 });
    expect(JSON.stringify(events)).not.toContain(secret);
    expect(JSON.stringify(events)).not.toContain("x.test");
    checkNoSecrets(events, "events");
  });
});

describe("onEvent: a held lease", () => {
  it("renewals report their latency and the margin left to the new deadline; release ends the events", async () => {
    const ttl = 300;
    const { mutex, events, types } = observed(memory(), { name: "r", ttl });
    const lease = await mutex.acquire();
    await sleep(2 * renewalWindow(ttl).latest + ttl / 15); // two background renewals, at their latest
    const renewed = events.filter((e) => e.type === "renewed");
    expect(renewed.length).toBeGreaterThanOrEqual(2);
    for (const e of renewed) {
      expect(e.token).toBe(lease.token);
      expect(e.latency).toBeGreaterThanOrEqual(0);
      expect(e.latency).toBeLessThanOrEqual(ttl / 5); // a renewal's own bound
      // The new deadline is t_send + ttl − guard: the margin is that, less the latency.
      expect(e.margin).toBeLessThanOrEqual(ttl - guardOf(ttl, defaultStopMargin(ttl)));
      expect(e.margin).toBeGreaterThanOrEqual(ttl - guardOf(ttl, defaultStopMargin(ttl)) - ttl / 5);
    }
    await lease.renew();
    expect(events.at(-1)).toMatchObject({ type: "renewed", token: lease.token });
    await lease.release();
    await lease.release();
    const count = events.length;
    expect(events.at(-1)).toMatchObject({ type: "released", token: lease.token });
    await sleep(renewalWindow(ttl).latest + ttl / 6); // past the next renewal, had there been one
    expect(events.length).toBe(count);
    expect(types().filter((t) => t === "released")).toHaveLength(1);
    checkCommon(events, "r", mutex.owner);
  });

  it("the backend says the lease is gone: lost with reason gone, and no released after it", async () => {
    const ttl = 300;
    const { backend, set } = faulty();
    const { mutex, events, types } = observed(backend, { name: "g", ttl });
    const lease = await mutex.acquire();
    set("gone");
    await expect(lease.renew()).rejects.toMatchObject({ code: "ERR_LEASE_LOST" });
    expect(types()).toEqual(["acquiring", "attempt:granted", "acquired", "lost"]);
    expect(events.at(-1)).toMatchObject({ type: "lost", token: lease.token, reason: "gone" });
    await lease.release();
    expect(types().at(-1)).toBe("lost");
  });

  it("failing renewals: renew-failed with the code and a shrinking margin, then lost with reason deadline", async () => {
    const ttl = 300;
    const { backend, set } = faulty();
    const { mutex, events, types } = observed(backend, { name: "d", ttl });
    const lease = await mutex.acquire();
    set("fail");
    await untilAborted(lease.signal);
    const failed = events.filter((e) => e.type === "renew-failed");
    expect(failed.length).toBeGreaterThanOrEqual(2);
    expect(types()).toEqual([
      "acquiring",
      "attempt:granted",
      "acquired",
      ...Array(failed.length).fill("renew-failed"),
      "lost",
    ]);
    for (const [i, e] of failed.entries()) {
      expect(e).toMatchObject({ token: lease.token, code: "ERR_BACKEND", retryable: true });
      if (i > 0) expect(e.margin).toBeLessThan(failed[i - 1]!.margin);
    }
    expect(events.at(-1)).toMatchObject({ type: "lost", token: lease.token, reason: "deadline" });
  });

  it("without renewal the deadline passes: lost with reason deadline", async () => {
    const { mutex, events, types } = observed(memory(), { name: "n", ttl: 100, renew: false });
    const lease = await mutex.acquire();
    await untilAborted(lease.signal);
    expect(types()).toEqual(["acquiring", "attempt:granted", "acquired", "lost"]);
    expect(events.at(-1)).toMatchObject({ token: lease.token, reason: "deadline" });
  });

  it("a stalled event loop: lost with reason stalled, and the lock is freed", async () => {
    const store = memory();
    const { mutex, events, types } = observed(store, { name: "s", ttl: 300 });
    const lease = await mutex.acquire();
    const until = performance.now() + 250; // past the first renewal (about 100 ms) by more than stopMargin
    while (performance.now() < until) {
      // block the event loop
    }
    await untilAborted(lease.signal);
    expect(types()).toEqual(["acquiring", "attempt:granted", "acquired", "lost"]);
    expect(events.at(-1)).toMatchObject({ token: lease.token, reason: "stalled" });
    await sleep(10);
    expect(await createMutex(store, { name: "s" }).tryAcquire()).not.toBeNull();
  });
});

describe("onEvent: leadership", () => {
  it("createElection reports elected after acquired, and deposed after released on shutdown", async () => {
    const { mutex, events, types } = observed(memory(), { name: "lead", owner: "me", ttl: 300 });
    const stop = new AbortController();
    let token = 0;
    await createElection(mutex).lead(
      async (signal, lease) => {
        token = lease.token;
        stop.abort();
        await untilAborted(signal);
      },
      { signal: stop.signal },
    );
    expect(types()).toEqual(["acquiring", "attempt:granted", "acquired", "elected", "released", "deposed"]);
    expect(events[3]).toMatchObject({ type: "elected", token });
    expect(events[5]).toMatchObject({ type: "deposed", token });
    checkCommon(events, "lead", "me");
  });

  it("a leader whose lease is lost: lost, then deposed, then it campaigns again", async () => {
    const { backend, set } = faulty();
    const { mutex, events, types } = observed(backend, { name: "lead2", ttl: 300, retryDelay: 20 });
    const stop = new AbortController();
    let terms = 0;
    await createElection(mutex).lead(
      async (signal) => {
        if (++terms === 2) return stop.abort();
        set("gone");
        await untilAborted(signal);
        set("ok");
      },
      { signal: stop.signal, onError: () => {} },
    );
    const t = types();
    expect(t.slice(0, 6)).toEqual(["acquiring", "attempt:granted", "acquired", "elected", "lost", "deposed"]);
    expect(events[4]).toMatchObject({ reason: "gone" });
    expect(t.slice(6)).toEqual([
      "acquiring",
      "attempt:granted",
      "acquired",
      "elected",
      "released",
      "deposed",
    ]);
  });
});

describe("onEvent: the observer", () => {
  it("one that throws breaks nothing: acquire, renew, release, loss and leadership go on", async () => {
    const { backend, set } = faulty();
    let calls = 0;
    const onEvent = () => {
      calls++;
      throw new Error("observer bug");
    };
    const mutex = createMutex(backend, { name: "x", ttl: 300, onEvent });
    const lease = await mutex.acquire({ timeout: 1_000 });
    await lease.renew();
    expect(lease.valid).toBe(true);
    await lease.release();
    expect(await mutex.holder()).toBeNull();
    const second = await mutex.tryAcquire();
    set("gone");
    await expect(second?.renew()).rejects.toMatchObject({ code: "ERR_LEASE_LOST" });
    set("ok");
    await second?.release(); // frees it on the store
    const stop = new AbortController();
    await createElection(mutex).lead(() => stop.abort(), { signal: stop.signal });
    // acquiring, attempt, acquired, renewed, released; attempt, acquired, lost; and the election's 6.
    expect(calls).toBe(14);
  });

  it("onEvent must be a function; the mutex keeps the observer to itself", () => {
    expect(() => createMutex(memory(), { name: "o", onEvent: "log" as never })).toThrow(
      /createMutex: onEvent must be a function, got string/,
    );
    const onEvent = () => {};
    expect(createMutex(memory(), { name: "o", onEvent })).not.toHaveProperty("onEvent");
  });
});

describe("onEvent: a semaphore", () => {
  it("reports its permits like a mutex's leases, under the semaphore's name, on both acquire paths", async () => {
    // memory() offers acquireAny (one request for any slot); without it, one attempt tries the slots.
    const { acquireAny: _, ...plain } = memory();
    for (const backend of [memory(), plain as Backend]) {
      const events: LockEvent[] = [];
      const sem = createSemaphore(backend, {
        name: "exports",
        limit: 2,
        owner: "me",
        ttl: 1_000,
        onEvent: (e) => events.push(e),
      });
      const a = await sem.acquire();
      const b = (await sem.tryAcquire())!;
      expect(await sem.tryAcquire()).toBeNull();
      await a.release();
      await b.release();
      expect(events.map((e) => (e.type === "attempt" ? `attempt:${e.outcome}` : e.type))).toEqual([
        "acquiring",
        "attempt:granted",
        "acquired",
        "attempt:granted",
        "acquired",
        "attempt:taken",
        "released",
        "released",
      ]);
      checkCommon(events, "exports", "me");
      const tokens = events.flatMap((e) => (e.type === "acquired" || e.type === "released" ? [e.token] : []));
      expect(tokens).toEqual([a.token, b.token, a.token, b.token]);
    }
  });
});
