// Global setup: one dynalite (DynamoDB's API on an in-memory LevelDB) on a free loopback port, in a
// process of its own, for the whole run, with one lock table made with the AWS SDK; stopped after
// the run. Tests read it with `inject("dynamodb")`.
import type { TestProject } from "vitest/node";
import { createLockTable, DYNALITE_CREDENTIALS, DYNALITE_REGION } from "../servers/dynalite.ts";
import { inOwnProcess } from "../servers/own-process.ts";

/** What `inject("dynamodb")` returns. */
export interface DynamoDBContext {
  /** dynalite's URL, `http://127.0.0.1:<port>`. */
  endpoint: string;
  region: string;
  credentials: { accessKeyId: string; secretAccessKey: string };
  /** A table with partition key `pk` (String), ACTIVE. */
  table: string;
}

declare module "vitest" {
  export interface ProvidedContext {
    dynamodb: DynamoDBContext;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await inOwnProcess("dynalite");
  const table = "leasehold-test";
  try {
    await createLockTable(server.endpoint, table);
  } catch (error) {
    await server.stop();
    throw error;
  }
  project.provide("dynamodb", {
    endpoint: server.endpoint,
    region: DYNALITE_REGION,
    credentials: { ...DYNALITE_CREDENTIALS },
    table,
  });
  return () => server.stop();
}
