// Wake on release on the redis backend (docs/DESIGN.md §19), against a redis-server of its own
// (test/harness/servers/redis.ts), over ioredis, each figure with the watch and without it (the
// same backend with `watch` taken away: the waiter polls).
// 1. Hand-over: a holder holds for 0.5-2.5 s (uniform) while one waiter waits in acquire() with
//    retryDelay 2 000 ms; ms from the holder's release() call to the waiter's grant.
// 2. Contention: 16 contenders (each its own ioredis client and backend, so its own mutex) loop
//    acquire() → release() on one name for a fixed time; acquisitions and hand-overs (the holder
//    changed) per second, attempts per acquisition. Every release wakes every waiter: with the
//    watch, each acquisition costs about one attempt per contender (the herd, docs/DESIGN.md §19).
// Run: npx tsx bench/handover-redis.ts [samples=30] [seconds=8]
import { Redis } from "ioredis";
import type { Backend } from "../src/backend.ts";
import { redis } from "../src/backends/redis/index.ts";
import { createMutex, type LockEvent } from "../src/index.ts";
import { freePort } from "../test/harness/servers/listen.ts";
import { startRedis } from "../test/harness/servers/redis.ts";
import { type Summary, sleep, summarize } from "./lib/stats.ts";

const SAMPLES = Number(process.argv[2] ?? 30);
const SECONDS = Number(process.argv[3] ?? 8);
const CONTENDERS = 16;

/** The backend as it is ("wake"), or without its watch ("poll"). */
const as = (backend: Backend, mode: "wake" | "poll"): Backend =>
  mode === "wake" ? backend : { ...backend, watch: undefined };

async function handover(client: Redis, mode: "wake" | "poll"): Promise<Summary> {
  const backend = as(redis(client, { prefix: "bench-ho:" }), mode);
  const name = `handover-${mode}-${Date.now()}`;
  const holder = createMutex(backend, { name, ttl: 30_000 });
  const waiter = createMutex(backend, { name, ttl: 30_000, retryDelay: 2_000 });
  const ms: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const held = await holder.acquire();
    const waiting = waiter.acquire({ timeout: 60_000 });
    await sleep(500 + Math.random() * 2_000);
    const t0 = performance.now();
    await held.release();
    const lease = await waiting;
    ms.push(performance.now() - t0);
    await lease.release();
  }
  return summarize(ms);
}

async function contention(port: number, mode: "wake" | "poll") {
  const clients = Array.from({ length: CONTENDERS }, () => new Redis({ host: "127.0.0.1", port }));
  try {
    const name = `contention-${mode}-${Date.now()}`;
    let handovers = 0;
    let acquisitions = 0;
    let attempts = 0;
    const onEvent = (e: LockEvent) => {
      if (e.type === "attempt") attempts++;
    };
    let last = -1;
    const end = performance.now() + SECONDS * 1_000;
    const t0 = performance.now();
    await Promise.all(
      clients.map(async (client, i) => {
        const backend = as(redis(client, { prefix: "bench-ho:" }), mode);
        const mutex = createMutex(backend, { name, ttl: 15_000, onEvent });
        while (performance.now() < end) {
          const lease = await mutex.acquire({ timeout: 60_000 });
          acquisitions++;
          if (last !== i) handovers++;
          last = i;
          await lease.release();
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1_000;
    return {
      acquisitionsPerSecond: Math.round(acquisitions / seconds),
      handoversPerSecond: Math.round(handovers / seconds),
      attemptsPerAcquisition: Math.round((attempts / acquisitions) * 10) / 10,
    };
  } finally {
    for (const c of clients) c.disconnect();
  }
}

const server = await startRedis({ port: await freePort() });
const client = new Redis({ host: "127.0.0.1", port: server.port });
try {
  const out: Record<string, unknown> = { redis: server.version, samples: SAMPLES, seconds: SECONDS };
  for (const mode of ["wake", "poll"] as const) {
    out[`handover ${mode} (ms, retryDelay 2000)`] = await handover(client, mode);
    out[`contention ${mode} (${CONTENDERS} contenders)`] = await contention(server.port, mode);
  }
  console.log(JSON.stringify(out, null, 2));
} finally {
  client.disconnect();
  await server.stop();
}
