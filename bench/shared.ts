// Item 15: shared mode (readers and writers, docs/DESIGN.md §18) beside the exclusive lease, on
// one redis-server and one PostgreSQL: what a reader's lease costs against a writer's.
//   exclusive  mutex.tryAcquire() then lease.release() on a free lock
//   shared     mutex.tryAcquire({ mode: "shared" }) then lease.release() on a free lock
//   beside     the same while another reader holds the lock (a read-mostly lock's usual case)
// Each on upstash(...) through the Upstash REST bridge (requests counted by the bridge), redis()
// over one ioredis client and postgres() over one pg Pool when it takes shared mode. Every
// iteration runs each row once, in a fresh random order. `npx tsx bench/shared.ts` runs it alone
// (its own servers) and prints it; with `--save` it also puts it into bench/results.json.
import IORedis from "ioredis";
import pg from "pg";
import { postgres } from "../src/backends/postgres/index.ts";
import { redis } from "../src/backends/redis/index.ts";
import { upstash } from "../src/backends/upstash/index.ts";
import { type Backend, capabilities, createMutex, type Lease } from "../src/index.ts";
import type { AloneTarget } from "./lib/alone.ts";
import { type Summary, shuffled, summarize } from "./lib/stats.ts";

export const SHARED_OPS = ["exclusive", "shared", "beside"] as const;
export type SharedOp = (typeof SHARED_OPS)[number];

export interface SharedResult {
  iterations: number;
  warmup: number;
  /** Per backend, per op: the latency of tryAcquire and release together, in ms. */
  series: Record<string, Record<SharedOp, Summary>>;
  /** Per op: the mean requests the Upstash bridge received for one acquire and release. */
  upstashRequests: Record<SharedOp, number>;
  /** When measured apart from `npm run bench` (`--save`): the date, commit and machine. */
  measured?: string;
}

const TTL = 15_000;

/** The rows on one backend, and the reader the `beside` row reads beside (released by `close`). */
async function calls(backend: Backend, tag: string) {
  const make = (name: string) => createMutex(backend, { name: `${tag}-${name}`, ttl: TTL, owner: "bench" });
  const cycle = (mutex: ReturnType<typeof make>, shared: boolean) => async () => {
    const lease: Lease | null = await mutex.tryAcquire(shared ? { mode: "shared" } : {});
    if (!lease) throw new Error(`bench: ${backend.name}: ${mutex.name} was held`);
    await lease.release();
  };
  const besideName = make("beside");
  const other = await besideName.acquire({ mode: "shared", timeout: 5_000 });
  const ops: Record<SharedOp, () => Promise<void>> = {
    exclusive: cycle(make("exclusive"), false),
    shared: cycle(make("shared"), true),
    beside: cycle(besideName, true),
  };
  return { ops, close: () => other.release() };
}

/** Runs item 15 against the bridge, redis-server on `redisPort` and PostgreSQL at `postgresUrl`. */
export async function runSharedBench(
  target: AloneTarget,
  iterations: number,
  warmup: number,
): Promise<SharedResult> {
  const client = new IORedis({ host: "127.0.0.1", port: target.redisPort });
  const pool = new pg.Pool({ connectionString: target.postgresUrl, max: 4 });
  const tag = `bench-shared-${crypto.randomUUID().slice(0, 8)}`;
  const candidates: Record<string, Backend> = {
    upstash: upstash({ url: target.bridge.url, token: target.bridge.token }),
    redis: redis(client),
    postgres: postgres(pool, { createTable: true }),
  };
  const backends: Record<string, Awaited<ReturnType<typeof calls>>> = {};
  try {
    for (const [id, b] of Object.entries(candidates))
      if (capabilities(b).shared) backends[id] = await calls(b, tag);
    // Requests per call on the bridge.
    const upstashRequests = {} as Record<SharedOp, number>;
    for (const op of SHARED_OPS) {
      target.bridge.resetStats();
      for (let i = 0; i < 20; i++) await backends.upstash!.ops[op]();
      upstashRequests[op] = target.bridge.stats().total / 20;
    }
    const samples: Record<string, Record<SharedOp, number[]>> = {};
    for (const b of Object.keys(backends)) samples[b] = { exclusive: [], shared: [], beside: [] };
    const rows = Object.keys(backends).flatMap((b) => SHARED_OPS.map((op) => [b, op] as const));
    for (let i = 0; i < warmup + iterations; i++) {
      for (const [b, op] of shuffled(rows)) {
        const t0 = performance.now();
        await backends[b]!.ops[op]();
        if (i >= warmup) samples[b]![op].push(performance.now() - t0);
      }
    }
    const series = Object.fromEntries(
      Object.entries(samples).map(([b, s]) => [
        b,
        { exclusive: summarize(s.exclusive), shared: summarize(s.shared), beside: summarize(s.beside) },
      ]),
    );
    return { iterations, warmup, series, upstashRequests };
  } finally {
    await Promise.all(Object.values(backends).map((b) => b.close()));
    await client.quit();
    await pool.end();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { runAlone } = await import("./lib/alone.ts");
  await runAlone("shared", "bench/shared.ts", runSharedBench, (r) =>
    console.log(`upstash requests per call: ${JSON.stringify(r.upstashRequests)}`),
  );
}
