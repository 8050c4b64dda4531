// The invariant test (test/harness/invariant.ts has the machinery and the checks) for the
// backends over a client's own TCP connection: redis (ioredis) and postgres (a pg Pool). 4 OS
// processes (test/harness/fixtures/invariant-worker.ts with LH_BACKEND) contend on one lock name
// through a TCP fault proxy (random delays, connection resets, partitions of a connection) to the
// shared redis-server or PostgreSQL server, and write to the fenced resource while they hold the
// lease. Leaner than the Upstash run: LEASEHOLD_SOAK_MS (default 15 000 ms) per backend; set it
// higher for a soak. LEASEHOLD_SEED fixes the fault seed. On each, also a semaphore of limit 3
// (redis: acquireAny, one script per attempt; postgres: the generic path, one slot per request).
import { afterAll, beforeAll, describe, expect } from "vitest";
import { fencedResource, invariantTest, tcpFaults, tcpServers } from "../harness/invariant.ts";
import { startTcpFaultProxy, type TcpFaultProxy } from "../harness/servers/tcp-fault-proxy.ts";

const resource = fencedResource();

describe.each(Object.values(tcpServers()))("$backend", ({ backend, port, urlVia, prepare }) => {
  let proxy: TcpFaultProxy;
  beforeAll(async () => {
    proxy = await startTcpFaultProxy(port);
    await prepare();
  });
  afterAll(() => proxy?.stop());
  // What every worker process is told: the backend, its URL (through the proxy), the resource.
  const env = (url: string) => ({ LH_BACKEND: backend, LH_URL: url, ...resource() });

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
