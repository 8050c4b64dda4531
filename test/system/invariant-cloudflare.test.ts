// The invariant test against the LeaseholdLock Durable Object's route in workerd (its waiters
// held open in line): 8 OS processes through the fault proxy (test/harness/invariant.ts has the
// machinery and the checks). LEASEHOLD_SOAK_MS (default 30 000 ms here) and LEASEHOLD_SEED as in
// invariant.test.ts. Then the same for a semaphore of limit 3 (acquireAny: one request per
// attempt to the object that holds all its slots), 10 s.
import { afterAll, beforeAll, expect, inject } from "vitest";
import { expectEveryHttpFault, httpFaults, invariantTest } from "../harness/invariant.ts";
import { type FaultProxy, startFaultProxy } from "../harness/servers/fault-proxy.ts";
import { startBridge, type UpstashBridge } from "../harness/servers/upstash-bridge.ts";

const cloudflare = inject("cloudflare");
const env = (url: string) => ({
  LH_BACKEND: "cloudflare",
  LH_URL: url,
  LH_LOCK_TOKEN: cloudflare.token,
  LH_RESOURCE_URL: resourceBridge.url,
  LH_RESOURCE_TOKEN: resourceBridge.token,
});
let resourceBridge: UpstashBridge;
let proxy: FaultProxy;

beforeAll(async () => {
  resourceBridge = await startBridge({ redis: inject("upstash").redisSocket });
  proxy = startFaultProxy(cloudflare.url);
});

afterAll(async () => {
  await proxy?.stop();
  await resourceBridge?.stop();
});

invariantTest(
  "on the Durable Object under random faults",
  30_000,
  () => ({
    faults: httpFaults(proxy, (body) => body.includes('"op":"renew"')),
    env,
  }),
  (summary) => {
    expectEveryHttpFault(summary.faults);
  },
);

invariantTest(
  "taking permits of a semaphore of limit 3 on the Durable Object under random faults",
  10_000,
  () => ({
    limit: 3,
    faults: httpFaults(proxy, (body) => body.includes('"op":"renew"')),
    env,
    meaningful: { msPerAcquisition: 1_000, holders: 6 },
  }),
  (summary) => {
    expect(summary.mostAtOnce).toBe(3); // the limit was reached, never passed
    expect(summary.faults.passed).toBeLessThan(summary.requestsThroughProxy!);
  },
);
