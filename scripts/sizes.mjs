// Bundle sizes: the one definition of what is measured and how, and the budgets. bench/size.ts
// reports every entry (bench section 3); scripts/check-bundles.mjs (run by `npm test` through
// check:package) fails the build when a budgeted entry is over its budget (docs/DESIGN.md §7).
//
// Each of our entries is the minimal use of a lock: create it, try to acquire, renew, release, so
// that tree-shaking keeps what a lock-only app ships; every entry is built with the same esbuild
// settings (bundle, minify, ESM, platform browser, target es2022) and gzipped at level 9. The
// entries import the sources (src/), resolved from this directory.
import { gzipSync } from "node:zlib";
import { build } from "esbuild";

/** The settings, in words (for the reports). */
export const SETTINGS = "bundle, minify, format esm, platform browser, target es2022; gzip level 9";

/**
 * Issue 29's budgets, min+gzip bytes of the lock-only entry: the targets bench/RESULTS.md judges
 * (met or missed, with each file's bytes). Entries without one are reported, not judged.
 */
export const BUDGETS = { core: 4608, upstash: 8192, azure: 10752, memory: 5120 };

/**
 * The line `npm test` holds (check-bundles fails the build above it), min+gzip bytes of the same
 * entries: each entry's size when it was last set, plus a little room. The budgets above are
 * not met yet (docs/DESIGN.md §7 says why, bench/RESULTS.md by how much); until they are, no
 * change may grow a lock-only app past this line unnoticed. Lower it when an entry shrinks; raise
 * it only in a commit that says what the bytes buy.
 */
export const CEILINGS = { core: 7490, upstash: 13275, azure: 15830, memory: 8795 };

/** A lock-only app on `make` (a backend expression over `opts`), after the imports `adapter`. */
export const ours = (adapter, make, src = "../src") => `
import { createMutex } from "${src}/index.ts";
${adapter}
export async function cycle(opts) {
  const lease = await createMutex(${make}, { name: "job" }).tryAcquire();
  await lease?.renew();
  await lease?.release();
}`;

/** Peers, built for Node (they import Node built-ins), their client library left out like ours. */
export const PEERS = new Set(["upstash-lock", "azure-sdk", "redlock", "redis-semaphore"]);

export const ENTRIES = {
  core: { label: "leasehold core alone (createMutex)", code: ours("", "opts.backend") },
  memory: {
    label: "leasehold core + memory",
    code: ours('import { memory } from "../src/backends/memory/index.ts";', "memory()"),
  },
  upstash: {
    label: "leasehold core + upstash",
    code: ours('import { upstash } from "../src/backends/upstash/index.ts";', "upstash(opts)"),
  },
  azure: {
    label: "leasehold core + azure-blob",
    code: ours('import { azureBlob } from "../src/backends/azure-blob/index.ts";', "azureBlob(opts)"),
  },
  redis: {
    label: "leasehold core + redis (the client not counted)",
    code: ours('import { redis } from "../src/backends/redis/index.ts";', "redis(opts)"),
  },
  postgres: {
    label: "leasehold core + postgres (the driver not counted)",
    code: ours('import { postgres } from "../src/backends/postgres/index.ts";', "postgres(opts)"),
  },
  "deno-kv": {
    label: "leasehold core + deno-kv (the Deno.Kv not counted)",
    code: ours('import { denoKv } from "../src/backends/deno-kv/index.ts";', "denoKv(opts.kv)"),
  },
  dynamodb: {
    label: "leasehold core + dynamodb",
    code: ours('import { dynamodb } from "../src/backends/dynamodb/index.ts";', "dynamodb(opts)"),
  },
  quorum: {
    // A quorum needs at least three members; the members share their code, so N adds a few bytes.
    label: "leasehold core + quorum of 3 upstash members",
    code: ours(
      'import { quorum } from "../src/backends/quorum/index.ts";\nimport { upstash } from "../src/backends/upstash/index.ts";',
      "quorum(opts.members.map((m) => upstash(m)))",
    ),
  },
  redlock: {
    label: "redlock 5 (ioredis not counted; built for node)",
    code: `
import Redlock from "redlock";
export async function cycle(client) {
  const lock = await new Redlock([client]).acquire(["job"], 10000);
  await (await lock.extend(10000)).release();
}`,
    node: { external: ["ioredis"] },
  },
  "redis-semaphore": {
    label: "redis-semaphore Mutex (ioredis not counted; built for node)",
    code: `
import { Mutex } from "redis-semaphore";
export async function cycle(client) {
  const m = new Mutex(client, "job");
  if (await m.tryAcquire()) await m.release();
}`,
    node: { external: ["ioredis"] },
  },
  election: {
    label: "leasehold core + memory + election (createElection, lead)",
    code: `
import { createElection, createMutex } from "../src/index.ts";
import { memory } from "../src/backends/memory/index.ts";
export async function cycle(opts) {
  await createElection(createMutex(memory(), { name: "job" })).lead(() => {}, opts);
}`,
  },
  cloudflare: {
    label: "leasehold core + cloudflare (durableObject)",
    code: ours('import { durableObject } from "../src/backends/cloudflare/index.ts";', "durableObject(opts)"),
  },
  "cloudflare-worker": {
    label: "the Worker side: LeaseholdLock + lockHandler (no core)",
    code: `
export { LeaseholdLock } from "../src/backends/cloudflare/index.ts";
import { lockHandler } from "../src/backends/cloudflare/index.ts";
export default { fetch: (request, env) => lockHandler(env.LOCKS, { token: env.LEASEHOLD_DO_SECRET })(request) };`,
  },
  "upstash-lock": {
    label: "@upstash/lock + @upstash/redis",
    code: `
import { Lock } from "@upstash/lock";
import { Redis } from "@upstash/redis";
export async function cycle(opts) {
  const lock = new Lock({ id: "job", redis: new Redis(opts) });
  if (await lock.acquire()) { await lock.extend(10000); await lock.release(); }
}`,
  },
  "azure-sdk": {
    label: "@azure/storage-blob BlobLeaseClient",
    code: `
import { BlobServiceClient } from "@azure/storage-blob";
export async function cycle(url) {
  const lease = new BlobServiceClient(url).getContainerClient("locks").getBlobClient("job").getBlobLeaseClient();
  await lease.acquireLease(15); await lease.renewLease(); await lease.releaseLease();
}`,
  },
};

/** Bytes gzipped at level 9. */
export const gzip = (bytes) => gzipSync(bytes, { level: 9 }).length;

/** One entry's code (resolved from this directory) bundled and minified, with esbuild's metafile. */
export async function bundle(code, node) {
  const out = await build({
    stdin: { contents: code, resolveDir: new URL(".", import.meta.url).pathname, loader: "ts" },
    bundle: true,
    minify: true,
    format: "esm",
    platform: node ? "node" : "browser",
    ...(node ? { external: node.external } : {}),
    target: "es2022",
    write: false,
    metafile: true,
    logLevel: "silent",
  });
  return { bytes: out.outputFiles[0].contents, metafile: out.metafile };
}

/**
 * The min+gzip bytes of each budgeted entry, and by how much it is over its budget (0: within).
 * `budgets`: CEILINGS (what `npm test` enforces), or others (BUDGETS, a test's).
 */
export async function checkBudgets(budgets = CEILINGS) {
  const rows = [];
  for (const [id, budget] of Object.entries(budgets)) {
    const { bytes } = await bundle(ENTRIES[id].code, ENTRIES[id].node);
    const size = gzip(bytes);
    rows.push({
      id,
      label: ENTRIES[id].label,
      minified: bytes.length,
      gzip: size,
      budget,
      over: Math.max(0, size - budget),
    });
  }
  return rows;
}
