// The invariant test against the LeaseholdLock Durable Object's route in workerd (its waiters
// held open in line): 8 OS processes through the fault proxy (test/harness/invariant.ts has the
// machinery and the checks). LEASEHOLD_SOAK_MS (default 30 000 ms here) and LEASEHOLD_SEED as in
// invariant.test.ts.
import { afterAll, beforeAll, inject } from "vitest";
import { expectEveryHttpFault, httpFaults, invariantTest } from "../harness/invariant.ts";
import { type FaultProxy, startFaultProxy } from "../harness/servers/fault-proxy.ts";
import { startBridge, type UpstashBridge } from "../harness/servers/upstash-bridge.ts";

const cloudflare = inject("cloudflare");
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
    env: (url) => ({
      LH_BACKEND: "cloudflare",
      LH_URL: url,
      LH_LOCK_TOKEN: cloudflare.token,
      LH_RESOURCE_URL: resourceBridge.url,
      LH_RESOURCE_TOKEN: resourceBridge.token,
    }),
  }),
  (summary) => {
    expectEveryHttpFault(summary.faults);
  },
);
