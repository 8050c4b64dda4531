// The invariant test against one upstash backend (test/harness/invariant.ts has the machinery
// and the checks): 8 OS processes contend on one lock name through the fault proxy to the Upstash
// bridge and a real redis-server. The run lasts LEASEHOLD_SOAK_MS (default 55 000 ms) per
// process; set it higher for a soak. LEASEHOLD_SEED fixes the fault seed (the interleaving still
// depends on timing). Then the same for a semaphore of limit 3 (acquireAny: one script per
// attempt), for LEASEHOLD_SOAK_MS or 20 000 ms.
import { afterAll, beforeAll, expect, inject } from "vitest";
import { expectEveryHttpFault, httpFaults, invariantTest } from "../harness/invariant.ts";
import { type FaultProxy, startFaultProxy } from "../harness/servers/fault-proxy.ts";
import { startBridge, type UpstashBridge } from "../harness/servers/upstash-bridge.ts";

let lockBridge: UpstashBridge;
let resourceBridge: UpstashBridge;
let proxy: FaultProxy;

beforeAll(async () => {
  const { redisSocket } = inject("upstash");
  const token = `invariant-${crypto.randomUUID()}`;
  lockBridge = await startBridge({ redis: redisSocket, token });
  resourceBridge = await startBridge({ redis: redisSocket, token });
  proxy = startFaultProxy(lockBridge.url);
});

afterAll(async () => {
  await proxy?.stop();
  await lockBridge?.stop();
  await resourceBridge?.stop();
});

invariantTest(
  "under random faults",
  55_000,
  () => ({
    faults: httpFaults(proxy),
    env: (url) => ({ LH_URL: url, LH_TOKEN: lockBridge.token, LH_RESOURCE_URL: resourceBridge.url }),
  }),
  (summary) => {
    // Every fault kind happened, and fencing rejected late writes.
    expectEveryHttpFault(summary.faults);
    expect(summary.writes.staleRejected).toBeGreaterThan(0);
  },
);

invariantTest(
  "taking permits of a semaphore of limit 3 under random faults",
  20_000,
  () => ({
    limit: 3,
    faults: httpFaults(proxy),
    env: (url) => ({ LH_URL: url, LH_TOKEN: lockBridge.token, LH_RESOURCE_URL: resourceBridge.url }),
    meaningful: { msPerAcquisition: 1_000, holders: 6 },
  }),
  (summary) => {
    expect(summary.mostAtOnce).toBe(3); // the limit was reached, never passed
    expect(summary.faults.passed).toBeLessThan(summary.requestsThroughProxy!);
  },
);
