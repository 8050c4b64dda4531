// Item 12: a semaphore's acquire. tryAcquire latency of a permit of a semaphore of limit 1, 5 and
// 50 with limit − 1 permits already held by others (the acquire must find the last free slot),
// then its release, on one redis-server:
//   leasehold upstash   createSemaphore(upstash(...)) through the Upstash REST bridge: one
//                       ACQUIRE_ANY script per acquire (acquireAny), whatever the limit
//   leasehold redis     createSemaphore(redis(client)) over one ioredis client, the same script
//   leasehold cloudflare createSemaphore(durableObject({ url, token })) through the lockHandler
//                       route of the LeaseholdLock object in workerd (Miniflare): one acquireAny
//                       request to the object that holds all the semaphore's slots
//   redis-semaphore     its Semaphore on the same ioredis client (tryAcquire / release),
//                       refreshInterval 0, acquireAttemptsLimit 1
// Every iteration runs each contender once, in a fresh random order, each on its own names.
// leasehold's side is src/ bundled as an app ships it (bench/lib/bundle.ts).
// `npx tsx bench/semaphore.ts` runs it alone (its own redis-server, bridge and workerd) and prints it.
import { readFileSync } from "node:fs";
import IORedis from "ioredis";
import { Semaphore as RedisSemaphore } from "redis-semaphore";
import type * as Cloudflare from "../src/backends/cloudflare/index.ts";
import type * as Redis from "../src/backends/redis/index.ts";
import type * as Upstash from "../src/backends/upstash/index.ts";
import type * as Core from "../src/index.ts";
import type { Backend, Permit } from "../src/index.ts";
import { bundleSrc } from "./lib/bundle.ts";
import { serverTime } from "./lib/slowlog.ts";
import { type Summary, shuffled, summarize } from "./lib/stats.ts";

export const LIMITS = [1, 5, 50] as const;
const TTL = 15_000;

export interface SemaphoreResult {
  iterations: number;
  warmup: number;
  /** Per limit, per contender: acquire (the timed tryAcquire) and release. */
  series: Record<string, Record<string, Record<"acquire" | "release", Summary>>>;
  /**
   * Per limit, Redis' own time (µs, median, from SLOWLOG) of the acquire and the release of
   * leasehold redis and redis-semaphore; absent from runs before issue 29's seventh session.
   */
  serverTime?: Record<string, Record<string, Record<"acquire" | "release", number>>>;
  redisSemaphore: string;
}

/** One contender at one limit: `fill` holds limit − 1 permits; `cycle` times one acquire and release. */
interface Contender {
  fill(): Promise<() => Promise<unknown>>;
  cycle(): Promise<[number, number, number]>;
}

function ours(
  createSemaphore: typeof Core.createSemaphore,
  backend: Backend,
  name: string,
  limit: number,
): Contender {
  const sem = createSemaphore(backend, { name, limit, ttl: TTL, renew: false, owner: "bench" });
  return {
    async fill() {
      const held: Permit[] = [];
      for (let i = 0; i < limit - 1; i++) held.push((await sem.tryAcquire())!);
      return () => Promise.all(held.map((p) => p.release()));
    },
    async cycle() {
      const t0 = performance.now();
      const p = await sem.tryAcquire();
      const t1 = performance.now();
      if (!p) throw new Error(`bench: ${backend.name} semaphore found no free permit`);
      await p.release();
      return [t0, t1, performance.now()];
    },
  };
}

function theirs(client: IORedis, name: string, limit: number): Contender {
  const make = () =>
    new RedisSemaphore(client, name, limit, {
      lockTimeout: TTL,
      acquireAttemptsLimit: 1,
      refreshInterval: 0,
    });
  return {
    async fill() {
      const held = Array.from({ length: limit - 1 }, make);
      for (const s of held)
        if (!(await s.tryAcquire())) throw new Error("bench: redis-semaphore fill failed");
      return () => Promise.all(held.map((s) => s.release()));
    },
    async cycle() {
      const s = make();
      const t0 = performance.now();
      const ok = await s.tryAcquire();
      const t1 = performance.now();
      if (!ok) throw new Error("bench: redis-semaphore found no free permit");
      await s.release();
      return [t0, t1, performance.now()];
    },
  };
}

/** Runs item 12 against the bridge (`upstash`), redis-server on `redisPort` and workerd's route (`cloudflare`). */
export async function runSemaphore(
  target: {
    upstash: { url: string; token: string };
    redisPort: number;
    cloudflare: { url: string; token: string };
  },
  iterations: number,
  warmup: number,
): Promise<SemaphoreResult> {
  const bundle = await bundleSrc({
    core: "src/index.ts",
    redis: "src/backends/redis/index.ts",
    upstash: "src/backends/upstash/index.ts",
    cloudflare: "src/backends/cloudflare/index.ts",
  });
  const { createSemaphore } = await bundle.load<typeof Core>("core");
  const { redis } = await bundle.load<typeof Redis>("redis");
  const { upstash } = await bundle.load<typeof Upstash>("upstash");
  const { durableObject } = await bundle.load<typeof Cloudflare>("cloudflare");
  const client = new IORedis({ host: "127.0.0.1", port: target.redisPort });
  const admin = new IORedis({ host: "127.0.0.1", port: target.redisPort });
  const series: SemaphoreResult["series"] = {};
  const own: NonNullable<SemaphoreResult["serverTime"]> = {};
  try {
    for (const limit of LIMITS) {
      const tag = `bench-sem-${limit}-${crypto.randomUUID().slice(0, 8)}`;
      const contenders: Record<string, Contender> = {
        "leasehold upstash": ours(createSemaphore, upstash(target.upstash), `${tag}-upstash`, limit),
        "leasehold redis": ours(createSemaphore, redis(client), `${tag}-redis`, limit),
        "leasehold cloudflare": ours(
          createSemaphore,
          durableObject(target.cloudflare),
          `${tag}-cloudflare`,
          limit,
        ),
        "redis-semaphore": theirs(client, `${tag}-theirs`, limit),
      };
      const frees = await Promise.all(Object.values(contenders).map((c) => c.fill()));
      const samples: Record<string, { acquire: number[]; release: number[] }> = {};
      for (const c of Object.keys(contenders)) samples[c] = { acquire: [], release: [] };
      for (let i = 0; i < warmup + iterations; i++) {
        for (const c of shuffled(Object.keys(contenders))) {
          const [t0, t1, t2] = await contenders[c]!.cycle();
          if (i < warmup) continue;
          samples[c]!.acquire.push(t1 - t0);
          samples[c]!.release.push(t2 - t1);
        }
      }
      // After the timed run (SLOWLOG on every command costs Redis a little).
      own[String(limit)] = {};
      for (const c of ["leasehold redis", "redis-semaphore"]) {
        const [acquire, release, ...more] = await serverTime(admin, client, () => contenders[c]!.cycle());
        if (release === undefined || more.length)
          throw new Error(`bench: ${c} sent ${2 + more.length} commands per permit, not one per operation`);
        own[String(limit)]![c] = { acquire: acquire!, release };
      }
      await Promise.all(frees.map((free) => free()));
      series[String(limit)] = Object.fromEntries(
        Object.entries(samples).map(([c, s]) => [
          c,
          { acquire: summarize(s.acquire), release: summarize(s.release) },
        ]),
      );
    }
  } finally {
    await client.quit();
    await admin.quit();
    bundle.remove();
  }
  const { version } = JSON.parse(
    readFileSync(new URL("../node_modules/redis-semaphore/package.json", import.meta.url), "utf8"),
  ) as { version: string };
  return { iterations, warmup, series, serverTime: own, redisSemaphore: version };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { startRedis } = await import("../test/harness/servers/redis.ts");
  const { startBridge } = await import("../test/harness/servers/upstash-bridge.ts");
  const { freePort } = await import("../test/harness/servers/listen.ts");
  const { QUICK } = await import("./lib/stats.ts");
  const { startLockWorker } = await import("../test/harness/servers/workerd-locks.ts");
  const server = await startRedis({ port: await freePort() });
  const bridge = await startBridge({ redis: server.socket });
  const workerd = await startLockWorker();
  try {
    const r = await runSemaphore(
      {
        upstash: { url: bridge.url, token: bridge.token },
        redisPort: server.port,
        cloudflare: { url: workerd.url, token: workerd.token },
      },
      QUICK ? 150 : 1_000,
      QUICK ? 30 : 100,
    );
    for (const [limit, byContender] of Object.entries(r.series)) {
      for (const [c, s] of Object.entries(byContender)) {
        console.log(
          `limit ${limit.padStart(2)}  ${c.padEnd(20)} acquire median ${s.acquire.median.toFixed(3)} p90 ${s.acquire.p90.toFixed(3)} p99 ${s.acquire.p99.toFixed(3)} ms; release median ${s.release.median.toFixed(3)} ms` +
            (r.serverTime?.[limit]?.[c]
              ? `; Redis' own ${r.serverTime[limit][c].acquire} / ${r.serverTime[limit][c].release} µs`
              : ""),
        );
      }
    }
  } finally {
    await workerd.stop();
    await bridge.stop();
    await server.stop();
  }
}
