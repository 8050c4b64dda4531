// Item 8: DynamoDB. leasehold's backend against the AWS SDK's DynamoDBClient sending the same
// requests (the same UpdateItem and GetItem, expressions and all) to dynalite, which runs in the
// parent process; the client runs in a child process, interleaved in random order. Then the
// requests per operation (counted at dynalite, in the parent) and crash takeover: a holder writes
// once and dies, and a contender's mutex takes the lock over by observed expiry; the time from
// the contender's first look to the lease, against the bound ttl + ceil(1 % ttl) + 2 ms.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DynamoDBClient, GetItemCommand, UpdateItemCommand } from "@aws-sdk/client-dynamodb";
import type { Backend } from "../src/backend.ts";
import { dynamodb } from "../src/backends/dynamodb/index.ts";
import { createMutex } from "../src/index.ts";
import { observedWait } from "../src/timing.ts";
import {
  createLockTable,
  DYNALITE_CREDENTIALS,
  DYNALITE_REGION,
  startDynalite,
} from "../test/harness/servers/dynalite.ts";
import { ROOT } from "./lib/env.ts";
import { type Summary, summarize } from "./lib/stats.ts";

const OPS = ["acquire", "renew", "release", "refused acquire"] as const;
type Op = (typeof OPS)[number];
const CLIENTS = ["leasehold", "aws-sdk"] as const;
type Client = (typeof CLIENTS)[number];
const TABLE = "leasehold-bench";

export interface DynamoDBResult {
  /** ms per operation, by client. */
  latency: Record<Client, Record<Op, Summary>>;
  /** Requests dynalite received per operation, by client. */
  requests: Record<Client, Record<Op, number>>;
  takeover: {
    ttl: number;
    /** ttl + ceil(1 % ttl) + 2 ms: the least a contender waits after its first look. */
    bound: number;
    /** From the contender's first answer (the holder's version seen) to the lease. */
    afterFirstLook: Summary;
    /** From the crashed holder's write to the lease. */
    afterCrash: Summary;
  };
}

interface Plan {
  endpoint: string;
  iterations: number;
  warmup: number;
  trials: number;
}

/** The three operations as leasehold's backend sends them. */
function leaseholdOps(backend: Backend) {
  return {
    acquire: (key: string, nonce: string) => backend.acquire({ key, owner: "bench", nonce, ttl: 10_000 }),
    renew: (key: string, nonce: string) => backend.renew({ key, nonce, ttl: 10_000 }),
    release: (key: string, nonce: string) => backend.release({ key, nonce }),
  };
}

/** The same requests through the AWS SDK (what leasehold's backend writes, attribute for attribute). */
function sdkOps(client: DynamoDBClient) {
  const names = { "#h": "holder", "#o": "owner", "#v": "ver", "#t": "ttl", "#f": "fence" };
  const Key = (key: string) => ({ pk: { S: `leasehold:${key}` } });
  const conditionFailed = (e: unknown) => (e as { name?: string }).name === "ConditionalCheckFailedException";
  return {
    acquire: async (key: string, nonce: string) => {
      try {
        const r = await client.send(
          new UpdateItemCommand({
            TableName: TABLE,
            Key: Key(key),
            UpdateExpression: "SET #h = :h, #o = :o, #v = :v, #t = :t ADD #f :one",
            ConditionExpression: "attribute_not_exists(#h)",
            ExpressionAttributeNames: names,
            ExpressionAttributeValues: {
              ":h": { S: nonce },
              ":o": { S: "bench" },
              ":v": { S: crypto.randomUUID() },
              ":t": { N: "10000" },
              ":one": { N: "1" },
            },
            ReturnValues: "UPDATED_NEW",
            ReturnValuesOnConditionCheckFailure: "ALL_OLD",
          }),
        );
        return { ok: true, token: Number(r.Attributes?.fence?.N) };
      } catch (e) {
        if (!conditionFailed(e)) throw e;
        // As leasehold does when the failed condition brings no item back (dynalite).
        const r = await client.send(
          new GetItemCommand({ TableName: TABLE, Key: Key(key), ConsistentRead: true }),
        );
        return { ok: false, version: r.Item?.ver?.S };
      }
    },
    renew: async (key: string, nonce: string) => {
      await client.send(
        new UpdateItemCommand({
          TableName: TABLE,
          Key: Key(key),
          UpdateExpression: "SET #v = :v, #t = :t",
          ConditionExpression: "#h = :h",
          ExpressionAttributeNames: { "#h": "holder", "#v": "ver", "#t": "ttl" },
          ExpressionAttributeValues: {
            ":h": { S: nonce },
            ":v": { S: crypto.randomUUID() },
            ":t": { N: "10000" },
          },
          ReturnValues: "NONE",
        }),
      );
      return true;
    },
    release: async (key: string, nonce: string) => {
      try {
        await client.send(
          new UpdateItemCommand({
            TableName: TABLE,
            Key: Key(key),
            UpdateExpression: "REMOVE #h, #o, #v, #t",
            ConditionExpression: "#h = :h",
            ExpressionAttributeNames: { "#h": "holder", "#o": "owner", "#v": "ver", "#t": "ttl" },
            ExpressionAttributeValues: { ":h": { S: nonce } },
          }),
        );
      } catch (e) {
        if (!conditionFailed(e)) throw e;
      }
    },
  };
}

type Ops = ReturnType<typeof leaseholdOps>;

function clients(endpoint: string): Record<Client, Ops> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
  const backend = dynamodb({
    table: TABLE,
    region: DYNALITE_REGION,
    credentials: DYNALITE_CREDENTIALS,
    endpoint,
  });
  const sdk = new DynamoDBClient({ region: DYNALITE_REGION, endpoint, credentials: DYNALITE_CREDENTIALS });
  return { leasehold: leaseholdOps(backend), "aws-sdk": sdkOps(sdk) as unknown as Ops };
}

/** One acquire, a refused acquire by someone else, a renew and a release; the time of each. */
async function cycle(ops: Ops, key: string): Promise<Record<Op, number>> {
  const nonce = crypto.randomUUID();
  let t = performance.now();
  const a = await ops.acquire(key, nonce);
  const acquire = performance.now() - t;
  if (!a.ok) throw new Error(`bench dynamodb: ${key} was not free`);
  t = performance.now();
  const refused = await ops.acquire(key, crypto.randomUUID());
  const refusedMs = performance.now() - t;
  if (refused.ok) throw new Error("bench dynamodb: a held lock was taken");
  t = performance.now();
  await ops.renew(key, nonce);
  const renew = performance.now() - t;
  t = performance.now();
  await ops.release(key, nonce);
  return { acquire, renew, release: performance.now() - t, "refused acquire": refusedMs };
}

/** Child mode: the interleaved latency, then the crash takeovers. */
async function measure(p: Plan) {
  const all = clients(p.endpoint);
  const samples = Object.fromEntries(
    CLIENTS.map((c) => [c, Object.fromEntries(OPS.map((op) => [op, [] as number[]]))]),
  ) as Record<Client, Record<Op, number[]>>;
  for (let i = 0; i < p.warmup + p.iterations; i++) {
    for (const c of [...CLIENTS].sort(() => Math.random() - 0.5)) {
      const t = await cycle(all[c], `bench-${c}`);
      if (i >= p.warmup) for (const op of OPS) samples[c][op].push(t[op]);
    }
  }
  const latency = Object.fromEntries(
    CLIENTS.map((c) => [c, Object.fromEntries(OPS.map((op) => [op, summarize(samples[c][op])]))]),
  ) as Record<Client, Record<Op, Summary>>;

  const ttl = 1_000;
  const afterFirstLook: number[] = [];
  const afterCrash: number[] = [];
  const backend = dynamodb({
    table: TABLE,
    region: DYNALITE_REGION,
    credentials: DYNALITE_CREDENTIALS,
    endpoint: p.endpoint,
  });
  // The trials run at once, each on its own key: they wait, they do not compete for the CPU.
  await Promise.all(
    Array.from({ length: p.trials }, async (_, i) => {
      const key = `bench-takeover-${i}-${crypto.randomUUID().slice(0, 8)}`;
      const crashed = performance.now();
      await backend.acquire({ key, owner: "crashed", nonce: crypto.randomUUID(), ttl });
      let firstLook: number | undefined;
      const watched: Backend = {
        ...backend,
        async acquire(r) {
          const result = await backend.acquire(r);
          firstLook ??= performance.now();
          return result;
        },
      };
      const lease = await createMutex(watched, { name: key, ttl, owner: "contender" }).acquire({
        timeout: 10_000,
      });
      const got = performance.now();
      afterFirstLook.push(got - firstLook!);
      afterCrash.push(got - crashed);
      await lease.release();
    }),
  );
  return {
    latency,
    takeover: {
      ttl,
      bound: observedWait(ttl),
      afterFirstLook: summarize(afterFirstLook),
      afterCrash: summarize(afterCrash),
    },
  };
}

export async function runDynamoDB(
  iterations: number,
  warmup: number,
  trials: number,
): Promise<DynamoDBResult> {
  const server = await startDynalite();
  let requests = 0;
  const dir = mkdtempSync(join(tmpdir(), "leasehold-bench-dynamodb-"));
  try {
    await createLockTable(server.endpoint, TABLE);
    const plan: Plan = { endpoint: server.endpoint, iterations, warmup, trials };
    const out = join(dir, "result.json");
    await new Promise<void>((resolve, reject) => {
      const child = spawn(process.execPath, ["--import", "tsx", `${ROOT}/bench/dynamodb.ts`], {
        cwd: ROOT,
        env: { ...process.env, BENCH_DYNAMODB: JSON.stringify(plan), BENCH_OUT: out },
        stdio: ["ignore", "inherit", "inherit"],
      });
      child.on("error", reject);
      child.on("exit", (code) =>
        code === 0 ? resolve() : reject(new Error(`bench dynamodb exited ${code}`)),
      );
    });
    const measured = JSON.parse(readFileSync(out, "utf8")) as Omit<DynamoDBResult, "requests">;
    // Requests per operation, counted at dynalite, one client at a time.
    server.server.on("request", () => requests++);
    const counts = {} as DynamoDBResult["requests"];
    const all = clients(server.endpoint);
    for (const c of CLIENTS) {
      const n = 10;
      const sums = Object.fromEntries(OPS.map((op) => [op, 0])) as Record<Op, number>;
      for (let i = 0; i < n; i++) {
        const key = `bench-count-${c}`;
        const nonce = crypto.randomUUID();
        const count = async (op: Op, run: () => Promise<unknown>) => {
          const before = requests;
          await run();
          sums[op] += requests - before;
        };
        await count("acquire", () => all[c].acquire(key, nonce));
        await count("refused acquire", () => all[c].acquire(key, crypto.randomUUID()));
        await count("renew", () => all[c].renew(key, nonce));
        await count("release", () => all[c].release(key, nonce));
      }
      counts[c] = Object.fromEntries(OPS.map((op) => [op, sums[op] / n])) as Record<Op, number>;
    }
    return { ...measured, requests: counts };
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await server.stop();
  }
}

if (process.env.BENCH_DYNAMODB && process.env.BENCH_OUT) {
  const result = await measure(JSON.parse(process.env.BENCH_DYNAMODB) as Plan);
  writeFileSync(process.env.BENCH_OUT, JSON.stringify(result));
  process.exit(0); // the SDK client's keep-alive sockets
}
