// Item 2: requests and sequential round trips per operation, counted at the server side: the
// bridge's own request counter for Upstash, a counting proxy in front of Azurite for Azure
// (every contender, the SDK included, is pointed at the proxy).
import { BlobServiceClient, StorageSharedKeyCredential } from "@azure/storage-blob";
import { Lock } from "@upstash/lock";
import { Redis } from "@upstash/redis";
import { azureBlob } from "../src/backends/azure-blob/index.ts";
import { upstash } from "../src/backends/upstash/index.ts";
import { createMutex } from "../src/index.ts";
import { OPS, type Op } from "./latency.ts";
import { countingProxy, type Servers } from "./lib/servers.ts";
import { summarize } from "./lib/stats.ts";

/**
 * Per operation: mean requests, the median over cycles of sequential round trips (robust to a
 * rare scheduling delay that makes parallel requests arrive apart), and which requests they were.
 */
export interface Count {
  requests: number;
  rounds: number;
  kinds: Record<string, number>;
}
export type RoundTrips = Record<"upstash" | "azure", Record<"leasehold" | "peer", Record<Op, Count>>>;

/** Counts over `cycles` steady-state acquire/renew/release cycles of each contender. */
export async function runRoundTrips(s: Servers, cycles: number): Promise<RoundTrips> {
  const ttl = 15_000;
  type Counter = {
    reset(): void;
    read(): { requests: number; rounds: number; kinds: Record<string, number> };
  };
  const bridgeCounter: Counter = {
    reset: () => s.bridge.resetStats(),
    // Each upstash request here is sequential, so requests = rounds.
    read: () => {
      const st = s.bridge.stats();
      return { requests: st.total, rounds: st.total, kinds: st.paths };
    },
  };
  const proxy = await countingProxy(s.azurite.port);
  const proxyCounter: Counter = { reset: () => proxy.reset(), read: () => proxy.stats() };
  const accountUrl = `${proxy.origin}/${s.azure.accountName}`;
  const { accountName, accountKey, container } = s.azure;

  const measure = async (
    counter: Counter,
    cycle: (step: (op: Op, fn: () => Promise<unknown>) => Promise<void>) => Promise<void>,
  ): Promise<Record<Op, Count>> => {
    const total: Record<Op, Count> = {
      acquire: { requests: 0, rounds: 0, kinds: {} },
      renew: { requests: 0, rounds: 0, kinds: {} },
      release: { requests: 0, rounds: 0, kinds: {} },
    };
    const rounds: Record<Op, number[]> = { acquire: [], renew: [], release: [] };
    const step = async (op: Op, fn: () => Promise<unknown>) => {
      counter.reset();
      await fn();
      const c = counter.read();
      total[op].requests += c.requests;
      rounds[op].push(c.rounds);
      for (const [k, v] of Object.entries(c.kinds))
        total[op].kinds[k] = (total[op].kinds[k] ?? 0) + v / cycles;
    };
    await cycle(async (_op, fn) => {
      await fn();
    }); // warm-up: creates blobs, opens connections
    for (let i = 0; i < cycles; i++) await cycle(step);
    for (const op of OPS) {
      total[op].requests = Math.round((total[op].requests / cycles) * 1000) / 1000;
      total[op].rounds = summarize(rounds[op]).median;
      for (const k of Object.keys(total[op].kinds)) {
        total[op].kinds[k] = Math.round(total[op].kinds[k]! * 1000) / 1000;
      }
    }
    return total;
  };
  type Step = (op: Op, fn: () => Promise<unknown>) => Promise<void>;

  try {
    const up = createMutex(upstash({ url: s.bridge.url, token: s.bridge.token, prefix: "bench:" }), {
      name: "bench-rt",
      ttl,
    });
    const redis = new Redis({ url: s.bridge.url, token: s.bridge.token });
    const azMutex = createMutex(
      azureBlob({ accountUrl, accountName, accountKey, container, createContainer: true }),
      {
        name: "bench-rt",
        ttl,
      },
    );
    const service = new BlobServiceClient(
      accountUrl,
      new StorageSharedKeyCredential(accountName, accountKey),
    );
    const blob = service.getContainerClient(container).getBlockBlobClient("bench-rt-peer");
    if (!(await blob.exists())) await blob.upload("", 0);

    const leaseholdCycle = (m: typeof up) => async (step: Step) => {
      let lease: Awaited<ReturnType<typeof m.tryAcquire>> = null;
      await step("acquire", async () => {
        lease = await m.tryAcquire();
      });
      if (!lease) throw new Error("bench: round trips: lock taken");
      await step("renew", () => lease!.renew());
      await step("release", () => lease!.release());
    };
    return {
      upstash: {
        leasehold: await measure(bridgeCounter, leaseholdCycle(up)),
        peer: await measure(bridgeCounter, async (step) => {
          const lock = new Lock({ id: "bench:rt-peer", redis, lease: ttl, retry: { attempts: 1, delay: 0 } });
          await step("acquire", () => lock.acquire());
          await step("renew", () => lock.extend(ttl));
          await step("release", () => lock.release());
        }),
      },
      azure: {
        leasehold: await measure(proxyCounter, leaseholdCycle(azMutex)),
        peer: await measure(proxyCounter, async (step) => {
          const client = blob.getBlobLeaseClient(crypto.randomUUID());
          await step("acquire", () => client.acquireLease(ttl / 1000));
          await step("renew", () => client.renewLease());
          await step("release", () => client.releaseLease());
        }),
      },
    };
  } finally {
    await proxy.stop();
  }
}
