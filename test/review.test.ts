// Regression tests for defects a review of src/ found (each comment says what was wrong).
import { afterEach, describe, expect, it, vi } from "vitest";
import { azureBlob } from "../src/backends/azure-blob/index.ts";
import { memory } from "../src/backends/memory.ts";
import { createMutex, type FetchLike, isLockError, LockTimeoutError } from "../src/index.ts";
import { sleep } from "../src/time.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe("stall detection", () => {
  // With stopMargin 0, a renewal timer 1 ms late counted as a stall and cost the lease.
  it("ordinary timer lateness within the guard's allowance is not a stall, even with stopMargin 0", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance", "Date"] });
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

describe("lead pauses after every term", () => {
  // A task that returned normally made the loop re-acquire at once: followers starved, and a
  // task that returned immediately spun on microtasks so a timer-driven abort never ran.
  it("followers get terms when the leader's task ends normally", async () => {
    const store = memory();
    const stop = new AbortController();
    const terms: Record<string, number> = { a: 0, b: 0 };
    const loop = (who: string) =>
      createMutex(store, { name: "turns", ttl: 1_000, retryDelay: 50, owner: who }).lead(
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
    const mutex = createMutex(memory(), { name: "spin", retryDelay: 10 });
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

  it("rejects a bad stopTimeout and watch interval", async () => {
    const mutex = createMutex(memory(), { name: "opts" });
    await expect(mutex.lead(async () => {}, { stopTimeout: -1 })).rejects.toThrow(RangeError);
    expect(() => mutex.watch({ interval: Number.NaN })).toThrow(/interval must be a finite number/);
  });
});

describe("durations beyond setTimeout's range", () => {
  // Node and Bun fire a setTimeout above 2^31 − 1 ms after 1 ms: acquire({ timeout: 3e9 })
  // rejected at once, lead's stopTimeout: Infinity released after 1 ms.
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

  it("lead({ stopTimeout: Infinity }) waits for the task before releasing", async () => {
    const mutex = createMutex(memory(), { name: "grace", retryDelay: 20 });
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

describe("watch", () => {
  // A single wake slot stranded the first of two pending next() calls forever.
  it("settles every pending next() when it ends", async () => {
    const watcher = createMutex(memory(), { name: "w" }).watch({ interval: 1_000 });
    const first = watcher.next();
    const second = watcher.next();
    await sleep(20);
    await watcher.return?.();
    const results = await Promise.race([Promise.all([first, second]), sleep(500).then(() => "stuck")]);
    expect(results).not.toBe("stuck");
  });
});

describe("azure bearer tokens", () => {
  // The shared token refresh carried the first caller's signal: its timeout failed every
  // concurrent caller with a non-retryable ERR_BACKEND_AUTH.
  it("one caller's abort does not fail another caller waiting for the same token", async () => {
    const fetch: FetchLike = async () => ({ status: 404, headers: new Headers(), text: async () => "" });
    const credential = {
      getToken: async () => {
        await sleep(100);
        return { token: "token-for-tests-0123456789", expiresOnTimestamp: Date.now() + 3_600_000 };
      },
    };
    const backend = azureBlob({
      accountUrl: "https://acct.blob.core.windows.net",
      credential,
      container: "locks",
      fetch,
    });
    const hurried = backend.inspect("x", AbortSignal.timeout(10)).catch((e: unknown) => e);
    const patient = backend.inspect("y");
    expect(isLockError(await hurried) || (await hurried) instanceof Error).toBe(true);
    await expect(patient).resolves.toBeNull();
  });

  it("a getToken that timed out is retryable; any other failure is an auth error", async () => {
    const fetch: FetchLike = async () => ({ status: 404, headers: new Headers(), text: async () => "" });
    const failing = (name: string) => ({
      getToken: async () => {
        const error = new Error("no token");
        error.name = name;
        throw error;
      },
    });
    const inspect = (name: string) =>
      azureBlob({
        accountUrl: "https://acct.blob.core.windows.net",
        credential: failing(name),
        container: "locks",
        fetch,
      })
        .inspect("x")
        .catch((e: unknown) => e as { code: string; retryable: boolean });
    expect(await inspect("TimeoutError")).toMatchObject({ code: "ERR_BACKEND", retryable: true });
    expect(await inspect("AuthenticationError")).toMatchObject({
      code: "ERR_BACKEND_AUTH",
      retryable: false,
    });
  });
});
