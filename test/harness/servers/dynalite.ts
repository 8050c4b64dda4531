// dynalite (the npm devDependency): DynamoDB's JSON API on an in-memory LevelDB, in this process,
// on a free loopback port. It checks the shape of a request's SigV4 Authorization header but not
// the signature (test/backends/shared/sigv4.test.ts checks that against the AWS SDK).
import type { Server } from "node:http";
import { CreateTableCommand, DescribeTableCommand, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import dynalite from "dynalite";
import { listenLoopback } from "./listen.ts";

/** Credentials dynalite accepts (any); made up, not a secret of anyone. */
export const DYNALITE_CREDENTIALS = {
  accessKeyId: "AKIALEASEHOLDTEST",
  secretAccessKey: "leasehold-dynalite-secret-0123456789abcdef",
} as const;
export const DYNALITE_REGION = "us-east-1";

export interface DynaliteServer {
  /** `http://127.0.0.1:<port>`. */
  endpoint: string;
  /** The HTTP server, for counting requests. */
  server: Server;
  stop(): Promise<void>;
}

/** Starts dynalite; `createTableMs` is how long a new table stays CREATING (dynalite's default 500). */
export async function startDynalite(opts: { createTableMs?: number } = {}): Promise<DynaliteServer> {
  const server: Server = dynalite({
    createTableMs: opts.createTableMs ?? 50,
    deleteTableMs: 0,
    updateTableMs: 0,
  });
  const endpoint = await listenLoopback(server);
  return {
    endpoint,
    server,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

/** An AWS SDK client of `endpoint`, for setting up tables and reading what leasehold wrote. */
export function sdkClient(endpoint: string): DynamoDBClient {
  // The SDK warns once per process that its releases after January 2027 need Node 22.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
  return new DynamoDBClient({ region: DYNALITE_REGION, endpoint, credentials: DYNALITE_CREDENTIALS });
}

/** Creates a lock table (partition key `pk`, String) with the AWS SDK and waits until it is ACTIVE. */
export async function createLockTable(endpoint: string, table: string): Promise<void> {
  const client = sdkClient(endpoint);
  try {
    await client.send(
      new CreateTableCommand({
        TableName: table,
        AttributeDefinitions: [{ AttributeName: "pk", AttributeType: "S" }],
        KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }],
        BillingMode: "PAY_PER_REQUEST",
      }),
    );
    for (;;) {
      const { Table } = await client.send(new DescribeTableCommand({ TableName: table }));
      if (Table?.TableStatus === "ACTIVE") return;
      await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    client.destroy();
  }
}
