// Global setup: one real PostgreSQL server (installed with apt-get when missing; see
// test/harness/servers/postgres.ts) shared by every test file and stopped after the run. Tests
// read the connection with `inject("postgres")` and use their own table names, so files do not
// disturb each other. Tests that restart a server start their own.
import type { TestProject } from "vitest/node";
import { startPostgres } from "../servers/postgres.ts";

/** What `inject("postgres")` returns. */
export interface PostgresContext {
  /** `postgres://postgres:<password>@127.0.0.1:<port>/postgres`. */
  url: string;
  host: string;
  port: number;
  user: string;
  /** Register it as a secret. */
  password: string;
  database: string;
  version: string;
}

declare module "vitest" {
  export interface ProvidedContext {
    postgres: PostgresContext;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startPostgres();
  project.provide("postgres", {
    url: server.url,
    host: "127.0.0.1",
    port: server.port,
    user: server.user,
    password: server.password,
    database: "postgres",
    version: server.version,
  });
  return () => server.stop();
}
