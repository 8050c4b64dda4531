// Item 3: bundle size, min+gzip, every entry built with the same esbuild settings (bundle,
// minify, ESM, platform browser, target es2022; gzip level 9). Each entry is the minimal use
// of a lock: create it, acquire, renew, release, so that tree-shaking keeps what a user ships.
import { existsSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { build, version as esbuildVersion, type Metafile } from "esbuild";
import { BACKENDS, entryOf } from "../scripts/backends.mjs";

export interface SizeRow {
  id: string;
  label: string;
  minified: number;
  gzip: number;
  /** Minified bytes each source file contributes (ours only; esbuild's metafile). */
  inputs?: Record<string, number>;
}
export interface SizeResult {
  esbuild: string;
  settings: string;
  rows: SizeRow[];
}

const ours = (adapter: string, make: string, src = "../src") => `
import { createMutex } from "${src}/index.ts";
${adapter}
export async function cycle(opts) {
  const lease = await createMutex(${make}, { name: "job" }).tryAcquire();
  await lease?.renew();
  await lease?.release();
}`;

/** Peers built for Node (they import Node built-ins), their client library left out like ours. */
interface Entry {
  label: string;
  code: string;
  node?: { external: string[] };
}

const PEERS = new Set(["upstash-lock", "azure-sdk", "redlock", "redis-semaphore"]);

const ENTRIES: Record<string, Entry> = {
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

/** min+gzip of one entry's code, resolved from this directory. */
async function bundle(
  code: string,
  node?: { external: string[] },
): Promise<{ bytes: Uint8Array; metafile: Metafile }> {
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
  return { bytes: out.outputFiles[0]!.contents, metafile: out.metafile };
}

const gzip = (bytes: Uint8Array) => gzipSync(bytes, { level: 9 }).length;

/**
 * The core + upstash and core + azure-blob entries (min+gzip) built from another copy of src/
 * (an absolute path), for section 13's size per version.
 */
export async function sizeOfSrc(src: string): Promise<{ upstash: number; azure: number }> {
  const of = async (adapter: string, make: string) => gzip((await bundle(ours(adapter, make, src))).bytes);
  // Before the backends moved into folders (5f24041), each was one file.
  const at = (backend: string) =>
    existsSync(`${src}/backends/${backend}/index.ts`)
      ? `${src}/backends/${backend}/index.ts`
      : `${src}/backends/${backend}.ts`;
  return {
    upstash: await of(`import { upstash } from "${at("upstash")}";`, "upstash(opts)"),
    azure: await of(`import { azureBlob } from "${at("azure-blob")}";`, "azureBlob(opts)"),
  };
}

export async function runSize(): Promise<SizeResult> {
  // Every backend of the table (scripts/backends.mjs) has its entry here.
  for (const row of BACKENDS) {
    if (!Object.values(ENTRIES).some(({ code }) => code.includes(`"../${entryOf(row)}"`)))
      throw new Error(`bench/size.ts: no entry imports ${entryOf(row)} (the ${row.name} backend)`);
  }
  const rows: SizeRow[] = [];
  for (const [id, { label, code, node }] of Object.entries(ENTRIES)) {
    const out = await bundle(code, node);
    const bytes = out.bytes;
    const row: SizeRow = { id, label, minified: bytes.length, gzip: gzip(bytes) };
    const output = Object.values(out.metafile.outputs)[0];
    if (output && !PEERS.has(id)) {
      row.inputs = Object.fromEntries(
        Object.entries(output.inputs)
          .filter(([file]) => file.startsWith("src/"))
          .map(([file, v]) => [file, v.bytesInOutput]),
      );
    }
    rows.push(row);
  }
  return {
    esbuild: esbuildVersion,
    settings: "bundle, minify, format esm, platform browser, target es2022; gzip level 9",
    rows,
  };
}
