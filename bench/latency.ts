// Item 1: acquire, renew and release latency, leasehold against the floor and the peers.
//
// Runs as a child process (node via tsx, Node 24 via `--import tsx`, Bun directly), so that the
// Upstash bridge living in the parent never shares an event loop with the client under test.
// The parent passes the servers in BENCH_TARGETS (JSON) and reads the result from BENCH_OUT.
//
// Contenders per backend, interleaved: every iteration runs each contender's full cycle
// (acquire, renew, release) once, in a fresh random order.
//   floor      the identical HTTP requests, captured from leasehold once (same URL, headers,
//              body; for Azure the same signed requests, same lease id) and replayed with the
//              global fetch, body read as text: what any client must pay at least.
//   leasehold  the public API: createMutex(...).tryAcquire(), lease.renew(), lease.release().
//   backend + timeout  the backend's methods, each request bounded as the core bounds it
//              (requestSignal with the core's bounds, done() after): the floor of any client with
//              a per-request timeout.
//   backend    the backend's methods alone (no deadline, timers or signals): with the one above,
//              splits the overhead between the adapter, the per-request timeout and the core.
//   peer       @upstash/lock (acquire / extend / release) on @upstash/redis, or
//              @azure/storage-blob's BlobLeaseClient (acquireLease / renewLease / releaseLease).
import { writeFileSync } from "node:fs";
import { BlobServiceClient, StorageSharedKeyCredential } from "@azure/storage-blob";
import { Lock } from "@upstash/lock";
import { Redis } from "@upstash/redis";
import type { Backend, FetchLike } from "../src/backend.ts";
import { sharedKeyAuth, stringToSign } from "../src/backends/azure-blob/auth.ts";
import { azureBlob } from "../src/backends/azure-blob/index.ts";
import { upstash } from "../src/backends/upstash/index.ts";
import { createMutex, LeaseLostError } from "../src/index.ts";
import { requestSignal } from "../src/signals.ts";
import { type Cycle, ours, time3 } from "./lib/cycles.ts";
import { type Summary, shuffled, summarize } from "./lib/stats.ts";

export type Op = "acquire" | "renew" | "release";
export const OPS: readonly Op[] = ["acquire", "renew", "release"];
export type Contender = "floor" | "leasehold" | "backend + timeout" | "backend" | "peer";

/** Where the servers are, as the parent started them. */
export interface Targets {
  upstash: { url: string; token: string };
  azure: { accountUrl: string; accountName: string; accountKey: string; container: string };
  iterations: number;
  warmup: number;
}

/** Latency summaries per backend, contender and operation, plus what ran them. */
export interface LatencyResult {
  runtime: string;
  version: string;
  iterations: number;
  warmup: number;
  series: Record<"upstash" | "azure", Record<Contender, Record<Op, Summary>>>;
  /**
   * Azure only, interleaved with the others: the floor's requests signed anew for every send,
   * with leasehold's WebCrypto signing and (where the runtime has it) node:crypto's HMAC.
   */
  extras: Record<string, Record<Op, Summary>>;
  peers: Record<"upstash" | "azure", string>;
  /** Micro-costs that explain the overhead, µs per call (batches of 100, median over batches). */
  costs: Record<string, Summary>;
}

/** One request as leasehold sent it, for replaying. */
export interface Captured {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
}

/** A fetch that records every request it passes on. */
function recording(log: Captured[]): FetchLike {
  return (url, init) => {
    log.push({
      url,
      method: init.method,
      headers: { ...init.headers },
      ...(init.body ? { body: init.body } : {}),
    });
    return fetch(url, init);
  };
}

/** Sends one captured request with the global fetch and reads the body, as the backends do. */
export async function replay(r: Captured): Promise<number> {
  const res = await fetch(r.url, r.body === undefined ? { method: r.method, headers: r.headers } : r);
  await res.text();
  return res.status;
}

function expectStatus(op: string, status: number, ok: readonly number[]): void {
  if (!ok.includes(status)) throw new Error(`bench floor: ${op} answered HTTP ${status}`);
}

/** The owner of every lease the latency rounds take. */
const OWNER = "bench";

/** Captures the requests of one acquire/renew/release cycle of leasehold on `make(fetch)`. */
export async function capture(
  make: (f: FetchLike) => Backend,
  name: string,
  ttl: number,
): Promise<Captured[][]> {
  const log: Captured[] = [];
  // One owner for every cycle, as an app's instance has: a steady-state acquire.
  const mutex = createMutex(make(recording(log)), { name, ttl, renew: false, owner: OWNER });
  const phases: Captured[][] = [];
  let mark = 0;
  const cut = () => {
    phases.push(log.slice(mark));
    mark = log.length;
  };
  const lease = await mutex.tryAcquire();
  if (!lease) throw new Error("bench: capture could not acquire");
  cut();
  await lease.renew();
  cut();
  await lease.release();
  cut();
  return phases;
}

async function upstashCycles(t: Targets): Promise<Record<Contender, Cycle>> {
  const ttl = 15_000;
  const name = "bench-latency";
  const make = (f?: FetchLike) =>
    upstash({ url: t.upstash.url, token: t.upstash.token, ...(f ? { fetch: f } : {}), prefix: "bench:" });
  const phases = await capture(make, name, ttl);
  const [acq, ren, rel] = phases.map((p) => (p.length === 1 ? p[0] : undefined));
  if (!acq || !ren || !rel) throw new Error("bench: expected one request per upstash operation");
  const redis = new Redis({ url: t.upstash.url, token: t.upstash.token });
  return {
    floor: () =>
      time3(
        async () => expectStatus("acquire", await replay(acq), [200]),
        async () => expectStatus("renew", await replay(ren), [200]),
        async () => expectStatus("release", await replay(rel), [200]),
      ),
    ...ours(make(), name, ttl),
    peer: async () => {
      const lock = new Lock({ id: "bench:peer-lock", redis, lease: ttl, retry: { attempts: 1, delay: 0 } });
      return time3(
        async () => {
          if (!(await lock.acquire())) throw new Error("bench: @upstash/lock acquire failed");
        },
        async () => {
          if (!(await lock.extend(ttl))) throw new Error("bench: @upstash/lock extend failed");
        },
        async () => {
          if (!(await lock.release())) throw new Error("bench: @upstash/lock release failed");
        },
      );
    },
  };
}

/** Signs a captured request anew (fresh x-ms-date and signature), as a client must per send. */
type Signer = (r: Captured) => Promise<Captured> | Captured;

function signers(accountName: string, accountKey: string): Record<string, Signer> {
  const unsigned = (r: Captured) => {
    const { authorization: _a, "x-ms-date": _d, ...rest } = r.headers;
    return rest;
  };
  const auth = sharedKeyAuth(accountName, accountKey);
  const out: Record<string, Signer> = {
    "floor, signed per send (WebCrypto, leasehold's signing)": async (r) => {
      const a = await auth.authorize(r.method, r.url, {
        ...unsigned(r),
        "x-ms-date": new Date().toUTCString(),
      });
      return { ...r, url: a.url, headers: a.headers };
    },
  };
  type Hmac = (a: string, k: Uint8Array) => { update(s: string): { digest(e: "base64"): string } };
  const createHmac = (
    process as { getBuiltinModule?: (id: string) => { createHmac?: Hmac } | undefined }
  ).getBuiltinModule?.("node:crypto")?.createHmac;
  if (createHmac) {
    const key = Uint8Array.from(atob(accountKey), (c) => c.charCodeAt(0));
    out["floor, signed per send (node:crypto createHmac)"] = (r) => {
      const h: Record<string, string> = { ...unsigned(r), "x-ms-date": new Date().toUTCString() };
      const sig = createHmac("sha256", key)
        .update(stringToSign(accountName, r.method, r.url, h))
        .digest("base64");
      h.authorization = `SharedKey ${accountName}:${sig}`;
      return { ...r, headers: h };
    };
  }
  return out;
}

async function azureCycles(
  t: Targets,
): Promise<Record<Contender, Cycle> & { extras: Record<string, Cycle> }> {
  const ttl = 15_000;
  const name = "bench-latency";
  const { accountUrl, accountName, accountKey, container } = t.azure;
  const make = (f?: FetchLike) =>
    azureBlob({
      accountUrl,
      accountName,
      accountKey,
      container,
      createContainer: true,
      ...(f ? { fetch: f } : {}),
    });
  // The first cycle creates the blob; capture the second, steady-state one.
  await capture(make, name, ttl);
  const [acq, renewal, releasing] = await capture(make, name, ttl);
  const ren = renewal?.length === 1 ? renewal[0] : undefined;
  const rel = releasing?.length === 1 ? releasing[0] : undefined;
  // A steady-state acquire by the same owner: the lease and a HEAD together, then the sequence-number
  // increment conditional on the HEAD's ETag (the owner is unchanged, so no metadata write).
  // (The lease and the HEAD are signed concurrently, so they may be sent in either order.)
  const lease = acq?.find((r) => r.url.includes("comp=lease"));
  const head = acq?.find((r) => r.method === "HEAD");
  const increment = acq?.find((r) => r.url.includes("comp=properties"));
  if (acq?.length !== 3 || !lease || !head || !increment || !ren || !rel) {
    throw new Error("bench: unexpected azure request pattern");
  }
  const service = new BlobServiceClient(accountUrl, new StorageSharedKeyCredential(accountName, accountKey));
  const blob = service.getContainerClient(container).getBlockBlobClient("bench-peer-lock");
  if (!(await blob.exists())) await blob.upload("", 0);
  const floor =
    (sign: Signer): Cycle =>
    () => {
      const send = async (r: Captured) => replay(await sign(r));
      return time3(
        async () => {
          const [leased, described] = await Promise.all([send(lease), send(head)]);
          expectStatus("acquire", leased, [200, 201]);
          expectStatus("head", described, [200]);
          // Replayed as captured, its If-Match names an ETag the last cycle's increment changed:
          // Azure checks it and answers 412 instead of incrementing, a little less work than ours.
          expectStatus("fence", await send(increment), [200, 412]);
        },
        async () => expectStatus("renew", await send(ren), [200]),
        async () => expectStatus("release", await send(rel), [200]),
      );
    };
  return {
    floor: floor((r) => r),
    extras: Object.fromEntries(
      Object.entries(signers(accountName, accountKey)).map(([k, v]) => [k, floor(v)]),
    ),
    ...ours(make(), name, ttl),
    peer: async () => {
      const client = blob.getBlobLeaseClient(crypto.randomUUID());
      return time3(
        () => client.acquireLease(ttl / 1000),
        () => client.renewLease(),
        () => client.releaseLease(),
      );
    },
  };
}

/** Runs the interleaved latency rounds against `t` in this process. */
export async function runLatency(t: Targets): Promise<LatencyResult> {
  const az = await azureCycles(t);
  const { extras, ...azMain } = az;
  const backends: Record<"upstash" | "azure", Record<string, Cycle>> = {
    upstash: await upstashCycles(t),
    azure: { ...azMain, ...extras },
  };
  type Samples = Record<string, Record<Op, number[]>>;
  const samples: Record<"upstash" | "azure", Samples> = { upstash: {}, azure: {} };
  for (const b of ["upstash", "azure"] as const) {
    const names = Object.keys(backends[b]);
    for (const c of names) samples[b][c] = { acquire: [], renew: [], release: [] };
    for (let i = 0; i < t.warmup + t.iterations; i++) {
      for (const c of shuffled(names)) {
        const [t0, t1, t2, t3] = await backends[b][c]!();
        if (i < t.warmup) continue;
        samples[b][c]!.acquire.push(t1 - t0);
        samples[b][c]!.renew.push(t2 - t1);
        samples[b][c]!.release.push(t3 - t2);
      }
    }
  }
  const sum = (s: Samples, names: string[]) =>
    Object.fromEntries(
      names.map((c) => [c, Object.fromEntries(OPS.map((op) => [op, summarize(s[c]![op])]))]),
    );
  const main: Contender[] = ["floor", "leasehold", "backend + timeout", "backend", "peer"];
  const bun = (globalThis as { Bun?: { version: string } }).Bun;
  return {
    runtime: bun ? "bun" : "node",
    version: bun ? bun.version : process.version,
    iterations: t.iterations,
    warmup: t.warmup,
    series: {
      upstash: sum(samples.upstash, main) as Record<Contender, Record<Op, Summary>>,
      azure: sum(samples.azure, main) as Record<Contender, Record<Op, Summary>>,
    },
    extras: sum(samples.azure, Object.keys(extras)) as Record<string, Record<Op, Summary>>,
    peers: { upstash: "@upstash/lock + @upstash/redis", azure: "@azure/storage-blob BlobLeaseClient" },
    costs: await costs(t),
  };
}

/** µs per call of `fn`, timed in batches of 100. */
async function cost(fn: () => unknown, batches = 200): Promise<Summary> {
  const xs: number[] = [];
  for (let b = 0; b < batches + 20; b++) {
    const t0 = performance.now();
    for (let i = 0; i < 100; i++) await fn();
    if (b >= 20) xs.push(((performance.now() - t0) / 100) * 1000);
  }
  return summarize(xs);
}

/** What the pieces of leasehold's per-request work cost on this runtime. */
async function costs(t: Targets): Promise<Record<string, Summary>> {
  const { accountName, accountKey, accountUrl, container } = t.azure;
  const url = `${accountUrl}/${container}/bench-latency?comp=lease`;
  const headers = {
    "x-ms-lease-action": "renew",
    "x-ms-lease-id": crypto.randomUUID(),
    "x-ms-version": "2024-11-04",
  };
  const auth = sharedKeyAuth(accountName, accountKey);
  const out: Record<string, Summary> = {
    "SharedKey signing, WebCrypto (leasehold's authorize)": await cost(() =>
      auth.authorize("PUT", url, { ...headers, "x-ms-date": new Date().toUTCString() }),
    ),
  };
  type Hmac = (a: string, k: Uint8Array) => { update(s: string): { digest(e: "base64"): string } };
  const nodeCrypto = (
    process as { getBuiltinModule?: (id: string) => { createHmac?: Hmac } | undefined }
  ).getBuiltinModule?.("node:crypto");
  if (nodeCrypto?.createHmac) {
    const createHmac = nodeCrypto.createHmac;
    const key = Uint8Array.from(atob(accountKey), (c) => c.charCodeAt(0));
    out["SharedKey signing, node:crypto createHmac (same string to sign)"] = await cost(() => {
      const h = { ...headers, "x-ms-date": new Date().toUTCString() };
      return createHmac("sha256", key)
        .update(stringToSign(accountName, "PUT", url, h))
        .digest("base64");
    });
  }
  out["new LeaseLostError (the release reason)"] = await cost(
    () => new LeaseLostError('lease on "x" was released'),
  );
  out["new LeaseLostError with Error.stackTraceLimit = 0"] = await cost(() => {
    const E = Error as { stackTraceLimit?: number };
    const limit = E.stackTraceLimit;
    E.stackTraceLimit = 0;
    try {
      return new LeaseLostError('lease on "x" was released');
    } finally {
      E.stackTraceLimit = limit;
    }
  });
  const parent = new AbortController();
  out["per-request timeout signal (requestSignal + done)"] = await cost(() =>
    requestSignal("bench", "renew", 3_000, parent.signal).done(),
  );
  return out;
}

// Child mode: `BENCH_TARGETS='{...}' BENCH_OUT=file <runtime> bench/latency.ts`.
if (process.env.BENCH_TARGETS && process.env.BENCH_OUT && process.argv[1]?.endsWith("latency.ts")) {
  const result = await runLatency(JSON.parse(process.env.BENCH_TARGETS) as Targets);
  writeFileSync(process.env.BENCH_OUT, JSON.stringify(result));
  process.exit(0);
}
