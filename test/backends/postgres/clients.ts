// The PostgreSQL clients the postgres backend accepts, connected to the shared server of
// test/harness/setup/postgres.ts: pg's Pool and Client, postgres.js, and a bare
// `{ query(text, params) }` (the shape of Neon's and other serverless drivers, here over pg).
// Each is made on first use and closed by `closeClients()`. (Bun's SQL runs under Bun:
// test/backends/bun.test.ts.)
import pg from "pg";
import postgresJs from "postgres";
import { inject } from "vitest";
import type { PostgresClientLike } from "../../../src/backends/postgres/index.ts";
import { registerSecret } from "../../harness/secrets.ts";
import { type Made as MadeClient, sharedClients } from "../../harness/shapes.ts";

export const ctx = inject("postgres");
registerSecret(ctx.password);

type Made = MadeClient<PostgresClientLike>;

export const SHAPES: Record<string, () => Promise<Made>> = {
  "pg Pool": async () => {
    const pool = new pg.Pool({ connectionString: ctx.url, max: 20 });
    return { client: pool, close: () => pool.end() };
  },
  "pg Client": async () => {
    const c = new pg.Client({ connectionString: ctx.url });
    await c.connect();
    return { client: c, close: () => c.end() };
  },
  "postgres.js": async () => {
    const sql = postgresJs(ctx.url, { max: 20, onnotice: () => {} });
    return { client: sql, close: () => sql.end() };
  },
  "{ query(text, params) }": async () => {
    const pool = new pg.Pool({ connectionString: ctx.url, max: 20 });
    // Only the method, resolving the rows array as Neon's `sql.query` does.
    const client = {
      query: async (text: string, params: unknown[]) => (await pool.query(text, params)).rows,
    };
    return { client, close: () => pool.end() };
  },
};

export const { client, closeClients } = sharedClients(SHAPES);
