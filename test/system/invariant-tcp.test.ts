// The invariant test (test/harness/invariant.ts has the machinery and the checks) for the
// backends over a client's own TCP connection: redis (ioredis) and postgres (a pg Pool). 4 OS
// processes (test/harness/fixtures/invariant-worker.ts with LH_BACKEND) contend on one lock name
// through a TCP fault proxy (random delays, connection resets, partitions of a connection) to the
// shared redis-server or PostgreSQL server, and write to the fenced resource while they hold the
// lease. Leaner than the Upstash run: LEASEHOLD_SOAK_MS (default 15 000 ms) per backend; set it
// higher for a soak. LEASEHOLD_SEED fixes the fault seed. On each, also a semaphore of limit 3
// (redis: acquireAny, one script per attempt; postgres: the generic path, one slot per request).
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject } from "vitest";
import { postgres } from "../../src/backends/postgres/index.ts";
import { type Faults, invariantTest } from "../harness/invariant.ts";
import { registerSecret } from "../harness/secrets.ts";
import {
  startTcpFaultProxy,
  type TcpFaultProxy,
  type TcpFaults,
} from "../harness/servers/tcp-fault-proxy.ts";
import { startBridge, type UpstashBridge } from "../harness/servers/upstash-bridge.ts";

const FAULTS: Omit<TcpFaults, "seed"> = {
  delay: 0.05,
  reset: 0.01,
  partition: 0.015, // about 2.5 times what made a run without one likely (1 in 6) on redis
  delayMs: [5, 300],
  partitionMs: [300, 2_500],
};

const redisCtx = inject("redis");
const pgCtx = inject("postgres");
registerSecret(redisCtx.password);
registerSecret(pgCtx.password);

let resourceBridge: UpstashBridge;
beforeAll(async () => {
  resourceBridge = await startBridge({ redis: inject("upstash").redisSocket });
});
afterAll(async () => {
  await resourceBridge?.stop();
});

/** The TCP fault proxy: one port for every worker, faults on every chunk either way. */
function tcpFaults(proxy: TcpFaultProxy, urlVia: (port: number) => string): Faults {
  return {
    url: async () => urlVia(proxy.port),
    start: (seed) => proxy.setFaults({ seed, ...FAULTS }),
    stop() {
      const counts = proxy.counts();
      proxy.setFaults(undefined);
      return { counts };
    },
  };
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
      await postgres(pool, { createTable: true }).inspect({ key: "none" });
      await pool.end();
    }
  });
  afterAll(() => proxy?.stop());
  // What every worker process is told: the backend, its URL (through the proxy), the resource.
  const env = (url: string) => ({
    LH_BACKEND: backend,
    LH_URL: url,
    LH_RESOURCE_URL: resourceBridge.url,
    LH_RESOURCE_TOKEN: resourceBridge.token,
  });

  invariantTest(
    "under random TCP faults",
    15_000,
    () => ({
      faults: tcpFaults(proxy, urlVia),
      env,
      meaningful: { msPerAcquisition: 3_000, holders: 2 },
    }),
    (summary) => {
      for (const kind of ["delay", "reset", "partition"] as const) {
        expect(summary.faults[kind], kind).toBeGreaterThan(0);
      }
    },
    4,
  );
  // redis: acquireAny, one script per attempt; postgres: the generic path, one statement per slot.
  invariantTest(
    "taking permits of a semaphore of limit 3 under random TCP faults",
    12_000,
    () => ({
      limit: 3,
      faults: tcpFaults(proxy, urlVia),
      env,
      meaningful: { msPerAcquisition: 1_000, holders: 4 },
    }),
    (summary) => {
      expect(summary.mostAtOnce).toBe(3);
      expect(summary.faults.delay).toBeGreaterThan(0);
    },
    6,
  );
});
