// createSemaphore over the memory backend: option checks, the one-request path (acquireAny) and
// the generic one (a backend without it: one attempt per slot), waiting, timeout and abort, run,
// and at most `limit` unaborted permits under contention (the permits' signals are the truth).
import { describe, expect, it, vi } from "vitest";
import type { Backend } from "../../src/backend.ts";
import { memory } from "../../src/backends/memory/index.ts";
import { createSemaphore, isLockError, type Permit } from "../../src/index.ts";
import { slotKey } from "../../src/slots.ts";
import { transient } from "../harness/doubles.ts";

/** A memory store without acquireAny (the generic path), counting the requests of each kind. */
function counted(any = true) {
  const store = memory();
  const calls = { acquire: 0, acquireAny: 0, inspect: 0 };
  const count =
    <A extends unknown[], R>(kind: keyof typeof calls, fn: (...a: A) => R) =>
    (...a: A): R => {
      calls[kind]++;
      return fn(...a);
    };
  const backend: Backend = {
    name: "memory",
    acquire: count("acquire", store.acquire),
    renew: store.renew,
    release: store.release,
    inspect: count("inspect", store.inspect),
    ...(any ? { acquireAny: count("acquireAny", store.acquireAny!) } : {}),
  };
  return { backend, calls };
}

describe("createSemaphore options", () => {
  const b = memory();
  it("checks limit and names createSemaphore", () => {
    for (const limit of [0, 1.5, 1_001, Number.NaN, "3"]) {
      expect(() => createSemaphore(b, { name: "s", limit: limit as number })).toThrow(
        /^\[leasehold\] createSemaphore: limit must be an integer from 1 to 1000/,
      );
    }
    expect(() => createSemaphore(b, { name: "a//b", limit: 2 })).toThrow(
      /createSemaphore: name "a\/\/b" is invalid/,
    );
    expect(() => createSemaphore(b, { name: "s", limit: 2, ttl: 5 })).toThrow(RangeError);
  });
  it("keeps every slot key a valid name: the name is shorter by the slot suffix", () => {
    expect(() => createSemaphore(b, { name: "x".repeat(246), limit: 11 })).toThrow(
      /name must be at most 245 characters with limit 11/,
    );
    expect(createSemaphore(b, { name: "x".repeat(246), limit: 10 }).limit).toBe(10);
    expect(slotKey("jobs", 3)).toBe("jobs:permit:3");
  });
});

describe("createSemaphore", () => {
  it("takes a permit in one request on a backend with acquireAny, whatever the limit", async () => {
    const { backend, calls } = counted();
    const sem = createSemaphore(backend, { name: "one", limit: 50, ttl: 1_000 });
    const permits: Permit[] = [];
    for (let i = 0; i < 50; i++) permits.push((await sem.tryAcquire())!);
    expect(calls).toMatchObject({ acquire: 0, acquireAny: 50 });
    expect(permits.map((p) => p.slot)).toEqual([...Array(50).keys()]);
    expect(await sem.tryAcquire()).toBeNull();
    expect(calls.acquireAny).toBe(51);
    await Promise.all(permits.map((p) => p.release()));
  });

  it("without acquireAny, tries each slot once from a random one and stops at the first grant", async () => {
    const { backend, calls } = counted(false);
    const sem = createSemaphore(backend, { name: "gen", limit: 5, ttl: 1_000 });
    const a = await sem.tryAcquire();
    expect(calls.acquire).toBe(1);
    const rest = [
      await sem.tryAcquire(),
      await sem.tryAcquire(),
      await sem.tryAcquire(),
      await sem.tryAcquire(),
    ];
    expect(new Set([a, ...rest].map((p) => p!.slot)).size).toBe(5);
    calls.acquire = 0;
    expect(await sem.tryAcquire()).toBeNull();
    expect(calls.acquire).toBe(5);
    for (const p of [a, ...rest]) await p!.release();
  });

  it("a full semaphore's acquire sleeps no longer than the earliest expiry it learned", async () => {
    for (const any of [true, false]) {
      const { backend } = counted(any);
      const holder = createSemaphore(backend, { name: "exp", limit: 2, ttl: 400, renew: false });
      const [p, q] = [await holder.tryAcquire(), await holder.tryAcquire()];
      // retryDelay of a minute: only the learned expiry can end the wait within the timeout.
      const waiter = createSemaphore(backend, { name: "exp", limit: 2, ttl: 400, retryDelay: 60_000 });
      const t0 = performance.now();
      const got = await waiter.acquire({ timeout: 3_000 });
      expect(performance.now() - t0).toBeLessThan(1_500);
      expect(p!.signal.aborted && q!.signal.aborted).toBe(true);
      await got.release();
    }
  });

  it("times out with LockTimeoutError, rejects with the signal's reason, and run releases", async () => {
    const sem = createSemaphore(memory(), { name: "t", limit: 1, ttl: 1_000 });
    const p = (await sem.tryAcquire())!;
    const err = await sem.acquire({ timeout: 100 }).catch((e: unknown) => e);
    expect(isLockError(err) && err.code).toBe("ERR_LOCK_TIMEOUT");
    expect(String((err as Error).message)).toContain('could not acquire "t" within 100 ms');
    const ctrl = new AbortController();
    const waiting = sem.acquire({ signal: ctrl.signal });
    ctrl.abort(new Error("stop"));
    await expect(waiting).rejects.toThrow("stop");
    await p.release();
    const value = await sem.run(async (signal, permit) => {
      expect(permit.name).toBe("t");
      expect(permit.slot).toBe(0);
      expect(signal.aborted).toBe(false);
      return 42;
    });
    expect(value).toBe(42);
    expect(await sem.holders()).toEqual([]);
  });

  it("never more than limit unaborted permits at any instant under contention (both paths)", async () => {
    for (const any of [true, false]) {
      const { backend } = counted(any);
      const limit = 3;
      let live = 0;
      let most = 0;
      const stop = performance.now() + 1_500;
      await Promise.all(
        Array.from({ length: 12 }, async (_, i) => {
          const sem = createSemaphore(backend, {
            name: "c",
            limit,
            ttl: 300,
            owner: `w${i}`,
            retryDelay: 20,
          });
          while (performance.now() < stop) {
            const p = await sem.acquire({ timeout: 2_000 }).catch(() => null);
            if (!p) continue;
            live++;
            most = Math.max(most, live);
            p.signal.addEventListener("abort", () => live--, { once: true });
            await new Promise((r) => setTimeout(r, Math.random() * 40));
            await p.release();
          }
        }),
      );
      expect(most).toBe(limit);
      expect(live).toBe(0);
    }
  });
});

describe("createSemaphore against a backend that does not answer", () => {
  it("one attempt over every slot is bounded like one request (ttl − guard), not once per slot", async () => {
    // A store that never answers an acquire (a black hole); only the signal ends the request.
    let requests = 0;
    const silent: Backend = {
      ...memory(),
      acquireAny: undefined,
      acquire: ({ signal }) => {
        requests++;
        return new Promise((_, reject) => signal?.addEventListener("abort", () => reject(signal.reason)));
      },
    };
    const ttl = 100; // the bound: ttl − guard = 100 − (1 + 2 + 20) = 77 ms
    const sem = createSemaphore(silent, { name: "silent", limit: 20, ttl });
    const t0 = performance.now();
    const error = await sem.tryAcquire().catch((e: unknown) => e);
    const took = performance.now() - t0;
    expect(isLockError(error) && error.code).toBe("ERR_BACKEND");
    expect(String((error as Error).message)).toMatch(/acquire got no answer within 77 ms/);
    expect(took).toBeGreaterThanOrEqual(70);
    expect(took).toBeLessThan(20 * 77); // per slot, it would be 20 bounds
    expect(took).toBeLessThan(600);
    expect(requests).toBe(1); // the first slot's request used up the whole bound
  });
});

describe("giving back an acquireAny that got no answer", () => {
  // The fault: acquireAny is applied (a slot is taken) but its reply is lost, a retryable failure.
  // A double, since a real server cannot lose one reply on demand (the Redis and Durable Object
  // tests lose it at the client and count the requests on the wire).
  function lostReply(withReleaseAny: boolean, failRelease = (_key: string) => false) {
    const store = memory();
    const calls = { release: [] as string[], releaseAny: 0, inFlight: 0, mostInFlight: 0 };
    const backend: Backend = {
      ...store,
      async acquireAny(r) {
        await store.acquireAny!(r);
        throw transient();
      },
      async release(r) {
        calls.release.push(r.key);
        calls.mostInFlight = Math.max(calls.mostInFlight, ++calls.inFlight);
        await new Promise((resolve) => setTimeout(resolve, 1));
        calls.inFlight--;
        if (failRelease(r.key)) throw transient();
        return store.release(r);
      },
      releaseAny: withReleaseAny
        ? (r) => {
            calls.releaseAny++;
            return store.releaseAny!(r);
          }
        : undefined,
    };
    return { store, backend, calls };
  }
  /** Resolves once `key` is free (the give-back reached it). */
  const freed = (store: Backend, key: string) =>
    vi.waitFor(async () => expect(await store.inspect({ key: key })).toBeNull(), {
      timeout: 10_000,
      interval: 10,
    });
  const calledAtLeast = (calls: { release: string[] }, n: number) =>
    vi.waitFor(() => expect(calls.release.length).toBeGreaterThanOrEqual(n), {
      timeout: 10_000,
      interval: 10,
    });

  it("costs one releaseAny request at any limit, not one release per slot", async () => {
    const { store, backend, calls } = lostReply(true);
    const sem = createSemaphore(backend, { name: "lost", limit: 50, ttl: 60_000 });
    const error = await sem.tryAcquire().catch((e: unknown) => e);
    expect(isLockError(error) && error.code).toBe("ERR_BACKEND");
    // The slot the lost reply took (the first free one) is freed by the one give-back.
    await freed(store, slotKey("lost", 0));
    expect(calls).toMatchObject({ releaseAny: 1, release: [] });
  });

  it("without releaseAny: one release per slot, one at a time in slot order, stopping at the first that fails", async () => {
    const all = lostReply(false);
    const sem = createSemaphore(all.backend, { name: "each", limit: 5, ttl: 60_000 });
    await sem.tryAcquire().catch(() => {});
    await calledAtLeast(all.calls, 5);
    expect(all.calls.release).toEqual([0, 1, 2, 3, 4].map((slot) => slotKey("each", slot)));
    expect(all.calls.mostInFlight).toBe(1);

    const failing = lostReply(false, (key) => key === slotKey("stop", 1));
    const stop = createSemaphore(failing.backend, { name: "stop", limit: 5, ttl: 60_000 });
    await stop.tryAcquire().catch(() => {});
    await freed(failing.store, slotKey("stop", 0));
    await calledAtLeast(failing.calls, 2);
    await new Promise((r) => setTimeout(r, 100)); // what would follow the failed release, if anything
    expect(failing.calls.release).toEqual([slotKey("stop", 0), slotKey("stop", 1)]);
  });
});

describe("slot keys", () => {
  it("only what slotKey makes, below the largest limit, is a semaphore's slot (kept together by backends)", async () => {
    const { slotOf } = await import("../../src/slots.ts");
    expect(slotOf(slotKey("jobs", 3))).toEqual({ name: "jobs", slot: 3 });
    expect(slotOf("a:permit:b:permit:999")).toEqual({ name: "a:permit:b", slot: 999 });
    // Look-alikes stay plain mutexes: a leading zero, a slot no semaphore has, no digits.
    for (const key of ["jobs:permit:03", "doc:permit:12345", "jobs:permit:1000", "jobs:permit:", "jobs"]) {
      expect(slotOf(key)).toBeNull();
    }
  });
});
