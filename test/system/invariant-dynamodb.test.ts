// The invariant test on DynamoDB (dynalite, test/harness/setup/dynamodb.ts): 8 processes contend
// through the fault proxy on a store without expiry of its own, so every takeover of a silent
// holder is an observed-expiry takeover (test/harness/invariant.ts has the machinery and the
// checks; the fenced resource is still the Upstash bridge). Region and credentials reach the
// workers as the AWS_* variables. LEASEHOLD_SOAK_MS (default 30 000 ms here) and LEASEHOLD_SEED
// as in invariant.test.ts. Then a semaphore of limit 2 on it (the generic path: one attempt per
// slot, each with its own observed-expiry state), for LEASEHOLD_SOAK_MS or 15 000 ms.
import { afterAll, beforeAll, expect, inject } from "vitest";
import { dynamodbRenewal, httpFaults, invariantTest } from "../harness/invariant.ts";
import { type FaultProxy, startFaultProxy } from "../harness/servers/fault-proxy.ts";
import { startBridge, type UpstashBridge } from "../harness/servers/upstash-bridge.ts";

const { endpoint, region, credentials, table } = inject("dynamodb");
let resourceBridge: UpstashBridge;
let proxy: FaultProxy;

beforeAll(async () => {
  resourceBridge = await startBridge({ redis: inject("upstash").redisSocket });
  proxy = startFaultProxy(endpoint);
});

afterAll(async () => {
  await proxy?.stop();
  await resourceBridge?.stop();
});

/** What every worker process is told: DynamoDB through the proxy, its table and keys, the resource. */
const env = (url: string) => ({
  LH_DYNAMODB_ENDPOINT: url,
  LH_DYNAMODB_TABLE: table,
  AWS_REGION: region,
  AWS_ACCESS_KEY_ID: credentials.accessKeyId,
  AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
  LH_RESOURCE_URL: resourceBridge.url,
  LH_RESOURCE_TOKEN: resourceBridge.token,
});

invariantTest(
  "on DynamoDB (observed expiry) under random faults",
  30_000,
  () => ({
    faults: httpFaults(proxy, dynamodbRenewal),
    env,
  }),
  (summary) => {
    expect(summary.requestsThroughProxy).toBeGreaterThan(0);
    for (const kind of ["hang", "reset", "status", "truncate", "partition"] as const) {
      expect(summary.faults[kind], `faults of kind ${kind}`).toBeGreaterThan(0);
    }
  },
);

invariantTest(
  "taking permits of a semaphore of limit 2 on DynamoDB (observed expiry) under random faults",
  15_000,
  () => ({
    limit: 2,
    faults: httpFaults(proxy, dynamodbRenewal),
    env,
    meaningful: { msPerAcquisition: 2_000, holders: 4 },
  }),
  (summary) => {
    expect(summary.mostAtOnce).toBe(2);
    expect(summary.requestsThroughProxy).toBeGreaterThan(0);
  },
);
