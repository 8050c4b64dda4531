// Shutting a quorum down: close() waits for the requests its operations left behind (late grants
// given back, background raises, releases to a slow member), so the clients can be closed right
// after it without a member error (issue 27). Real members: three pg Pools on the harness's
// PostgreSQL, three ioredis clients on its redis-server, one of each through a TCP proxy that
// delays every chunk (test/harness/servers/tcp-fault-proxy.ts), so that stragglers exist at
// every release.
import IORedis from "ioredis";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { Backend } from "../../../src/backend.ts";
import { memory } from "../../../src/backends/memory/index.ts";
import { postgres } from "../../../src/backends/postgres/index.ts";
import { heal, quorum } from "../../../src/backends/quorum/index.ts";
import { redis } from "../../../src/backends/redis/index.ts";
import { BackendError, createElection, createMutex, createSemaphore } from "../../../src/index.ts";
import { now, sleep } from "../../../src/time.ts";
import { registerSecret } from "../../harness/secrets.ts";
import { startTcpFaultProxy, type TcpFaultProxy } from "../../harness/servers/tcp-fault-proxy.ts";

const pgCtx = inject("postgres");
const redisCtx = inject("redis");
registerSecret(pgCtx.password);
registerSecret(redisCtx.password);

/** Every chunk to or from the slow member waits this long: each of its requests takes about 2 × DELAY. */
const DELAY = 150;
/** The leases' ttl: a straggler is bounded by it (min(ttl, 10 s)), which the observation window outlasts. */
const TTL = 3_000;
const TABLES = ["shutdown_m0", "shutdown_m1", "shutdown_m2"];

let pgSlow: TcpFaultProxy;
let redisSlow: TcpFaultProxy;

/** What went wrong anywhere: member errors, client error events, unhandled rejections. */
const problems: string[] = [];
const onUnhandled = (reason: unknown): void => {
  problems.push(`unhandled rejection: ${String(reason)}`);
};

/** Three members over fresh clients, the third through the slow proxy, and how to close those clients. */
interface Members {
  members: Backend[];
  /** The clients' own close (pool.end(), redis.quit()), all at once. */
  end: () => Promise<unknown>;
  /** The slow member alone, to open its connection before the round. */
  warm: () => Promise<unknown>;
}

function pgMembers(): Members {
  const pools = [pgCtx.port, pgCtx.port, pgSlow.port].map((port) => {
    const pool = new pg.Pool({
      host: "127.0.0.1",
      port,
      user: pgCtx.user,
      password: pgCtx.password,
      database: pgCtx.database,
    });
    pool.on("error", (e) => problems.push(`pg pool error: ${e.message}`));
    return pool;
  });
  const members = pools.map((pool, i) => postgres(pool, { table: TABLES[i]! }));
  return {
    members,
    end: () => Promise.all(pools.map((p) => p.end())),
    warm: () => members[2]!.inspect({ key: "warm-up" }),
  };
}

function redisMembers(): Members {
  const clients = [redisCtx.port, redisCtx.port, redisSlow.port].map((port) => {
    const c = new IORedis({
      host: redisCtx.host,
      port,
      username: redisCtx.username,
      password: redisCtx.password,
    });
    c.on("error", (e: Error) => problems.push(`ioredis error: ${e.message}`));
    return c;
  });
  const members = clients.map((c, i) => redis(c, { prefix: `shutdown:m${i}:` }));
  return {
    members,
    end: () =>
      Promise.all(
        clients.map((c, i) => c.quit().catch((e: Error) => problems.push(`quit ${i}: ${e.message}`))),
      ),
    warm: () => members[2]!.inspect({ key: "warm-up" }),
  };
}

const STORES: [string, () => Members][] = [
  ["pg Pools", pgMembers],
  ["ioredis clients", redisMembers],
];

beforeAll(async () => {
  process.on("unhandledRejection", onUnhandled);
  pgSlow = await startTcpFaultProxy(pgCtx.port);
  redisSlow = await startTcpFaultProxy(redisCtx.port);
  const slow = {
    seed: 27,
    delay: 1,
    reset: 0,
    partition: 0,
    delayMs: [DELAY, DELAY] as [number, number],
    partitionMs: [0, 0] as [number, number],
  };
  pgSlow.setFaults(slow);
  redisSlow.setFaults(slow);
  // The tables, made once over a direct connection.
  const pool = new pg.Pool({ connectionString: pgCtx.url });
  try {
    for (const table of TABLES) await postgres(pool, { table, createTable: true }).inspect({ key: "create" });
  } finally {
    await pool.end();
  }
});

afterAll(async () => {
  process.off("unhandledRejection", onUnhandled);
  const pool = new pg.Pool({ connectionString: pgCtx.url });
  for (const table of TABLES) await pool.query(`DROP TABLE IF EXISTS "${table}"`);
  await pool.end();
  await pgSlow?.stop();
  await redisSlow?.stop();
});

/**
 * One program's life: clients made, the slow member's connection opened, `work` on a quorum of
 * them, then `close()` and the clients closed at once. Returns how long close() took.
 */
async function lifetime(make: () => Members, work: (backend: Backend) => Promise<void>): Promise<number> {
  const { members, end, warm } = make();
  try {
    await warm();
    const backend = quorum(members, { onMemberError: (e, m) => problems.push(`member ${m}: ${String(e)}`) });
    await work(backend);
    const t = now();
    await backend.close!();
    return now() - t;
  } finally {
    await end();
  }
}

/** Waits out every straggler a round without close() could leave (they run at most one ttl). */
const quiet = () => sleep(TTL + 1_000);

describe.each(STORES)("quorum close(): %s closed right after", (_store, make) => {
  it("after release, close() then the clients' own close: no member error and no unhandled rejection, over several rounds", async () => {
    problems.length = 0;
    const name = `shutdown-${crypto.randomUUID().slice(0, 8)}`;
    const took: number[] = [];
    for (let round = 0; round < 4; round++) {
      took.push(
        await lifetime(make, async (backend) => {
          const mutex = createMutex(backend, { name, ttl: TTL });
          const lease = await mutex.acquire({ timeout: 10_000 });
          // Even rounds: released at once, the slow member's grant lands later and is given back.
          // Odd rounds: held until its grant landed (part of the lease, raised when it lags),
          // so its raise and its release are in flight at close.
          if (round % 2 === 1) await sleep(3 * DELAY);
          await lease.release();
        }),
      );
    }
    await quiet();
    expect(problems).toEqual([]);
    // close() waited within the stragglers' bound (one ttl each, a give-back after a late grant).
    expect(Math.max(...took)).toBeLessThan(2 * TTL);
  });
});

describe("quorum close(): the election and the semaphore shut down the same way", () => {
  it.each(STORES)(
    "%s: lead() ended by its signal, then close(), then the clients: no member error",
    async (_store, make) => {
      problems.length = 0;
      const name = `shutdown-lead-${crypto.randomUUID().slice(0, 8)}`;
      let terms = 0;
      await lifetime(make, async (backend) => {
        const stop = new AbortController();
        const election = createElection(createMutex(backend, { name, ttl: TTL }));
        await election.lead(
          async () => {
            terms++;
            stop.abort(); // one term: resign
          },
          { signal: stop.signal, onError: (e) => problems.push(`lead: ${String(e)}`) },
        );
      });
      await quiet();
      expect(terms).toBe(1);
      expect(problems).toEqual([]);
    },
  );

  it.each(STORES)(
    "%s: permits released, then close(), then the clients: no member error",
    async (_store, make) => {
      problems.length = 0;
      const name = `shutdown-sem-${crypto.randomUUID().slice(0, 8)}`;
      await lifetime(make, async (backend) => {
        const semaphore = createSemaphore(backend, { name, limit: 2, ttl: TTL });
        const a = await semaphore.acquire({ timeout: 10_000 });
        const b = await semaphore.acquire({ timeout: 10_000 });
        expect(await semaphore.tryAcquire()).toBeNull();
        await Promise.all([a.release(), b.release()]);
      });
      await quiet();
      expect(problems).toEqual([]);
    },
  );
});

describe("quorum close(): its bound and what comes after", () => {
  it("a member that never answers: close() gives up after its timeout, aborts the rest without reporting it, and every operation after it is refused clearly", async () => {
    problems.length = 0;
    const { members, warm, end } = redisMembers();
    await warm();
    const backend = quorum(members, { onMemberError: (e, m) => problems.push(`member ${m}: ${String(e)}`) });
    const mutex = createMutex(backend, {
      name: `shutdown-bound-${crypto.randomUUID().slice(0, 8)}`,
      ttl: TTL,
    });
    redisSlow.partition();
    try {
      const lease = await mutex.acquire({ timeout: 10_000 }); // by the two others
      await lease.release();
      const t = now();
      await backend.close!({ timeout: 500 });
      const took = now() - t;
      expect(took).toBeGreaterThanOrEqual(450);
      expect(took).toBeLessThan(TTL); // not the stragglers' own bound
      await sleep(TTL + 500); // the aborted requests' own bounds pass too: nothing is reported
      expect(problems).toEqual([]);

      const refused = await mutex.tryAcquire().catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(BackendError);
      expect(refused).toMatchObject({ retryable: false });
      expect((refused as Error).message).toMatch(
        /^\[leasehold\] \[quorum\] acquire "shutdown-bound-\w+": this quorum was closed \(close\(\)\); create a new quorum\(\) to lock again$/,
      );
      await expect(backend.close!()).resolves.toBeUndefined(); // idempotent
    } finally {
      redisSlow.heal(); // the held bytes pass; their answers go to requests aborted long ago
      await end();
    }
  });

  it("a lease still held at close() is lost at its deadline (its renewals refused), and heal() is refused too", async () => {
    const backend = quorum([memory(), memory(), memory()]);
    const lease = await createMutex(backend, { name: "held-at-close", ttl: 1_000 }).acquire();
    await backend.close!(); // nothing in flight: at once
    const lost = await new Promise<unknown>((resolve) =>
      lease.signal.addEventListener("abort", () => resolve(lease.signal.reason), { once: true }),
    );
    expect(lost).toMatchObject({ code: "ERR_LEASE_LOST" });
    await expect(lease.release()).resolves.toBeUndefined(); // already lost: release does not reject
    await expect(heal(backend, ["held-at-close"])).rejects.toThrow(
      new BackendError("heal: this quorum was closed (close()); create a new quorum() to lock again", {
        backend: "quorum",
        retryable: false,
      }),
    );
  });

  it("a quorum among the members is closed with the quorum that holds it", async () => {
    const inner = quorum([memory(), memory(), memory()]);
    const outer = quorum([inner, memory(), memory()]);
    const lease = await createMutex(outer, { name: "nested" }).acquire();
    await lease.release();
    await outer.close!();
    await expect(inner.inspect({ key: "nested" })).rejects.toThrow(
      'inspect "nested": this quorum was closed (close()); create a new quorum() to lock again',
    );
  });

  it("close() checks its options", async () => {
    const backend = quorum([memory(), memory(), memory()]);
    await expect(backend.close!({ timeout: -1 })).rejects.toThrow(
      new RangeError("[leasehold] [quorum] close: timeout must be a finite number of ms >= 0, got -1"),
    );
    await expect(backend.close!("soon" as never)).rejects.toThrow(
      new TypeError("[leasehold] [quorum] close: options must be an object, got string"),
    );
    // A member's close, when present, must be a function (checkBackend).
    expect(() => quorum([memory(), memory(), { ...memory(), close: 1 as never }])).toThrow(
      new TypeError("[leasehold] [quorum] backends[2].close must be a function when present"),
    );
  });
});
