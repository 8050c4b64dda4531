// The postgres backend against faults of real PostgreSQL servers: a restart like a failover (an
// immediate shutdown, recovered from the WAL) on a server of this file's own, a wrong password,
// a missing table; and what it refuses as a client or option.
import { readFileSync } from "node:fs";
import pg from "pg";
import postgresJs from "postgres";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { postgres } from "../../../src/backends/postgres/index.ts";
import { createMutex } from "../../../src/index.ts";
import { registerSecret } from "../../harness/secrets.ts";
import { type PostgresServer, startPostgres } from "../../harness/servers/postgres.ts";
import { ctx } from "./clients.ts";

const closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close(); // in order: a schema dropped before its pool ends
});
const pool = (url = ctx.url) => {
  const p = new pg.Pool({ connectionString: url, connectionTimeoutMillis: 2_000 });
  p.on("error", () => {}); // idle connections dropped by a restart
  closers.push(() => p.end());
  return p;
};
const failure = (p: Promise<unknown>) =>
  p.then(
    () => null,
    (e: unknown) => e as Error,
  );

describe("a server of this file's own, restarted", () => {
  let server: PostgresServer;
  beforeAll(async () => {
    server = await startPostgres();
    registerSecret(server.password);
  });
  afterAll(() => server?.stop());

  it("down past the deadline: the loss is seen at the deadline, never as held; tokens keep increasing after recovery", async () => {
    const backend = postgres(pool(server.url), { createTable: true });
    const name = `restart-${crypto.randomUUID()}`;
    const mutex = createMutex(backend, { name, ttl: 1_000, retryDelay: 50 });
    let last = 0;
    for (let i = 0; i < 3; i++) {
      const lease = await mutex.acquire({ timeout: 10_000 });
      expect(lease.token).toBeGreaterThan(last);
      last = lease.token;
      await lease.release();
    }
    const lease = await mutex.acquire({ timeout: 10_000 });
    expect(lease.token).toBeGreaterThan(last);
    last = lease.token;
    const lost = new Promise<{ at: number; deadline: number }>((resolve) =>
      lease.signal.addEventListener("abort", () => resolve({ at: Date.now(), deadline: lease.expiresAt }), {
        once: true,
      }),
    );
    await server.halt("immediate"); // like a crash: the next start replays the WAL
    expect(lease.valid).toBe(true);
    const { at, deadline } = await lost;
    expect(at).toBeGreaterThanOrEqual(deadline - 15);
    expect(at - deadline).toBeLessThan(300);
    expect(lease.valid).toBe(false);
    expect(lease.signal.reason).toMatchObject({ code: "ERR_LEASE_LOST" });
    await server.start();
    const next = await mutex.acquire({ timeout: 10_000 });
    expect(next.token).toBeGreaterThan(last); // the fence survived the crash
    await next.release();
  });

  it("restarted within the ttl (a quick failover): the lease renews on and the next token is higher", async () => {
    const backend = postgres(pool(server.url), { createTable: true });
    const mutex = createMutex(backend, { name: `quick-${crypto.randomUUID()}`, ttl: 3_000, retryDelay: 50 });
    const lease = await mutex.acquire({ timeout: 10_000 });
    const first = lease.token;
    await server.halt("immediate");
    await server.start();
    await lease.renew(); // over a new connection of the pool
    expect(lease.valid).toBe(true);
    await lease.release();
    const again = await mutex.acquire({ timeout: 10_000 });
    expect(again.token).toBeGreaterThan(first);
    await again.release();
  });
});

describe("errors", () => {
  it("a wrong password is an ERR_BACKEND_AUTH error at once, without the password (pg, postgres.js)", async () => {
    const wrong = `wrong-${crypto.randomUUID()}`;
    registerSecret(wrong);
    const url = ctx.url.replace(ctx.password, wrong);
    const sql = postgresJs(url, { onnotice: () => {} });
    closers.push(() => sql.end());
    for (const client of [pool(url), sql]) {
      const started = Date.now();
      const error = await failure(
        createMutex(postgres(client), { name: "wrong-password", ttl: 1_000 }).acquire({ timeout: 10_000 }),
      );
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(error).toMatchObject({ name: "BackendError", code: "ERR_BACKEND_AUTH", retryable: false });
      expect(error?.message).toMatch(/\[postgres\] password authentication failed .*SQLSTATE 28P01/);
      for (const text of [error?.message, String(error?.cause), JSON.stringify(error)]) {
        expect(text).not.toContain(wrong);
        expect(text).not.toContain(url);
      }
    }
  });

  it("a missing table is a non-retryable error naming the migration, and is not created by default", async () => {
    const table = `missing_${crypto.randomUUID().slice(0, 8)}`;
    const client = pool();
    const started = Date.now();
    const error = await failure(
      createMutex(postgres(client, { table }), { name: "x", ttl: 1_000 }).acquire({ timeout: 10_000 }),
    );
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(error).toMatchObject({ name: "BackendError", code: "ERR_BACKEND", retryable: false });
    expect(error?.message).toContain(`the lock table "${table}" does not exist`);
    expect(error?.message).toMatch(
      /migration SQL in leasehold's docs\/backends\/postgres\.md, or pass createTable: true/,
    );
    const { rows } = await client.query("SELECT to_regclass($1) AS t", [table]);
    expect(rows[0].t).toBeNull();
  });

  it("createTable on instances started together: every one acquires (the losers of CREATE TABLE IF NOT EXISTS's race are not failed)", async () => {
    // A CI run lost an acquire to 23505 on pg_type_typname_nsp_index: four processes created one
    // table at once. Here 12 connections of their own create a fresh table at once, 5 times.
    for (let round = 0; round < 5; round++) {
      const table = `race_${crypto.randomUUID().slice(0, 8)}`;
      const clients = Array.from({ length: 12 }, () => pool());
      closers.unshift(() => clients[0]!.query(`DROP TABLE IF EXISTS "${table}"`));
      await Promise.all(clients.map((c) => c.query("SELECT 1"))); // connected, so they race
      const results = await Promise.all(
        clients.map((c, i) =>
          postgres(c, { table, createTable: true }).acquire({
            key: `k${i}`,
            owner: "o",
            nonce: crypto.randomUUID(),
            ttl: 10_000,
          }),
        ),
      );
      expect(results.every((r) => r.ok)).toBe(true);
    }
  });

  it("schema and table are quoted: an upper-case table in its own schema works", async () => {
    const client = pool();
    const schema = `s_${crypto.randomUUID().slice(0, 8)}`;
    await client.query(`CREATE SCHEMA "${schema}"`);
    closers.unshift(() => client.query(`DROP SCHEMA "${schema}" CASCADE`));
    const backend = postgres(client, { schema, table: "Locks", createTable: true });
    const lease = await createMutex(backend, { name: "quoted", ttl: 1_000 }).acquire({ timeout: 5_000 });
    const { rows } = await client.query(`SELECT name, fence::int AS fence FROM "${schema}"."Locks"`);
    expect(rows).toEqual([{ name: "quoted", fence: lease.token }]);
    await lease.release();
  });

  it("the migration SQL of docs/backends/postgres.md makes a table the backend works with (createTable off)", async () => {
    const page = readFileSync(new URL("../../../docs/backends/postgres.md", import.meta.url), "utf8");
    const migration = /```sql\n\s*(CREATE TABLE IF NOT EXISTS leasehold_locks[\s\S]*?)```/.exec(page)?.[1];
    expect(migration, "docs/backends/postgres.md: a ```sql block creating leasehold_locks").toBeDefined();
    const client = pool();
    const schema = `m_${crypto.randomUUID().slice(0, 8)}`;
    await client.query(`CREATE SCHEMA "${schema}"`);
    closers.unshift(() => client.query(`DROP SCHEMA "${schema}" CASCADE`));
    await client.query(migration!.replace("leasehold_locks", `"${schema}".leasehold_locks`));
    const mutex = createMutex(postgres(client, { schema }), { name: "migrated", ttl: 1_000, owner: "m" });
    const lease = await mutex.acquire({ timeout: 5_000 });
    expect(await mutex.holder()).toEqual({ owner: "m", token: lease.token });
    await lease.release();
    expect((await mutex.acquire({ timeout: 5_000 })).token).toBeGreaterThan(lease.token);
  });

  it("an unrecognised client or a bad table or schema name is a TypeError", () => {
    for (const bad of [null, undefined, 42, "postgres://localhost", {}, { exec() {} }]) {
      expect(() => postgres(bad as never)).toThrow(TypeError);
    }
    expect(() => postgres({} as never)).toThrow(
      /\[postgres\] client must be a pg Pool or Client, a postgres.js sql, Bun's SQL, or any client with query\(text, params\); got an object without those methods/,
    );
    const q = { query: async () => ({ rows: [] }) };
    for (const table of ["", "a-b", 'x"; DROP TABLE y; --', "1abc", "a".repeat(64), 7]) {
      expect(() => postgres(q, { table: table as string })).toThrow(/option table must be 1 to 63 letters/);
    }
    expect(() => postgres(q, { schema: "public.x" })).toThrow(/option schema must be/);
    expect(() => postgres(q, { createTable: "yes" as never })).toThrow(
      /option createTable must be a boolean/,
    );
  });
});
