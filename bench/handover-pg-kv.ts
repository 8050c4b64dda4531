// Wake on release (docs/DESIGN.md §19) on PostgreSQL (pg Pool, a server of its own) and Deno KV
// (@deno/kv on a SQLite file), each with the backend's watch and without it (the same backend
// with `watch` removed: polling only):
// - hand-over: a holder releases while one waiter waits (retryDelay 2 000 ms, listening since its
//   first refusal); the time from the release call to the waiter's lease, median of ROUNDS;
// - contention: 16 contenders loop acquire() → release() on one name for SECONDS; acquisitions
//   per second, hand-overs (the holder changed) per second, retried failures per second.
// Standalone: `npx tsx bench/handover-pg-kv.ts` (BENCH_QUICK=1 for a short run).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openKv } from "@deno/kv";
import pg from "pg";
import type { Backend } from "../src/backend.ts";
import { denoKv, type KvLike } from "../src/backends/deno-kv/index.ts";
import { postgres } from "../src/backends/postgres/index.ts";
import { createMutex, type LockEvent } from "../src/index.ts";
import { startPostgres } from "../test/harness/servers/postgres.ts";
import { QUICK, sleep, summarize } from "./lib/stats.ts";

const ROUNDS = QUICK ? 8 : 30;
const SECONDS = QUICK ? 3 : 10;
const RETRY = 2_000;

const polling = (b: Backend): Backend => ({ ...b, watch: undefined });

/** ms from the holder's release call to the waiter's lease. */
async function handover(backend: Backend): Promise<number> {
  const name = `handover-${crypto.randomUUID()}`;
  const holder = await createMutex(backend, { name, ttl: 30_000 }).acquire();
  let attempts = 0;
  const onEvent = (e: LockEvent) => {
    if (e.type === "attempt") attempts++;
  };
  const waiting = createMutex(backend, { name, ttl: 30_000, retryDelay: RETRY, onEvent }).acquire({
    timeout: 20_000,
  });
  while (attempts < 2) await sleep(5);
  // Somewhere in the waiter's pause (up to 0.6 × retryDelay for a polling one, past its backoff).
  await sleep(300 + Math.random() * 500);
  const t0 = performance.now();
  await holder.release();
  const lease = await waiting;
  const ms = performance.now() - t0;
  await lease.release();
  return ms;
}

/** Acquisitions, hand-overs (the holder changed) and retryable failures, per second. */
async function contention(
  backend: Backend,
): Promise<{ acquisitions: number; handovers: number; failures: number }> {
  const name = `contention-${crypto.randomUUID()}`;
  const end = performance.now() + SECONDS * 1_000;
  let acquisitions = 0;
  let handovers = 0;
  let failures = 0;
  let last = -1;
  await Promise.all(
    Array.from({ length: 16 }, async (_, i) => {
      const m = createMutex(backend, { name, ttl: 10_000, retryDelay: RETRY });
      const onError = () => failures++;
      while (performance.now() < end) {
        const lease = await m.acquire({ timeout: 30_000, onError });
        acquisitions++;
        if (last !== i) handovers++;
        last = i;
        await lease.release();
      }
    }),
  );
  return {
    acquisitions: acquisitions / SECONDS,
    handovers: handovers / SECONDS,
    failures: failures / SECONDS,
  };
}

async function measure(label: string, backend: Backend): Promise<void> {
  for (const [mode, b] of [
    ["watch", backend],
    ["polling", polling(backend)],
  ] as const) {
    const times: number[] = [];
    for (let i = 0; i < ROUNDS; i++) times.push(await handover(b));
    const s = summarize(times);
    const c = await contention(b);
    console.log(
      `${label.padEnd(24)} ${mode.padEnd(8)} hand-over median ${s.median.toFixed(1)} ms (p90 ${s.p90.toFixed(1)}, n ${times.length}); ` +
        `16 contenders: ${c.acquisitions.toFixed(1)} acquisitions/s, ${c.handovers.toFixed(1)} hand-overs/s, ${c.failures.toFixed(1)} retried failures/s`,
    );
  }
}

const server = await startPostgres();
const pool = new pg.Pool({ connectionString: server.url, max: 20 });
const dir = mkdtempSync(join(tmpdir(), "leasehold-bench-kv-"));
const kv = await openKv(join(dir, "bench.sqlite"));
try {
  console.log(`retryDelay ${RETRY} ms, ${ROUNDS} hand-overs, ${SECONDS} s of contention per row`);
  await measure("postgres (pg Pool)", postgres(pool, { createTable: true }));
  await measure("deno-kv (@deno/kv file)", denoKv(kv as unknown as KvLike));
} finally {
  kv.close();
  rmSync(dir, { recursive: true, force: true });
  await pool.end();
  await server.stop();
}
