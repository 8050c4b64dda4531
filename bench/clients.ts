// Item 7: bring your own client. acquire, renew and release latency of the backends over a
// client the app already has, against the usual alternatives on the very same client:
//   redis      one ioredis client to redis-server over loopback TCP:
//              leasehold  createMutex(redis(client)).tryAcquire(), lease.renew(), lease.release()
//              backend    redis(client)'s acquire / renew / release alone (no core)
//              redlock    redlock v5 on [client] (acquire / extend / release), retryCount 0
//              redis-semaphore  its Mutex (tryAcquire / refresh / release), refreshInterval 0
//   postgres   one pg Pool to PostgreSQL over loopback TCP:
//              leasehold, backend as above, over postgres(pool)
//              advisory   a hand-written session advisory lock: acquire = check out a connection
//                         and SELECT pg_try_advisory_lock($1); renew = SELECT 1 on that held
//                         connection (an advisory lock has no expiry to extend: this is the
//                         liveness check a careful holder does); release = SELECT
//                         pg_advisory_unlock($1) and return the connection.
// Every iteration runs each contender's full cycle once, in a fresh random order, each on its
// own lock name. Runs in the bench's process (the servers are processes of their own), with
// leasehold's side (src/ and bench/lib/cycles.ts) bundled as an app ships it (bench/lib/bundle.ts).
import { readFileSync } from "node:fs";
import IORedis from "ioredis";
import pg from "pg";
import { Mutex as SemaphoreMutex } from "redis-semaphore";
import Redlock from "redlock";
import type * as Postgres from "../src/backends/postgres/index.ts";
import type * as Redis from "../src/backends/redis/index.ts";
import { OPS, type Op } from "./latency.ts";
import { bundleSrc } from "./lib/bundle.ts";
import type * as Cycles from "./lib/cycles.ts";
import { type Cycle, time3 } from "./lib/cycles.ts";
import { serverTime } from "./lib/slowlog.ts";
import { type Summary, shuffled, summarize } from "./lib/stats.ts";

export interface ClientsResult {
  iterations: number;
  warmup: number;
  /** Per backend, per contender, per operation. */
  series: Record<"redis" | "postgres", Record<string, Record<Op, Summary>>>;
  /**
   * Redis' own time (µs, median, from SLOWLOG) of each operation of the redis contenders that
   * send one command per operation; absent from runs before issue 29's seventh session.
   */
  serverTime?: Record<string, Record<Op, number>>;
  versions: Record<string, string>;
}

const TTL = 15_000;

async function measure(cycles: Record<string, Cycle>, iterations: number, warmup: number) {
  const samples: Record<string, Record<Op, number[]>> = {};
  for (const c of Object.keys(cycles)) samples[c] = { acquire: [], renew: [], release: [] };
  for (let i = 0; i < warmup + iterations; i++) {
    for (const c of shuffled(Object.keys(cycles))) {
      const [t0, t1, t2, t3] = await cycles[c]!();
      if (i < warmup) continue;
      samples[c]!.acquire.push(t1 - t0);
      samples[c]!.renew.push(t2 - t1);
      samples[c]!.release.push(t3 - t2);
    }
  }
  return Object.fromEntries(
    Object.entries(samples).map(([c, s]) => [c, Object.fromEntries(OPS.map((op) => [op, summarize(s[op])]))]),
  ) as Record<string, Record<Op, Summary>>;
}

/** Runs item 7 against redis-server on `redisPort` and PostgreSQL at `postgresUrl`. */
export async function runClients(
  target: { redisPort: number; postgresUrl: string },
  iterations: number,
  warmup: number,
): Promise<ClientsResult> {
  const bundle = await bundleSrc({
    cycles: "bench/lib/cycles.ts",
    redis: "src/backends/redis/index.ts",
    postgres: "src/backends/postgres/index.ts",
  });
  const { ours } = await bundle.load<typeof Cycles>("cycles");
  const { redis } = await bundle.load<typeof Redis>("redis");
  const { postgres } = await bundle.load<typeof Postgres>("postgres");
  const client = new IORedis({ host: "127.0.0.1", port: target.redisPort });
  const admin = new IORedis({ host: "127.0.0.1", port: target.redisPort });
  const pool = new pg.Pool({ connectionString: target.postgresUrl, max: 4 });
  try {
    const redlock = new Redlock([client], { retryCount: 0 });
    const redisCycles: Record<string, Cycle> = {
      ...ours(redis(client), "bench-clients", TTL),
      redlock: async () => {
        let lock: Awaited<ReturnType<typeof redlock.acquire>>;
        return time3(
          async () => {
            lock = await redlock.acquire(["bench-clients-redlock"], TTL);
          },
          async () => {
            lock = await lock.extend(TTL);
          },
          () => lock.release(),
        );
      },
      "redis-semaphore": async () => {
        const m = new SemaphoreMutex(client, "bench-clients-semaphore", {
          lockTimeout: TTL,
          acquireAttemptsLimit: 1,
          refreshInterval: 0,
        });
        // Its refresh is what its timer runs; without the timer (refreshInterval 0), called here.
        const refresh = (m as unknown as { _refresh(): Promise<boolean> })._refresh.bind(m);
        return time3(
          async () => {
            if (!(await m.tryAcquire())) throw new Error("bench: redis-semaphore tryAcquire failed");
          },
          async () => {
            if (!(await refresh())) throw new Error("bench: redis-semaphore refresh failed");
          },
          () => m.release(),
        );
      },
    };
    await postgres(pool, { createTable: true }).inspect({ key: "bench" }); // the table, once
    let held: pg.PoolClient | undefined;
    const postgresCycles: Record<string, Cycle> = {
      ...ours(postgres(pool), "bench-clients", TTL),
      advisory: () =>
        time3(
          async () => {
            held = await pool.connect();
            const { rows } = await held.query("SELECT pg_try_advisory_lock($1) AS ok", [4_242]);
            if (rows[0]?.ok !== true) throw new Error("bench: advisory lock taken");
          },
          () => held!.query("SELECT 1"),
          async () => {
            await held!.query("SELECT pg_advisory_unlock($1)", [4_242]);
            held!.release();
          },
        ),
    };
    const series = {
      redis: await measure(redisCycles, iterations, warmup),
      postgres: await measure(postgresCycles, iterations, warmup),
    };
    // After the timed run (SLOWLOG on every command costs Redis a little).
    const own: Record<string, Record<Op, number>> = {};
    for (const c of ["leasehold", "redlock", "redis-semaphore"]) {
      const [acquire, renew, release, ...more] = await serverTime(admin, client, redisCycles[c]!);
      if (release === undefined || more.length)
        throw new Error(`bench: ${c} sent ${3 + more.length} commands per cycle, not one per operation`);
      own[c] = { acquire: acquire!, renew: renew!, release };
    }
    const server = await client.info("server");
    const pgVersion = (await pool.query("SHOW server_version")).rows[0]?.server_version as string;
    const version = (pkg: string) =>
      (
        JSON.parse(readFileSync(new URL(`../node_modules/${pkg}/package.json`, import.meta.url), "utf8")) as {
          version: string;
        }
      ).version;
    return {
      iterations,
      warmup,
      series,
      serverTime: own,
      versions: {
        "redis-server": /redis_version:(\S+)/.exec(server)?.[1] ?? "?",
        postgresql: pgVersion,
        ...Object.fromEntries(["ioredis", "redlock", "redis-semaphore", "pg"].map((p) => [p, version(p)])),
      },
    };
  } finally {
    client.disconnect();
    admin.disconnect();
    await pool.end();
    bundle.remove();
  }
}
