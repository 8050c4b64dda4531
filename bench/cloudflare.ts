// Item 7: the Cloudflare Durable Object backend (leasehold/cloudflare) through its Worker route,
// beside Upstash through the bridge. Runs as a child process (node via tsx), like bench/latency.ts,
// so that the bridge in the parent never shares an event loop with the client under test; the
// LeaseholdLock object runs in workerd (Miniflare), started by the parent.
//
// Contenders, interleaved (each iteration runs every contender's full acquire → renew → release
// cycle once, in a fresh random order, each on its own lock):
//   cf floor      the identical requests to the route (same URL, headers and JSON body), replayed
//                 with the global fetch: what any client of the route pays at least;
//   cf leasehold  createMutex(durableObject({ url, token })): tryAcquire(), renew(), release();
//   upstash       createMutex(upstash(...)) on the bridge, the same cycle.
// Also counted: the requests each leasehold operation sends through the route (a counting fetch).
// The handoff (release → the next waiter's lease) and the crash takeover are in bench/failover.ts.
import { writeFileSync } from "node:fs";
import type { FetchLike } from "../src/backend.ts";
import { durableObject } from "../src/backends/cloudflare/index.ts";
import { upstash } from "../src/backends/upstash/index.ts";
import { createMutex } from "../src/index.ts";
import type { Op } from "./latency.ts";
import { type Cycle, mutexCycle, time3 } from "./lib/cycles.ts";
import { type Summary, shuffled, summarize } from "./lib/stats.ts";

export type CloudflareContender = "cf floor" | "cf leasehold" | "upstash";

export interface CloudflareTargets {
  cloudflare: { url: string; token: string };
  upstash: { url: string; token: string };
  iterations: number;
  warmup: number;
}

export interface CloudflareResult {
  runtime: string;
  iterations: number;
  warmup: number;
  series: Record<CloudflareContender, Record<Op, Summary>>;
  /** Requests leasehold sent through the route per operation (mean over the measured cycles). */
  requests: Record<Op, number>;
}

export async function runCloudflare(t: CloudflareTargets): Promise<CloudflareResult> {
  const ttl = 15_000;
  const { url, token } = t.cloudflare;
  let sent: Record<Op, number> = { acquire: 0, renew: 0, release: 0 };
  let phase: Op = "acquire";
  const counting: FetchLike = (u, init) => {
    sent[phase]++;
    return fetch(u, init);
  };
  const cf = createMutex(durableObject({ url, token, fetch: counting }), {
    name: "bench-cf",
    ttl,
    owner: "bench",
  });
  const up = createMutex(upstash({ ...t.upstash, prefix: "bench-cf:" }), {
    name: "bench-cf",
    ttl,
    owner: "bench",
  });
  // The floor: the same three requests the backend sends, as plain fetches.
  const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  const nonce = crypto.randomUUID();
  const bodies = [
    { op: "acquire", key: "bench-cf-floor", owner: "bench", nonce, ttl },
    { op: "renew", key: "bench-cf-floor", nonce, ttl },
    { op: "release", key: "bench-cf-floor", nonce },
  ].map((b) => JSON.stringify(b));
  const post = async (body: string) => {
    const res = await fetch(url, { method: "POST", headers, body });
    const text = await res.text();
    if (res.status !== 200 || text.includes('"ok":false'))
      throw new Error(`bench: cf floor answered ${res.status} ${text}`);
  };
  const cycles: Record<CloudflareContender, Cycle> = {
    "cf floor": () =>
      time3(
        () => post(bodies[0]!),
        () => post(bodies[1]!),
        () => post(bodies[2]!),
      ),
    "cf leasehold": () => {
      let lease: Awaited<ReturnType<typeof cf.tryAcquire>> = null;
      return time3(
        async () => {
          phase = "acquire";
          lease = await cf.tryAcquire();
          if (!lease) throw new Error("bench: cf tryAcquire found the lock taken");
        },
        () => {
          phase = "renew";
          return lease!.renew();
        },
        () => {
          phase = "release";
          return lease!.release();
        },
      );
    },
    upstash: mutexCycle(up, "upstash"),
  };
  const samples = Object.fromEntries(
    Object.keys(cycles).map((c) => [c, { acquire: [], renew: [], release: [] }]),
  ) as unknown as Record<CloudflareContender, Record<Op, number[]>>;
  for (let i = 0; i < t.warmup + t.iterations; i++) {
    if (i === t.warmup) sent = { acquire: 0, renew: 0, release: 0 };
    for (const c of shuffled(Object.keys(cycles) as CloudflareContender[])) {
      const [t0, t1, t2, t3] = await cycles[c]();
      if (i < t.warmup) continue;
      samples[c].acquire.push(t1 - t0);
      samples[c].renew.push(t2 - t1);
      samples[c].release.push(t3 - t2);
    }
  }
  const per = (n: number) => Math.round((n / t.iterations) * 100) / 100;
  return {
    runtime: `node ${process.version}`,
    iterations: t.iterations,
    warmup: t.warmup,
    series: Object.fromEntries(
      Object.entries(samples).map(([c, ops]) => [
        c,
        { acquire: summarize(ops.acquire), renew: summarize(ops.renew), release: summarize(ops.release) },
      ]),
    ) as CloudflareResult["series"],
    requests: { acquire: per(sent.acquire), renew: per(sent.renew), release: per(sent.release) },
  };
}

// Child mode: `BENCH_TARGETS='{...}' BENCH_OUT=file node --import tsx bench/cloudflare.ts`.
if (process.env.BENCH_TARGETS && process.env.BENCH_OUT && process.argv[1]?.endsWith("cloudflare.ts")) {
  const result = await runCloudflare(JSON.parse(process.env.BENCH_TARGETS) as CloudflareTargets);
  writeFileSync(process.env.BENCH_OUT, JSON.stringify(result));
  process.exit(0);
}
