// The stores of the multi-process runOnce test (test/system/once-fleet.test.ts), described as
// plain data so a child process can build the same backend with its own client: `specs()` reads
// the servers the global setup started, `open(spec)` builds a backend (and its closer) from one.
import { openKv } from "@deno/kv";
import IORedis from "ioredis";
import pg from "pg";
import type { Backend } from "../../src/backend.ts";
import { azureBlob } from "../../src/backends/azure-blob/index.ts";
import { durableObject } from "../../src/backends/cloudflare/index.ts";
import { denoKv, type KvLike } from "../../src/backends/deno-kv/index.ts";
import { dynamodb } from "../../src/backends/dynamodb/index.ts";
import { postgres } from "../../src/backends/postgres/index.ts";
import { quorum } from "../../src/backends/quorum/index.ts";
import { redis } from "../../src/backends/redis/index.ts";
import { upstash } from "../../src/backends/upstash/index.ts";

/** One store, as data: the backend's kind and what its client needs. */
export type Spec =
  | { kind: "upstash"; url: string; token: string }
  | { kind: "redis"; host: string; port: number; username: string; password: string }
  | { kind: "postgres"; url: string }
  | {
      kind: "dynamodb";
      endpoint: string;
      region: string;
      credentials: { accessKeyId: string; secretAccessKey: string };
      table: string;
    }
  | { kind: "azure-blob"; accountUrl: string; accountName: string; accountKey: string; container: string }
  | { kind: "cloudflare"; url: string; token: string }
  | { kind: "deno-kv"; path: string }
  | { kind: "quorum"; members: Spec[] };

/** A backend built from a spec, and how to close its clients. */
export interface Opened {
  backend: Backend;
  close(): Promise<void>;
}

/** Builds the backend a spec describes, with clients of its own. */
export async function open(spec: Spec): Promise<Opened> {
  const none = async () => {};
  switch (spec.kind) {
    case "upstash":
      return { backend: upstash({ url: spec.url, token: spec.token }), close: none };
    case "redis": {
      const { kind: _, ...options } = spec;
      const client = new IORedis(options);
      return { backend: redis(client), close: async () => void (await client.quit()) };
    }
    case "postgres": {
      const pool = new pg.Pool({ connectionString: spec.url, max: 4 });
      return { backend: postgres(pool, { createTable: true }), close: () => pool.end() };
    }
    case "dynamodb": {
      const { kind: _, ...options } = spec;
      return { backend: dynamodb(options), close: none };
    }
    case "azure-blob": {
      const { kind: _, ...options } = spec;
      return { backend: azureBlob({ ...options, createContainer: true }), close: none };
    }
    case "cloudflare":
      return { backend: durableObject({ url: spec.url, token: spec.token }), close: none };
    case "deno-kv": {
      const kv = await openKv(spec.path);
      return { backend: denoKv(kv as unknown as KvLike), close: async () => kv.close() };
    }
    case "quorum": {
      const members = await Promise.all(spec.members.map(open));
      return {
        backend: quorum(members.map((m) => m.backend)),
        close: async () => void (await Promise.all(members.map((m) => m.close()))),
      };
    }
  }
}

/** The ttl a store's leases take in the test: Azure's shortest lease is 15 s. */
export const ttlOf = (spec: Spec): number =>
  spec.kind === "azure-blob" || (spec.kind === "quorum" && spec.members.some((m) => m.kind === "azure-blob"))
    ? 15_000
    : 2_000;
