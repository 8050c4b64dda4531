// Item 14: run once per fire (src/once.ts) beside a plain lock, on one redis-server and one
// PostgreSQL: what a fire costs the instance that runs it, and what it costs a late instance.
//   plain   mutex.tryAcquire() then lease.release(): what a plain lock costs (and all it records)
//   run     runOnce(mutex, newFire, noop): the fire's acquire, then its complete (the record)
//   late    runOnce(mutex, doneFire, noop): the record found; nothing runs
// Each on upstash(...) through the Upstash REST bridge (requests counted by the bridge), redis()
// over one ioredis client and postgres() over one pg Pool. Every iteration runs each row once, in
// a fresh random order. `npx tsx bench/once.ts` runs it alone (its own servers) and prints it;
// with `--save` it also puts it into bench/results.json (the other items as they were, the
// date, commit and machine noted in once.measured) and rewrites bench/RESULTS.md.
import IORedis from "ioredis";
import pg from "pg";
import { postgres } from "../src/backends/postgres/index.ts";
import { redis } from "../src/backends/redis/index.ts";
import { upstash } from "../src/backends/upstash/index.ts";
import { type Backend, createMutex, runOnce } from "../src/index.ts";
import type { UpstashBridge } from "../test/harness/servers/upstash-bridge.ts";
import { type Summary, shuffled, summarize } from "./lib/stats.ts";

export const ONCE_OPS = ["plain", "run", "late"] as const;
export type OnceOp = (typeof ONCE_OPS)[number];

export interface OnceResult {
  iterations: number;
  warmup: number;
  /** Per backend, per op: the latency of the whole call, in ms. */
  series: Record<string, Record<OnceOp, Summary>>;
  /** Per op: the mean requests the Upstash bridge received for one call. */
  upstashRequests: Record<OnceOp, number>;
  /** When measured apart from `npm run bench` (`--save`): the date, commit and machine. */
  measured?: string;
}

const TTL = 15_000;
const noop = () => undefined;

/** The three calls on one backend; each resolves when done and throws if it did not do its job. */
function calls(backend: Backend, tag: string): Record<OnceOp | "record", () => Promise<void>> {
  const mutex = createMutex(backend, { name: `${tag}-${backend.name}`, ttl: TTL, owner: "bench" });
  let fire = 0;
  const done = Date.UTC(2026, 10, 24);
  return {
    async record() {
      await runOnce(mutex, done, noop);
    },
    async plain() {
      const lease = await mutex.tryAcquire();
      if (!lease) throw new Error(`bench: ${backend.name}: the plain lock was held`);
      await lease.release();
    },
    async run() {
      const r = await runOnce(mutex, `fire-${++fire}`, noop);
      if (!r.ran) throw new Error(`bench: ${backend.name}: a new fire did not run (${r.reason})`);
    },
    async late() {
      const r = await runOnce(mutex, done, noop);
      if (r.ran || r.reason !== "done") throw new Error(`bench: ${backend.name}: a done fire ran again`);
    },
  };
}

/** Runs item 14 against the bridge, redis-server on `redisPort` and PostgreSQL at `postgresUrl`. */
export async function runOnceBench(
  target: { bridge: UpstashBridge; redisPort: number; postgresUrl: string },
  iterations: number,
  warmup: number,
): Promise<OnceResult> {
  const client = new IORedis({ host: "127.0.0.1", port: target.redisPort });
  const pool = new pg.Pool({ connectionString: target.postgresUrl, max: 4 });
  const tag = `bench-once-${crypto.randomUUID().slice(0, 8)}`;
  try {
    const up = upstash({ url: target.bridge.url, token: target.bridge.token });
    const backends: Record<string, Record<OnceOp | "record", () => Promise<void>>> = {
      upstash: calls(up, tag),
      redis: calls(redis(client), tag),
      postgres: calls(postgres(pool, { createTable: true }), tag),
    };
    // The late row's fire, recorded once on each backend (its retain, 24 h, outlasts the run).
    for (const c of Object.values(backends)) await c.record();
    // Requests per call on the bridge.
    const upstashRequests = {} as Record<OnceOp, number>;
    for (const op of ONCE_OPS) {
      target.bridge.resetStats();
      for (let i = 0; i < 20; i++) await backends.upstash![op]();
      upstashRequests[op] = target.bridge.stats().total / 20;
    }
    const samples: Record<string, Record<OnceOp, number[]>> = {};
    for (const b of Object.keys(backends)) samples[b] = { plain: [], run: [], late: [] };
    const rows = Object.keys(backends).flatMap((b) => ONCE_OPS.map((op) => [b, op] as const));
    for (let i = 0; i < warmup + iterations; i++) {
      for (const [b, op] of shuffled(rows)) {
        const t0 = performance.now();
        await backends[b]![op]();
        if (i >= warmup) samples[b]![op].push(performance.now() - t0);
      }
    }
    const series = Object.fromEntries(
      Object.entries(samples).map(([b, s]) => [
        b,
        { plain: summarize(s.plain), run: summarize(s.run), late: summarize(s.late) },
      ]),
    );
    return { iterations, warmup, series, upstashRequests };
  } finally {
    await client.quit();
    await pool.end();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { runAlone } = await import("./lib/alone.ts");
  await runAlone("once", "bench/once.ts", runOnceBench, (r) =>
    console.log(`upstash requests per call: ${JSON.stringify(r.upstashRequests)}`),
  );
}
