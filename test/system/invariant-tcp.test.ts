// The invariant test (test/system/invariant.test.ts) for the backends over a client's own TCP
// connection: redis (ioredis) and postgres (a pg Pool). PROCESSES OS processes
// (test/harness/fixtures/invariant-worker.ts with LH_BACKEND) contend on one lock name through a
// TCP fault proxy (random delays, connection resets, partitions of a connection) to the shared
// redis-server or PostgreSQL server, and write to the fenced resource while they hold the lease.
// From their logs: no two unaborted leases overlapped; no live holder's fenced write was
// rejected; tokens strictly increase in acquisition order; no process hung or crashed.
// Leaner than the Upstash run: LEASEHOLD_TCP_SOAK_MS (default 15 000 ms) per backend; set it
// higher for a soak. LEASEHOLD_SEED fixes the fault seed.
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { postgres } from "../../src/backends/postgres/index.ts";
import { registerSecret } from "../harness/secrets.ts";
import { killAll } from "../harness/servers/children.ts";
import {
  startTcpFaultProxy,
  type TcpFaultProxy,
  type TcpFaults,
} from "../harness/servers/tcp-fault-proxy.ts";
import { startBridge, type UpstashBridge } from "../harness/servers/upstash-bridge.ts";

const PROCESSES = 4;
const DURATION = Number(process.env.LEASEHOLD_TCP_SOAK_MS ?? 15_000);
const TTL = 1_500;
const RETRY_DELAY = 150;
const EXIT_MARGIN = 20_000;
const SEED = Number(process.env.LEASEHOLD_SEED ?? Math.floor(Math.random() * 2 ** 31));
const FAULTS: Omit<TcpFaults, "seed"> = {
  delay: 0.05,
  reset: 0.01,
  partition: 0.006,
  delayMs: [5, 300],
  partitionMs: [300, 2_500],
};

interface Line {
  t: number;
  id: string;
  ev: string;
  token?: number;
  accepted?: boolean;
  signalAbortedAtIssue?: boolean;
  issued?: number;
  reason?: string;
}

const redisCtx = inject("redis");
const pgCtx = inject("postgres");
registerSecret(redisCtx.password);
registerSecret(pgCtx.password);

let resourceBridge: UpstashBridge;
const children: ChildProcess[] = [];
beforeAll(async () => {
  resourceBridge = await startBridge({
    redis: inject("upstash").redisSocket,
    token: `inv-${crypto.randomUUID()}`,
  });
});
afterAll(async () => {
  await killAll(children);
  await resourceBridge?.stop();
});

function runWorker(
  i: number,
  env: Record<string, string>,
): Promise<{ lines: Line[]; code: number | null; killed: boolean; stderr: string }> {
  const script = fileURLToPath(new URL("../harness/fixtures/invariant-worker.ts", import.meta.url));
  const child = spawn(process.execPath, ["--import", "tsx", script], {
    env: { ...process.env, ...env, LH_ID: `w${i}` },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let out = "";
  let stderr = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (stderr += d));
  let killed = false;
  const timer = setTimeout(() => {
    killed = true;
    child.kill("SIGKILL");
  }, DURATION + EXIT_MARGIN);
  return new Promise((resolve) => {
    child.once("close", (code) => {
      clearTimeout(timer);
      const lines = out
        .split("\n")
        .filter((l) => l.trim() !== "")
        .map((l) => JSON.parse(l) as Line);
      resolve({ lines, code, killed, stderr: stderr.slice(-2_000) });
    });
  });
}

const backends: [string, (port: number) => string, number][] = [
  ["redis", (port) => `redis://${redisCtx.username}:${redisCtx.password}@127.0.0.1:${port}`, redisCtx.port],
  ["postgres", (port) => pgCtx.url.replace(`:${pgCtx.port}/`, `:${port}/`), pgCtx.port],
];

describe.each(backends)("%s", (backend, urlVia, target) => {
  let proxy: TcpFaultProxy;
  beforeAll(async () => {
    proxy = await startTcpFaultProxy(target);
    if (backend === "postgres") {
      // The workers' table (the default name), created once before they start.
      const pool = new pg.Pool({ connectionString: pgCtx.url });
      await postgres(pool, { createTable: true }).inspect("none");
      await pool.end();
    }
  });
  afterAll(() => proxy?.stop());

  it(`${PROCESSES} processes under random TCP faults: one live holder at a time, fencing, monotonic tokens, no hang`, {
    timeout: DURATION + EXIT_MARGIN + 10_000,
  }, async () => {
    const name = `invariant-${backend}-${crypto.randomUUID().slice(0, 8)}`;
    proxy.setFaults({ seed: SEED, ...FAULTS });
    const results = await Promise.all(
      Array.from({ length: PROCESSES }, (_, i) =>
        runWorker(i, {
          LH_BACKEND: backend,
          LH_URL: urlVia(proxy.port),
          LH_RESOURCE_URL: resourceBridge.url,
          LH_TOKEN: resourceBridge.token,
          LH_NAME: name,
          LH_DURATION_MS: String(DURATION),
          LH_TTL: String(TTL),
          LH_RETRY_DELAY: String(RETRY_DELAY),
          LH_SEED: String(SEED + i + 1),
        }),
      ),
    );
    const faults = proxy.counts();
    proxy.setFaults(undefined);

    for (const [i, r] of results.entries()) {
      expect(r.killed, `w${i} did not exit by itself`).toBe(false);
      expect(r.code, `w${i} exit code; stderr: ${r.stderr}`).toBe(0);
      expect(r.lines.at(-1)?.ev, `w${i} last line`).toBe("exit");
      expect(r.lines.filter((l) => l.ev === "crash")).toEqual([]);
    }
    const lines = results.flatMap((r) => r.lines);
    const leases = new Map<string, { id: string; token: number; from: number; to?: number }>();
    for (const l of lines) {
      const key = `${l.id}/${l.token}`;
      if (l.ev === "acquired") {
        expect(leases.has(key), `token ${l.token} acquired twice`).toBe(false);
        leases.set(key, { id: l.id, token: l.token!, from: l.t });
      } else if (l.ev === "aborted") leases.get(key)!.to = l.t;
    }
    const all = [...leases.values()].sort((a, b) => a.from - b.from);
    for (const lease of all) expect(lease.to, `lease ${lease.id}/${lease.token} never closed`).toBeDefined();
    const overlaps: string[] = [];
    for (let i = 0; i < all.length; i++) {
      if (i > 0)
        expect(all[i]!.token, `token after ${all[i - 1]!.id}/${all[i - 1]!.token}`).toBeGreaterThan(
          all[i - 1]!.token,
        );
      for (let j = i + 1; j < all.length && all[j]!.from < all[i]!.to!; j++)
        overlaps.push(`${all[i]!.id}/${all[i]!.token} overlaps ${all[j]!.id}/${all[j]!.token}`);
    }
    expect(overlaps).toEqual([]);
    const writes = lines.filter((l) => l.ev === "write");
    const live = writes.filter((w) => !w.signalAbortedAtIssue);
    expect(
      live.filter((w) => !w.accepted),
      "fenced writes rejected while the writer's signal was unaborted",
    ).toEqual([]);
    for (const w of live) {
      const lease = leases.get(`${w.id}/${w.token}`)!;
      expect(w.issued!).toBeGreaterThanOrEqual(lease.from);
      expect(w.issued!).toBeLessThanOrEqual(lease.to!);
    }
    expect(lines.filter((l) => l.ev === "writeError")).toEqual([]);
    const summary = {
      backend,
      seed: SEED,
      durationMs: DURATION,
      processes: PROCESSES,
      acquisitions: all.length,
      holders: new Set(all.map((l) => l.id)).size,
      faults,
      liveWrites: live.length,
      staleWrites: writes.length - live.length,
      staleRejected: writes.filter((w) => w.signalAbortedAtIssue && !w.accepted).length,
      acquireErrors: lines.filter((l) => l.ev === "acquireError").length,
    };
    console.log(`[invariant-tcp] ${JSON.stringify(summary)}`);
    // Meaningful: handovers between several processes, every fault kind, fenced writes.
    expect(all.length).toBeGreaterThanOrEqual(Math.floor(DURATION / 3_000));
    expect(summary.holders).toBeGreaterThanOrEqual(2);
    for (const kind of ["delay", "reset", "partition"] as const)
      expect(faults[kind], kind).toBeGreaterThan(0);
    expect(live.filter((w) => w.accepted).length).toBeGreaterThan(0);
  });
});
