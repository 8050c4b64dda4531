// The invariant test over a quorum of 3 independent databases (a redis-server behind an
// Upstash-REST bridge each), with every fault injected into one member: the 8 processes reach
// member 0 through the fault proxy and members 1 and 2 directly (test/harness/invariant.ts has the
// machinery and the checks). LEASEHOLD_SOAK_MS (default 30 000 ms here) and LEASEHOLD_SEED as in
// invariant.test.ts. Then a semaphore of limit 3 on the same quorum (15 s).
import { afterAll, beforeAll, expect, inject } from "vitest";
import { httpFaults, invariantTest } from "../harness/invariant.ts";
import { type FaultProxy, startFaultProxy } from "../harness/servers/fault-proxy.ts";
import { startBridge, type UpstashBridge } from "../harness/servers/upstash-bridge.ts";
import { startDatabases, type UpstashDatabase } from "../harness/upstash.ts";

const dbs: UpstashDatabase[] = [];
let resourceBridge: UpstashBridge;
let proxy: FaultProxy;

beforeAll(async () => {
  dbs.push(...(await startDatabases(3)));
  resourceBridge = await startBridge({ redis: inject("upstash").redisSocket });
  proxy = startFaultProxy(dbs[0]!.url);
});

afterAll(async () => {
  await proxy?.stop();
  await resourceBridge?.stop();
  await Promise.all(dbs.map((d) => d.stop()));
});

/** What every worker process is told: member 0 through the proxy, members 1 and 2 directly. */
const env = (url: string) => ({
  LH_URLS: [url, dbs[1]!.url, dbs[2]!.url].join(","),
  LH_TOKENS: dbs.map((d) => d.token).join(","),
  LH_RESOURCE_URL: resourceBridge.url,
  LH_RESOURCE_TOKEN: resourceBridge.token,
});

invariantTest(
  "over a quorum of 3, faults in one member",
  30_000,
  () => ({
    faults: httpFaults(proxy),
    env,
  }),
  (summary) => {
    expect(summary.requestsThroughProxy).toBeGreaterThan(0);
    expect(summary.faults.passed).toBeLessThan(summary.requestsThroughProxy!); // faults were injected
  },
);

invariantTest(
  "taking permits of a semaphore of limit 3 over a quorum of 3, faults in one member (the generic path)",
  15_000,
  () => ({
    limit: 3,
    faults: httpFaults(proxy),
    env,
    meaningful: { msPerAcquisition: 1_500, holders: 3 },
  }),
  (summary) => {
    expect(summary.mostAtOnce).toBe(3); // the limit was reached, never passed
    expect(summary.faults.passed).toBeLessThan(summary.requestsThroughProxy!); // faults were injected
  },
);
