// Shared mode (docs/DESIGN.md §18) in the core, over the memory backend: the mode option and its
// refusals, lease.mode, shared leases renewing and releasing on their own, and which calls mark a
// writer waiting. The conformance suite's own shared-mode checks (src/testing/shared-mode.ts) run
// against memory stores broken on purpose, one way each, and must fail.
import { describe, expect, it } from "vitest";
import { BACKENDS } from "../../scripts/backends.mjs";
import type { AcquireRequest, Backend } from "../../src/backend.ts";
import { azureBlob } from "../../src/backends/azure-blob/index.ts";
import { durableObject } from "../../src/backends/cloudflare/index.ts";
import { denoKv, type KvLike } from "../../src/backends/deno-kv/index.ts";
import { dynamodb } from "../../src/backends/dynamodb/index.ts";
import { memory } from "../../src/backends/memory/index.ts";
import { postgres } from "../../src/backends/postgres/index.ts";
import { quorum } from "../../src/backends/quorum/index.ts";
import { redis } from "../../src/backends/redis/index.ts";
import { upstash } from "../../src/backends/upstash/index.ts";
import {
  BackendError,
  capabilities,
  createMutex,
  createSemaphore,
  type Lease,
  type LockEvent,
} from "../../src/index.ts";
import { conformanceChecks } from "../../src/testing/index.ts";
import { sleep } from "../../src/time.ts";

const shared = { mode: "shared" } as const;

describe("the mode option", () => {
  it('a backend without shared leases refuses mode "shared" at the call with a TypeError naming it, before any request', async () => {
    const store = memory({ expiry: "observed" });
    let requests = 0;
    const counted: Backend = {
      ...store,
      acquire: (r) => {
        requests++;
        return store.acquire(r);
      },
    };
    const mutex = createMutex(counted, { name: "doc" });
    const named = /the memory backend cannot hold shared leases .*mode "shared" needs one that can/;
    await expect(mutex.tryAcquire(shared)).rejects.toThrow(TypeError);
    await expect(mutex.tryAcquire(shared)).rejects.toThrow(named);
    await expect(mutex.acquire({ ...shared, timeout: 1_000 })).rejects.toThrow(named);
    await expect(mutex.run(() => 1, shared)).rejects.toThrow(named);
    expect(requests).toBe(0);
    // The exclusive mode is still there, by default and by name.
    const lease = await mutex.tryAcquire({ mode: "exclusive" });
    expect(lease?.mode).toBe("exclusive");
    await lease?.release();
  });

  it("azure-blob, dynamodb, deno-kv and a quorum refuse it at the call, naming themselves, before any request; capabilities() says which can", async () => {
    let requests = 0;
    const fetch = async (): Promise<Response> => {
      requests++;
      throw new Error("no request may be sent");
    };
    // No store behind these: refusing must not reach one (the fetch and the KV throw if it does).
    const kv = new Proxy({} as KvLike, {
      get: () => () => {
        requests++;
        throw new Error("no request may be sent");
      },
    });
    const refusing = [
      azureBlob({ connectionString: "UseDevelopmentStorage=true", container: "locks", fetch }),
      dynamodb({
        table: "locks",
        region: "us-east-1",
        credentials: { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "x" },
        fetch,
      }),
      denoKv(kv),
      quorum([memory(), memory(), memory()]),
    ];
    for (const backend of refusing) {
      expect(capabilities(backend).shared).toBe(false);
      const mutex = createMutex(backend, { name: "doc" });
      const named = new RegExp(`the ${backend.name} backend cannot hold shared leases`);
      await expect(mutex.tryAcquire(shared)).rejects.toThrow(named);
      await expect(mutex.acquire({ ...shared, timeout: 1_000 })).rejects.toThrow(named);
    }
    expect(requests).toBe(0);
    expect(capabilities(memory())).toEqual({
      shared: true,
      queued: false,
      once: true,
      watch: true,
      batch: false,
    });
    expect(capabilities(memory({ expiry: "observed" })).shared).toBe(false);
  });

  it("the table of backends (README's list of which take shared mode) says what capabilities() says of each", () => {
    // Made without a store behind them: asking what they can sends nothing.
    const unused = async (): Promise<never> => {
      throw new Error("no request may be sent");
    };
    const made: Record<string, Backend> = {
      memory: memory(),
      upstash: upstash({ url: "https://example.upstash.io", token: "t" }),
      "azure-blob": azureBlob({
        connectionString: "UseDevelopmentStorage=true",
        container: "locks",
        fetch: unused,
      }),
      redis: redis({ evalsha: unused, eval: unused }),
      postgres: postgres({ query: unused }),
      quorum: quorum([memory(), memory(), memory()]),
      "deno-kv": denoKv({ getMany: unused, atomic: unused as never }),
      cloudflare: durableObject({
        url: "https://locks.example.com",
        token: "a-secret-of-32-characters-or-more!",
      }),
      dynamodb: dynamodb({
        table: "locks",
        region: "us-east-1",
        credentials: { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "x" },
        fetch: unused,
      }),
    };
    expect(Object.keys(made).sort()).toEqual(BACKENDS.map((row) => row.name).sort());
    for (const row of BACKENDS)
      expect({ name: row.name, shared: capabilities(made[row.name]!).shared }).toEqual({
        name: row.name,
        shared: row.shared === true,
      });
  });

  it("an unknown mode is a RangeError (a string) or a TypeError (anything else) naming the valid ones", async () => {
    const mutex = createMutex(memory(), { name: "doc" });
    const valid = /mode must be "shared" or "exclusive", got "read"/;
    await expect(mutex.tryAcquire({ mode: "read" as never })).rejects.toThrow(RangeError);
    await expect(mutex.acquire({ mode: "read" as never })).rejects.toThrow(valid);
    await expect(mutex.run(() => 1, { mode: 1 as never })).rejects.toThrow(TypeError);
    await expect(mutex.run(() => 1, { mode: null as never })).rejects.toThrow(/got null/);
  });

  it('lease.mode is "exclusive" by default, "shared" when asked; a permit is "exclusive"', async () => {
    const store = memory();
    const a = await createMutex(store, { name: "a" }).acquire();
    const b = await createMutex(store, { name: "b" }).acquire(shared);
    const permit = await createSemaphore(store, { name: "s", limit: 2 }).acquire();
    expect([a.mode, b.mode, permit.mode]).toEqual(["exclusive", "shared", "exclusive"]);
    await Promise.all([a.release(), b.release(), permit.release()]);
  });
});

describe("what a shared lease reports", () => {
  it("holder() counts the readers and names the newest; the acquired event carries the mode", async () => {
    const store = memory();
    const events: LockEvent[] = [];
    const make = (owner: string) =>
      createMutex(store, { name: "doc", owner, onEvent: (e) => events.push(e) });
    const a = await make("a").acquire(shared);
    const b = await make("b").tryAcquire(shared);
    expect(await make("x").holder()).toEqual({ owner: "b", token: b?.token, readers: 2 });
    await Promise.all([a.release(), b?.release()]);
    const w = await make("w").acquire();
    expect(await make("x").holder()).toEqual({ owner: "w", token: w.token });
    await w.release();
    const modes = events.flatMap((e) => (e.type === "acquired" ? [e.mode] : []));
    expect(modes).toEqual(["shared", "shared", "exclusive"]);
  });
});

describe("shared leases", () => {
  it("renew in the background past their ttl, each on its own, and keep the writer out until both are released", async () => {
    const store = memory();
    const make = (owner: string) => createMutex(store, { name: "doc", ttl: 300, owner });
    const one = (await make("r1").tryAcquire(shared))!;
    const two = (await make("r2").tryAcquire(shared))!;
    await sleep(700);
    expect([one.valid, two.valid]).toEqual([true, true]);
    expect(await make("w").tryAcquire()).toBeNull();
    await one.release();
    expect(one.signal.aborted).toBe(true);
    expect(two.signal.aborted).toBe(false);
    expect(await make("w").tryAcquire()).toBeNull();
    await two.release();
    const w = await make("w").tryAcquire();
    expect(w?.token).toBeGreaterThan(two.token);
    await w?.release();
  });

  it("run() in shared mode lets two readers in at once", async () => {
    const mutex = createMutex(memory(), { name: "doc" });
    let inside = 0;
    let most = 0;
    const read = () =>
      mutex.run(
        async (_signal, lease: Lease) => {
          expect(lease.mode).toBe("shared");
          most = Math.max(most, ++inside);
          await sleep(50);
          inside--;
        },
        { ...shared, timeout: 5_000 },
      );
    await Promise.all([read(), read()]);
    expect(most).toBe(2);
  });
});

describe("writer preference: who marks a writer waiting", () => {
  const setup = () => {
    const store = memory();
    return (owner: string) => createMutex(store, { name: "doc", owner, retryDelay: 20 });
  };

  it("tryAcquire and acquire({ timeout: 0 }) never wait, so they leave no mark: readers go on", async () => {
    const make = setup();
    const reader = (await make("r1").tryAcquire(shared))!;
    expect(await make("w").tryAcquire()).toBeNull();
    await expect(make("w").acquire({ timeout: 0 })).rejects.toThrow(/could not acquire/);
    const next = await make("r2").tryAcquire(shared);
    expect(next).not.toBeNull();
    await Promise.all([reader.release(), next?.release()]);
  });

  it("a waiting acquire() keeps new readers out; its timeout removes the mark at once", async () => {
    const make = setup();
    const reader = (await make("r1").tryAcquire(shared))!;
    const waiting = make("w").acquire({ timeout: 200 });
    await sleep(50);
    expect(await make("r2").tryAcquire(shared)).toBeNull();
    await expect(waiting).rejects.toThrow(/could not acquire "doc" within 200 ms/);
    await sleep(10); // the mark's removal is sent in the background
    const next = await make("r3").tryAcquire(shared);
    expect(next).not.toBeNull();
    await Promise.all([reader.release(), next?.release()]);
  });
});

describe("a waiting writer's mark", () => {
  /** memory() with its acquire requests' waiters and its releaseShared calls recorded. */
  const recorded = (fail?: (r: AcquireRequest) => Error | undefined) => {
    const store = memory();
    const waiters: (string | undefined)[] = [];
    const unmarks: string[] = [];
    const backend: Backend = {
      ...store,
      acquire: async (r) => {
        waiters.push(r.waiter);
        const error = fail?.(r);
        if (error) throw error;
        return store.acquire(r);
      },
      releaseShared: async (r) => {
        unmarks.push(r.nonce);
        return store.releaseShared!(r);
      },
    };
    return { store, backend, waiters, unmarks };
  };

  it("is removed on give-up only when an attempt may have left it: refused, or sent and unanswered", async () => {
    // Refused, then the timeout: one removal, with the waiter's id.
    const refused = recorded();
    const reader = (await createMutex(refused.store, { name: "doc" }).tryAcquire(shared))!;
    await expect(
      createMutex(refused.backend, { name: "doc", retryDelay: 20 }).acquire({ timeout: 100 }),
    ).rejects.toThrow();
    await sleep(10); // sent in the background
    expect(refused.unmarks).toEqual([refused.waiters[0]]);
    await reader.release();
    // A failure that is not retried (the request was not applied): nothing to remove.
    const denied = recorded(() => new BackendError("denied", { backend: "memory", retryable: false }));
    await expect(createMutex(denied.backend, { name: "doc" }).acquire({ timeout: 1_000 })).rejects.toThrow(
      /denied/,
    );
    await sleep(10);
    expect(denied.waiters).toHaveLength(1);
    expect(denied.unmarks).toEqual([]);
    // A retried failure (the request may have been applied): removed.
    const lost = recorded((r) =>
      r.waiter ? new BackendError("no answer", { backend: "memory", retryable: true }) : undefined,
    );
    await expect(
      createMutex(lost.backend, { name: "doc", retryDelay: 20 }).acquire({ timeout: 100, onError: () => {} }),
    ).rejects.toThrow();
    await sleep(10);
    expect(lost.unmarks).toEqual([lost.waiters[0]]);
  });

  it("outlives the pauses between attempts whatever retryDelay is: a stream of readers cannot keep the writer out", async () => {
    const store = memory();
    const make = (owner: string, ttl: number, retryDelay = 1_000) =>
      createMutex(store, { name: "doc", owner, ttl, retryDelay, renew: false });
    // Readers come every 100 ms and each holds 600 ms: the lock is never free of them.
    let streaming = true;
    const stream = (async () => {
      for (let i = 0; streaming; i++) {
        const r = await make(`r${i}`, 1_000).tryAcquire(shared);
        if (r) setTimeout(() => void r.release(), 600);
        await sleep(100);
      }
    })();
    await sleep(150);
    // A mark of 150 ms, attempts that would back off to 2 s apart.
    const started = performance.now();
    const writer = await make("w", 150, 2_000).acquire({ timeout: 5_000 });
    const waited = performance.now() - started;
    streaming = false;
    await stream;
    // The readers present when it arrived hold ≤ 600 ms; then nobody new got in.
    expect(waited).toBeLessThan(2_000);
    await writer.release();
  });

  it("goes with the grant on every key: readers get in at once after writers that waited", async () => {
    const store = memory();
    for (let i = 0; i < 50; i++) {
      const name = `k${i}`;
      const holder = (await createMutex(store, { name }).tryAcquire())!;
      const waiting = createMutex(store, { name, retryDelay: 5 }).acquire({ timeout: 2_000 });
      await sleep(15); // refused at least once: marked
      await holder.release();
      await (await waiting).release();
    }
    // Every key's marks went with their grants: a reader gets in on each at once.
    for (let i = 0; i < 50; i++)
      expect(await createMutex(store, { name: `k${i}` }).tryAcquire(shared)).not.toBeNull();
  });
});

describe("the conformance suite's shared-mode checks fail on a broken store", () => {
  /** Runs the conformance check whose name matches `pattern` on `backend`. */
  const run = (backend: () => Backend, pattern: RegExp): Promise<void> => {
    const found = conformanceChecks({ backend, ttl: 300 }).filter((c) => pattern.test(c.name));
    if (found.length !== 1) throw new Error(`${found.length} checks match ${pattern}`);
    return found[0]!.run();
  };
  const broken = (change: (store: Backend) => Partial<Backend>) => (): Backend => {
    const store = memory();
    return { ...store, ...change(store) };
  };
  const five = /^shared mode, where offered: 5 readers/;
  const waits = /^shared mode, where offered: a waiting writer/;
  const givesUp = /^shared mode, where offered: a writer that gives up/;
  const expires = /^shared mode, where offered: a reader that stops renewing/;

  it("passes on memory()", async () => {
    for (const pattern of [five, waits, givesUp, expires]) await run(() => memory(), pattern);
  });

  it("fails a store whose shared leases exclude each other (acquireShared is acquire)", async () => {
    const store = broken((s) => ({
      acquireShared: s.acquire,
      renewShared: s.renew,
      releaseShared: s.release,
    }));
    await expect(run(store, five)).rejects.toThrow(/reader 1 got no shared lease beside 1 readers/);
  });

  it("fails a store whose acquire ignores the readers", async () => {
    const store = broken((s) => {
      const plain = memory();
      return { acquire: plain.acquire, renew: plain.renew, release: plain.release, inspect: s.inspect };
    });
    await expect(run(store, five)).rejects.toThrow(/an exclusive lease was granted beside 5 readers/);
  });

  it("fails a store that lets new readers past a waiting writer (no mark)", async () => {
    const store = broken((s) => ({ acquire: (r) => s.acquire({ ...r, waiter: undefined as never }) }));
    await expect(run(store, waits)).rejects.toThrow(/a new reader got in while a writer waited/);
  });

  it("fails a store that keeps a writer's mark after it gave up", async () => {
    // The broken part: a release with a waiter's id does nothing (the mark stays its ttl).
    const keeping = broken((s) => {
      const waiters = new Set<string>();
      return {
        acquire: (r) => {
          if (r.waiter) waiters.add(r.waiter);
          return s.acquire(r);
        },
        releaseShared: (r) => (waiters.has(r.nonce) ? Promise.resolve() : s.releaseShared!(r)),
      };
    });
    await expect(run(keeping, givesUp)).rejects.toThrow(/no new reader got in within/);
  });

  it("fails a store whose shared leases never expire", async () => {
    const store = broken((s) => ({ acquireShared: (r) => s.acquireShared!({ ...r, ttl: 60_000 }) }));
    await expect(run(store, expires)).rejects.toThrow(/could not acquire/);
  });

  it("fails a store whose renewShared answers true for a nonce it does not hold", async () => {
    const store = broken((s) => ({
      renewShared: async (r) => (await s.renewShared!(r)) || true,
    }));
    await expect(run(store, expires)).rejects.toThrow(/renewShared of an unknown nonce succeeded/);
  });
});
