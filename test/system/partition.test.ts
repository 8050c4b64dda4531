// Partition: the fault proxy black-holes the holder. Its signal must abort while the lock still
// has time left on the server (read straight from Redis / Azurite / the Durable Object at the
// moment of the abort),
// and the other contender, which still reaches the server, acquires only after that abort.
import { BlobServiceClient } from "@azure/storage-blob";
import { afterEach, describe, expect, inject, it } from "vitest";
import { azureBlob } from "../../src/backends/azure-blob/index.ts";
import { durableObject } from "../../src/backends/cloudflare/index.ts";
import { upstash } from "../../src/backends/upstash/index.ts";
import { createMutex, type Lease } from "../../src/index.ts";
import { defaultStopMargin, guardOf } from "../../src/timing.ts";
import { type FaultProxy, startFaultProxy } from "../harness/servers/fault-proxy.ts";
import { connectResp, type RespConnection } from "../harness/servers/resp.ts";

const cleanup: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

function proxy(target: string): FaultProxy {
  const p = startFaultProxy(target);
  cleanup.push(() => p.stop());
  return p;
}

/** Waits for `lease.signal` to abort and runs `probe` in the same turn; resolves the abort time and the probe. */
function onAbort<T>(lease: Lease, probe: () => Promise<T>): Promise<{ at: number; probe: T }> {
  return new Promise((resolve, reject) => {
    lease.signal.addEventListener(
      "abort",
      () => {
        const at = performance.now();
        probe().then((value) => resolve({ at, probe: value }), reject);
      },
      { once: true },
    );
  });
}

/** Waits for the holder's abort and for the other's lease, then heals the partition. */
async function outcome<T>(
  p: FaultProxy,
  aborted: Promise<{ at: number; probe: T }>,
  acquired: Promise<{ lease: Lease; at: number }>,
) {
  const abort = await aborted;
  const got = await acquired;
  cleanup.push(() => got.lease.release());
  p.heal("a");
  return { abort, got };
}

describe("partition of the holder", () => {
  it("upstash: the holder aborts while the lock's PTTL is still > 0; the other acquires only after", async () => {
    const { url, token, redisSocket } = inject("upstash");
    const p = proxy(url);
    const [urlA, urlB] = await Promise.all([p.client("a"), p.client("b")]);
    const name = `partition-${crypto.randomUUID().slice(0, 8)}`;
    const ttl = 2_000;
    const a = createMutex(upstash({ url: urlA, token }), { name, ttl, owner: "A" });
    const b = createMutex(upstash({ url: urlB, token }), { name, ttl, owner: "B", retryDelay: 50 });
    const redis: RespConnection = await connectResp(redisSocket);
    cleanup.push(() => redis.close());

    const leaseA = await a.acquire();
    cleanup.push(() => leaseA.release().catch(() => {}));
    await leaseA.renew(); // a renewal went through before the partition
    const key = `leasehold:{${name}}`;
    const aborted = onAbort(leaseA, async () => {
      const [pttl, value] = await Promise.all([redis.send(["PTTL", key]), redis.send(["GET", key])]);
      return { pttl: pttl as number, holder: String(value).split("|")[2] };
    });
    const tPartition = performance.now();
    p.partition("a");
    const acquiredB = b.acquire({ timeout: 10_000 }).then((lease) => ({ lease, at: performance.now() }));

    const { abort, got } = await outcome(p, aborted, acquiredB);
    const figures = {
      ttl,
      guard: guardOf(ttl, defaultStopMargin(ttl)),
      abortAfterPartitionMs: Math.round(abort.at - tPartition),
      pttlAtAbortMs: abort.probe.pttl,
      holderAtAbort: abort.probe.holder,
      acquireAfterAbortMs: Number((got.at - abort.at).toFixed(1)),
      tokens: [leaseA.token, got.lease.token],
      reason: (leaseA.signal.reason as Error).message,
    };
    console.log(`[partition upstash] ${JSON.stringify(figures)}`);
    expect(abort.probe.pttl).toBeGreaterThan(0);
    expect(abort.probe.holder).toBe("A"); // the lock on the server was still A's
    expect(got.at).toBeGreaterThan(abort.at);
    expect(got.lease.token).toBeGreaterThan(leaseA.token);
    expect(leaseA.signal.reason).toMatchObject({ code: "ERR_LEASE_LOST" });
    expect(p.counts().blackholed).toBeGreaterThan(0);
  });

  it("cloudflare: the holder aborts while the object still holds its lease; the waiter gets it only after", async () => {
    const { url, token } = inject("cloudflare");
    const p = proxy(url);
    const [urlA, urlB] = await Promise.all([p.client("a"), p.client("b")]);
    const name = `partition-${crypto.randomUUID().slice(0, 8)}`;
    const ttl = 2_000;
    const a = createMutex(durableObject({ url: urlA, token }), { name, ttl, owner: "A" });
    const b = createMutex(durableObject({ url: urlB, token }), { name, ttl, owner: "B", retryDelay: 50 });
    const direct = durableObject({ url, token });

    const leaseA = await a.acquire();
    cleanup.push(() => leaseA.release().catch(() => {}));
    await leaseA.renew(); // a renewal went through before the partition
    const aborted = onAbort(leaseA, () => direct.inspect({ key: name }));
    const tPartition = performance.now();
    p.partition("a");
    // B waits in line (its requests held open by the object) and is woken by the expiry.
    const acquiredB = b.acquire({ timeout: 10_000 }).then((lease) => ({ lease, at: performance.now() }));

    const { abort, got } = await outcome(p, aborted, acquiredB);
    const figures = {
      ttl,
      guard: guardOf(ttl, defaultStopMargin(ttl)),
      abortAfterPartitionMs: Math.round(abort.at - tPartition),
      ttlLeftAtAbortMs: abort.probe?.ttlLeft,
      holderAtAbort: abort.probe?.owner,
      acquireAfterAbortMs: Number((got.at - abort.at).toFixed(1)),
      tokens: [leaseA.token, got.lease.token],
      reason: (leaseA.signal.reason as Error).message,
    };
    console.log(`[partition cloudflare] ${JSON.stringify(figures)}`);
    expect(abort.probe?.ttlLeft).toBeGreaterThan(0);
    expect(abort.probe?.owner).toBe("A"); // the lock in the object was still A's
    expect(got.at).toBeGreaterThan(abort.at);
    expect(got.lease.token).toBeGreaterThan(leaseA.token);
    expect(leaseA.signal.reason).toMatchObject({ code: "ERR_LEASE_LOST" });
    expect(p.counts().blackholed).toBeGreaterThan(0);
  });

  it("azure-blob: the holder aborts while the blob is still leased; the other acquires only after", {
    timeout: 40_000,
  }, async () => {
    const az = inject("azurite");
    const container = `partition-${crypto.randomUUID().slice(0, 8)}`;
    const service = BlobServiceClient.fromConnectionString(az.connectionString);
    await service.createContainer(container);
    cleanup.push(() => service.deleteContainer(container));
    const p = proxy(az.accountUrl);
    const [urlA, urlB] = await Promise.all([p.client("a"), p.client("b")]);
    const backend = (accountUrl: string) =>
      azureBlob({ accountUrl, accountName: az.accountName, accountKey: az.accountKey, container });
    const name = "partitioned";
    const ttl = 15_000;
    const a = createMutex(backend(urlA), { name, ttl, owner: "A" });
    const b = createMutex(backend(urlB), { name, ttl, owner: "B", retryDelay: 200 });
    const blob = service.getContainerClient(container).getBlobClient(name);

    const leaseA = await a.acquire();
    const tAcquired = performance.now();
    cleanup.push(() => leaseA.release().catch(() => {}));
    const aborted = onAbort(leaseA, async () => {
      const props = await blob.getProperties();
      return { state: props.leaseState, status: props.leaseStatus, owner: props.metadata?.owner };
    });
    p.partition("a"); // the first renewal (after ~5 s) and every retry are black-holed
    const acquiredB = b.acquire({ timeout: 30_000 }).then((lease) => ({ lease, at: performance.now() }));

    const { abort, got } = await outcome(p, aborted, acquiredB);
    const figures = {
      ttl,
      guard: guardOf(ttl, defaultStopMargin(ttl)),
      abortAfterAcquireMs: Math.round(abort.at - tAcquired),
      leaseStateAtAbort: abort.probe.state,
      leaseStatusAtAbort: abort.probe.status,
      ownerAtAbort: abort.probe.owner,
      acquireAfterAbortMs: Number((got.at - abort.at).toFixed(1)),
      tokens: [leaseA.token, got.lease.token],
    };
    console.log(`[partition azure-blob] ${JSON.stringify(figures)}`);
    expect(abort.probe.state).toBe("leased");
    expect(abort.probe.status).toBe("locked");
    expect(abort.probe.owner).toBe("A");
    expect(got.at).toBeGreaterThan(abort.at);
    expect(got.lease.token).toBeGreaterThan(leaseA.token);
  });
});
