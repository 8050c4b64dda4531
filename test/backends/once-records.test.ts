// What a fire of runOnce leaves in the store (docs/DESIGN.md §17): a fire draws its token from its
// mutex name's counter, so while its record lasts the record is all there is of it, and once the
// record expired nothing of it remains (PostgreSQL: deleted by a later complete of the name).
// Counted with the store's own listing: Redis SCAN (standalone and the 3-node cluster), rows of
// the PostgreSQL table, the entries of a Deno KV prefix. (Memory has no way to count.)
import { openKv } from "@deno/kv";
import IORedis from "ioredis";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import type { Backend } from "../../src/backend.ts";
import { denoKv, type KvLike } from "../../src/backends/deno-kv/index.ts";
import { postgres } from "../../src/backends/postgres/index.ts";
import { redis } from "../../src/backends/redis/index.ts";
import { fireKey } from "../../src/once.ts";
import { sleep } from "../../src/time.ts";
import { ctx as pgCtx } from "./postgres/clients.ts";
import { client, closeClients } from "./redis/clients.ts";

afterAll(closeClients);

/** Takes `key` on `backend` and completes it with `retain`; its token. */
async function fire(backend: Backend, key: string, retain: number): Promise<number> {
  const nonce = crypto.randomUUID();
  const r = await backend.acquire({ key, owner: "runner", nonce, ttl: 5_000 });
  if (!r.ok) throw new Error(`acquire answered ${JSON.stringify(r)}`);
  expect(await backend.complete?.({ key, nonce, retain })).toBe(true);
  return r.token;
}

const unique = (what: string) => `${what}-${crypto.randomUUID().slice(0, 8)}`;

describe("redis: a fire's record is its only key, and it expires", () => {
  for (const label of ["ioredis", "ioredis Cluster"]) {
    it(label, async () => {
      const c = (await client(label)) as IORedis | InstanceType<typeof IORedis.Cluster>;
      const nodes = c instanceof IORedis.Cluster ? c.nodes("master") : [c];
      const name = unique("once-records");
      /** Every key of the name (its counter, its fires), on every node. */
      const keys = async () => {
        const found: string[] = [];
        for (const node of nodes) {
          let cursor = "0";
          do {
            const [next, batch] = await node.scan(cursor, "MATCH", `leasehold:{${name}*`, "COUNT", 1000);
            cursor = next;
            found.push(...batch);
          } while (cursor !== "0");
        }
        return found.sort();
      };
      const backend = redis(c);
      const plain = await fire(backend, name, 60_000);
      const key = await fireKey(name, "2026-11-24");
      const token = await fire(backend, key, 300);
      expect(token).toBeGreaterThan(plain);
      expect(await keys()).toEqual([
        `leasehold:{${name}}`,
        `leasehold:{${name}}:fence`,
        `leasehold:{${name}}:fire:2026-11-24`,
      ]);
      await sleep(400);
      expect(await keys()).toEqual([`leasehold:{${name}}`, `leasehold:{${name}}:fence`]);
    });
  }
});

describe("postgres: a fire's row is its record, deleted once expired", () => {
  const pool = new pg.Pool({ connectionString: pgCtx.url, max: 4 });
  afterAll(() => pool.end());
  it("pg Pool", async () => {
    const backend = postgres(pool, { table: "once_records", createTable: true });
    const name = unique("once-records");
    const rows = async () =>
      (
        await pool.query("SELECT name FROM once_records WHERE left(name, length($1)) = $1 ORDER BY name", [
          `${name}:fire`,
        ])
      ).rows.map((r: { name: string }) => r.name);
    const tokens: number[] = [];
    for (const tick of ["1", "2", "3"]) tokens.push(await fire(backend, await fireKey(name, tick), 200));
    expect(await rows()).toEqual([`${name}:fire:1`, `${name}:fire:2`, `${name}:fire:3`]);
    await sleep(300);
    tokens.push(await fire(backend, await fireKey(name, "4"), 60_000));
    expect(tokens).toEqual([...tokens].sort((a, b) => a - b));
    expect(new Set(tokens).size).toBe(4);
    expect(await rows()).toEqual([`${name}:fire:4`]);
  });
});

describe("deno-kv: a fire has no fence entry of its own", () => {
  it("@deno/kv in memory", async () => {
    const kv = await openKv();
    try {
      const backend = denoKv(kv as unknown as KvLike);
      const name = unique("once-records");
      const plain = await fire(backend, name, 60_000);
      const key = await fireKey(name, "1");
      expect(await fire(backend, key, 60_000)).toBeGreaterThan(plain);
      const entries: unknown[][] = [];
      for await (const e of kv.list({ prefix: ["leasehold"] })) entries.push([...e.key]);
      expect(entries).toEqual(
        expect.arrayContaining([
          ["leasehold", "fence", name],
          ["leasehold", "lock", key],
        ]),
      );
      expect(entries).not.toContainEqual(["leasehold", "fence", key]);
    } finally {
      kv.close();
    }
  });
});
