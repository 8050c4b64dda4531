// The backend conformance suite against the postgres backend, once per client shape it accepts:
// pg Pool and Client, postgres.js and a bare { query(text, params) }, on the real PostgreSQL
// server. Each shape uses its own table, created by the backend (createTable: true). Bun's SQL:
// under Bun, test/backends/bun.test.ts.
import { afterAll, describe, it } from "vitest";
import { postgres } from "../../../src/backends/postgres/index.ts";
import { testBackend } from "../../../src/testing/index.ts";
import { client, closeClients, SHAPES } from "./clients.ts";

afterAll(closeClients);

for (const [i, label] of Object.keys(SHAPES).entries()) {
  describe(label, () => {
    testBackend(
      { describe, it },
      {
        backend: async () => postgres(await client(label), { table: `conformance_${i}`, createTable: true }),
        ttl: 500,
        cycles: 200,
        prefix: `conformance-postgres-${label.replace(/\W+/g, "-")}`,
      },
    );
  });
}
