// Item 16: hand-over, wake on release beside the Durable Object's line and beside polling
// (docs/DESIGN.md §19, issue 29). For each store, the backend as it is (woken by a release where
// it has `watch`) and the same backend with `watch` hidden (polling, as before):
// - release → next waiter: a holder with ttl 15 s, one waiter whose retryDelay is 2 000 ms and
//   which has waited a random 0.3-2.5 s (so it is somewhere in its pauses); the time from the
//   holder's release call to the waiter's lease. Beside it, the store's round trip (the median of
//   `inspect`), since the target is "≤ 2 round trips + 5 ms".
// - hand-overs/s: 16 contenders (their own mutexes, one process) loop acquire → release on one
//   name at retryDelay 1 000 ms; hand-overs are changes of holder, per second.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openKv } from "@deno/kv";
import IORedis from "ioredis";
import pg from "pg";
import { type Backend, capabilities } from "../src/backend.ts";
import { durableObject } from "../src/backends/cloudflare/index.ts";
import { denoKv, type KvLike } from "../src/backends/deno-kv/index.ts";
import { memory } from "../src/backends/memory/index.ts";
import { postgres } from "../src/backends/postgres/index.ts";
import { redis } from "../src/backends/redis/index.ts";
import { upstash } from "../src/backends/upstash/index.ts";
import { createMutex } from "../src/index.ts";
import { type Summary, summarize } from "./lib/stats.ts";

export interface HandoverRow {
  store: string;
  /** "woken" (watch), "line" (acquireQueued), or "polling" (neither, or watch hidden). */
  how: "woken" | "line" | "polling";
  /** The store's round trip: `inspect`'s median and more, ms. */
  roundTrip: Summary;
  /** Release call → the waiter's lease, ms (retryDelay 2 000). */
  handover: Summary;
  /** 16 contenders: changes of holder per second (retryDelay 1 000). */
  handoversPerSecond: number;
  acquisitionsPerSecond: number;
}

export interface HandoverResult {
  trials: number;
  contenders: number;
  each: number;
  rows: HandoverRow[];
  /** When measured apart from `npm run bench` (`--save`): the date, commit and machine. */
  measured?: string;
}

export interface HandoverTargets {
  upstash: { url: string; token: string };
  cloudflare: { url: string; token: string };
  redisPort: number;
  postgresUrl: string;
}

/** `backend` with `watch` hidden: the same store, polling. Its own object keeps `this`. */
function polling(backend: Backend): Backend {
  const b: Backend = Object.create(backend);
  b.watch = undefined;
  return b;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function roundTrip(backend: Backend, n: number): Promise<Summary> {
  const key = `bench-rt-${crypto.randomUUID().slice(0, 8)}`;
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await backend.inspect({ key });
    times.push(performance.now() - t);
  }
  return summarize(times);
}

async function handover(backend: Backend, trials: number): Promise<Summary> {
  const times: number[] = [];
  for (let i = 0; i < trials; i++) {
    const name = `bench-ho-${crypto.randomUUID().slice(0, 8)}`;
    const holder = await createMutex(backend, { name, ttl: 15_000, owner: "holder" }).acquire({
      timeout: 10_000,
    });
    const waiting = createMutex(backend, { name, ttl: 15_000, retryDelay: 2_000, owner: "waiter" }).acquire({
      timeout: 30_000,
    });
    await sleep(300 + Math.random() * 2_200);
    const t = performance.now();
    await holder.release();
    const lease = await waiting;
    times.push(performance.now() - t);
    await lease.release();
  }
  return summarize(times);
}

async function contention(backend: Backend, contenders: number, each: number) {
  const name = `bench-ho-ct-${crypto.randomUUID().slice(0, 8)}`;
  let handovers = 0;
  let total = 0;
  let last = -1;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: contenders }, async (_, i) => {
      const mutex = createMutex(backend, { name, ttl: 15_000, retryDelay: 1_000, owner: `c${i}` });
      const onError = () => {}; // retried conflicts under contention (deno-kv): not the figure here
      for (let n = 0; n < each; n++) {
        const lease = await mutex.acquire({ timeout: 120_000, onError });
        total++;
        if (last !== -1 && last !== i) handovers++;
        last = i;
        await lease.release();
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  return { handoversPerSecond: handovers / seconds, acquisitionsPerSecond: total / seconds };
}

export async function runHandover(
  t: HandoverTargets,
  opts: { trials: number; contenders: number; each: number; rtCycles: number },
): Promise<HandoverResult> {
  const dir = mkdtempSync(join(tmpdir(), "leasehold-bench-ho-"));
  const client = new IORedis({ port: t.redisPort, host: "127.0.0.1" });
  const pool = new pg.Pool({ connectionString: t.postgresUrl, max: 20 });
  const kv = await openKv(join(dir, "handover.sqlite"));
  const stores: [string, Backend][] = [
    ["cloudflare", durableObject(t.cloudflare)],
    ["memory", memory()],
    ["redis (ioredis)", redis(client)],
    ["postgres (pg Pool)", postgres(pool, { createTable: true })],
    ["deno-kv (@deno/kv)", denoKv(kv as unknown as KvLike)],
    ["upstash", upstash({ ...t.upstash, prefix: "bench-ho:" })],
  ];
  const rows: HandoverRow[] = [];
  try {
    for (const [store, backend] of stores) {
      const caps = capabilities(backend);
      const variants: [HandoverRow["how"], Backend][] = caps.queued
        ? [["line", backend]]
        : caps.watch
          ? [
              ["woken", backend],
              ["polling", polling(backend)],
            ]
          : [["polling", backend]];
      const rt = await roundTrip(backend, opts.rtCycles);
      for (const [how, b] of variants) {
        const ho = await handover(b, opts.trials);
        const ct = await contention(b, opts.contenders, opts.each);
        rows.push({ store, how, roundTrip: rt, handover: ho, ...ct });
        console.log(
          `[handover] ${store} ${how}: rt ${rt.median.toFixed(3)} ms, release → lease median ${ho.median.toFixed(1)} ms, ${ct.handoversPerSecond.toFixed(0)} hand-overs/s`,
        );
      }
      await backend.close?.();
    }
  } finally {
    client.disconnect();
    await pool.end();
    kv.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return { trials: opts.trials, contenders: opts.contenders, each: opts.each, rows };
}

// Alone: `npx tsx bench/handover.ts [--save]` starts the servers, runs this item, prints its rows
// and, with --save, puts them into bench/results.json and rewrites bench/RESULTS.md.
if (import.meta.url === `file://${process.argv[1]}`) {
  const { execSync } = await import("node:child_process");
  const { readFileSync, writeFileSync } = await import("node:fs");
  const { cpus } = await import("node:os");
  const { startServers } = await import("./lib/servers.ts");
  const { evaluateTargets, renderMarkdown } = await import("./lib/report.ts");
  const s = await startServers();
  try {
    const r = await runHandover(
      {
        upstash: { url: s.bridge.url, token: s.bridge.token },
        cloudflare: { url: s.workerd.url, token: s.workerd.token },
        redisPort: s.redis.port,
        postgresUrl: s.postgres.url,
      },
      { trials: 20, contenders: 16, each: 20, rtCycles: 100 },
    );
    if (process.argv.includes("--save")) {
      const file = new URL("./results.json", import.meta.url);
      const saved = JSON.parse(readFileSync(file, "utf8"));
      const commit = execSync("git rev-parse --short HEAD", { encoding: "utf8" }).trim();
      saved.handover = {
        ...r,
        measured: `${new Date().toISOString().slice(0, 10)}, commit ${commit}, ${cpus()[0]?.model.trim()} × ${cpus().length}, alone (npx tsx bench/handover.ts --save)`,
      };
      saved.targets = evaluateTargets(saved);
      writeFileSync(file, `${JSON.stringify(saved, null, 2)}\n`);
      writeFileSync(new URL("./RESULTS.md", import.meta.url), renderMarkdown(saved));
    }
  } finally {
    await s.stop();
  }
}
