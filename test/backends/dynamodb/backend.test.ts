// The dynamodb backend against dynalite (test/harness/setup/dynamodb.ts): what it writes, read
// back with the AWS SDK; requests per operation; the table created on demand; the environment;
// option errors. Faults dynalite cannot make (refused credentials, throttling, an old item sent
// back with a failed condition, as AWS does) come from fetch doubles, each saying so.
import { DescribeTableCommand, GetItemCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, describe, expect, inject, it } from "vitest";
import type { FetchLike } from "../../../src/backend.ts";
import { dynamodb } from "../../../src/backends/dynamodb/index.ts";
import { createMutex, isLockError } from "../../../src/index.ts";
import { checkNoSecrets, registerSecret } from "../../harness/secrets.ts";
import { sdkClient } from "../../harness/servers/dynalite.ts";
import { withOldItem } from "./old-item.ts";

const ctx = inject("dynamodb");
const { endpoint, region, credentials, table } = ctx;
const sdk = sdkClient(endpoint);
afterAll(() => sdk.destroy());

const unique = (what: string) => `${what}-${crypto.randomUUID().slice(0, 8)}`;

/** The global fetch, recording each request's operation. */
function counting(): { fetch: FetchLike; ops: string[] } {
  const ops: string[] = [];
  return {
    ops,
    fetch: (url, init) => {
      ops.push(init.headers["x-amz-target"]?.replace("DynamoDB_20120810.", "") ?? "?");
      return fetch(url, init);
    },
  };
}

const item = async (pk: string) =>
  (await sdk.send(new GetItemCommand({ TableName: table, Key: { pk: { S: pk } }, ConsistentRead: true })))
    .Item;

describe("dynamodb backend on dynalite", () => {
  it("writes one item per lock: the holder while held, the fence kept after release (read with the AWS SDK)", async () => {
    const backend = dynamodb({ table, region, credentials, endpoint, prefix: "app1/" });
    const name = unique("layout");
    const nonce = crypto.randomUUID();
    const a = await backend.acquire({ key: name, owner: "worker 1", nonce, ttl: 2_000 });
    expect(a).toEqual({ ok: true, token: 1 });
    const held = await item(`app1/${name}`);
    expect(held).toMatchObject({
      holder: { S: nonce },
      owner: { S: "worker 1" },
      fence: { N: "1" },
      ttl: { N: "2000" },
    });
    expect(held?.ver?.S).toMatch(/^[0-9a-f-]{36}$/);
    expect(await backend.renew({ key: name, nonce, ttl: 3_000 })).toBe(true);
    const renewed = await item(`app1/${name}`);
    expect(renewed?.ver?.S).not.toBe(held?.ver?.S);
    expect(renewed?.ttl).toEqual({ N: "3000" });
    await backend.release({ key: name, nonce });
    expect(await item(`app1/${name}`)).toEqual({ pk: { S: `app1/${name}` }, fence: { N: "1" } });
    const b = await backend.acquire({ key: name, owner: "worker 2", nonce: crypto.randomUUID(), ttl: 2_000 });
    expect(b).toEqual({ ok: true, token: 2 });
  });

  it("one request per operation; a refusal reads the holder's item once more (dynalite sends no old item back)", async () => {
    const { fetch, ops } = counting();
    const backend = dynamodb({ table, region, credentials, endpoint, fetch });
    const name = unique("count");
    const nonce = crypto.randomUUID();
    await backend.acquire({ key: name, owner: "a", nonce, ttl: 1_000 });
    await backend.renew({ key: name, nonce, ttl: 1_000 });
    await backend.inspect({ key: name });
    await backend.raiseFence!({ key: name, owner: "a", nonce, token: 5 });
    expect(ops.splice(0)).toEqual(["UpdateItem", "UpdateItem", "GetItem", "UpdateItem"]);
    const refused = await backend.acquire({ key: name, owner: "b", nonce: crypto.randomUUID(), ttl: 1_000 });
    expect(refused).toMatchObject({ ok: false, ttl: 1_000 });
    expect(ops.splice(0)).toEqual(["UpdateItem", "GetItem"]);
    await backend.release({ key: name, nonce });
    expect(ops.splice(0)).toEqual(["UpdateItem"]);
  });

  it("a refusal that carries the old item, as AWS sends it, costs one request (double: adds the item dynalite leaves out)", async () => {
    const ops: string[] = [];
    const backend = dynamodb({ table, region, credentials, endpoint, fetch: withOldItem(item, ops) });
    const name = unique("old-item");
    const nonce = crypto.randomUUID();
    await backend.acquire({ key: name, owner: "a", nonce, ttl: 1_500 });
    ops.length = 0;
    const refused = await backend.acquire({ key: name, owner: "b", nonce: crypto.randomUUID(), ttl: 1_000 });
    const stored = await item(`leasehold:${name}`);
    expect(refused).toEqual({ ok: false, version: stored?.ver?.S, ttl: 1_500 });
    expect(ops).toEqual(["UpdateItem"]);
    expect(await backend.raiseFence!({ key: name, owner: "a", nonce, token: 1 })).toBe(true);
    expect(await backend.raiseFence!({ key: name, owner: "b", nonce: "someone else", token: 9 })).toBe(false);
    expect(ops).toHaveLength(3);
  });

  it("a retried acquire by the holder keeps its token and writes a new version", async () => {
    const backend = dynamodb({ table, region, credentials, endpoint });
    const name = unique("retry");
    const nonce = crypto.randomUUID();
    const first = await backend.acquire({ key: name, owner: "a", nonce, ttl: 1_000 });
    const before = (await item(`leasehold:${name}`))?.ver?.S;
    const again = await backend.acquire({ key: name, owner: "a", nonce, ttl: 1_000 });
    expect(again).toEqual(first);
    expect((await item(`leasehold:${name}`))?.ver?.S).not.toBe(before);
  });

  it("createTable: true creates a missing table (on-demand, key pk) once, for concurrent first calls", async () => {
    const fresh = unique("created");
    const { fetch, ops } = counting();
    const backend = dynamodb({ table: fresh, region, credentials, endpoint, fetch, createTable: true });
    const mutexes = ["a", "b", "c"].map((owner) => createMutex(backend, { name: "job", owner, ttl: 2_000 }));
    const leases = await Promise.all(mutexes.map((m) => m.tryAcquire()));
    expect(leases.filter((l) => l !== null)).toHaveLength(1);
    expect(ops.filter((op) => op === "CreateTable")).toHaveLength(1);
    const { Table } = await sdk.send(new DescribeTableCommand({ TableName: fresh }));
    expect(Table?.KeySchema).toEqual([{ AttributeName: "pk", KeyType: "HASH" }]);
    expect(Table?.AttributeDefinitions).toEqual([{ AttributeName: "pk", AttributeType: "S" }]);
    expect(Table?.BillingModeSummary?.BillingMode).toBe("PAY_PER_REQUEST");
    await Promise.all(leases.map((l) => l?.release()));
  });

  it("a missing table is a non-retryable error naming the table, the schema and createTable", async () => {
    const backend = dynamodb({ table: "no-such-table", region, credentials, endpoint });
    const error = await backend.inspect({ key: "x" }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "ERR_BACKEND", retryable: false });
    expect(String((error as Error).message)).toMatch(
      /no-such-table.*partition key pk \(String\).*createTable: true/,
    );
  });

  it("reads region and credentials (session token included) from an env object", async () => {
    const session = "FwoGZXIvYXdzEXAMPLE-session-token-0001";
    registerSecret(session);
    const sent: Record<string, string>[] = [];
    const env = {
      AWS_REGION: region,
      AWS_ACCESS_KEY_ID: credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
      AWS_SESSION_TOKEN: session,
    };
    const backend = dynamodb({
      table,
      endpoint,
      env,
      fetch: (url, init) => {
        sent.push(init.headers);
        return fetch(url, init);
      },
    });
    expect(await backend.inspect({ key: unique("env") })).toBeNull();
    expect(sent[0]?.["x-amz-security-token"]).toBe(session);
    expect(sent[0]?.authorization).toMatch(
      new RegExp(
        `^AWS4-HMAC-SHA256 Credential=${credentials.accessKeyId}/\\d{8}/${region}/dynamodb/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-security-token;x-amz-target, Signature=[0-9a-f]{64}$`,
      ),
    );
  });

  it("calls a credentials function before each request", async () => {
    let calls = 0;
    const backend = dynamodb({
      table,
      region,
      endpoint,
      credentials: async () => {
        calls++;
        return credentials;
      },
    });
    await backend.inspect({ key: unique("fn") });
    await backend.inspect({ key: unique("fn") });
    expect(calls).toBe(2);
    const bad = dynamodb({
      table,
      region,
      endpoint,
      credentials: () => ({ accessKeyId: "", secretAccessKey: "x" }),
    });
    await expect(bad.inspect({ key: "x" })).rejects.toThrow(/the credentials function's answer: accessKeyId/);
  });
});

describe("dynamodb errors (fetch doubles: dynalite accepts any signature and never throttles)", () => {
  const secret = "wrong/secret/key/that/must/stay/hidden0";
  registerSecret(secret);
  const answering =
    (status: number, type: string, echo = true): FetchLike =>
    async (_url, init) =>
      new Response(
        JSON.stringify({
          __type: type ? `com.amazonaws.dynamodb.v20120810#${type}` : undefined,
          // A server that quotes the request back: the signature and key must not surface.
          message: echo ? `refused ${init.headers.authorization} ${secret}` : "refused",
        }),
        { status },
      );
  const make = (fetch: FetchLike) =>
    dynamodb({
      table,
      region,
      endpoint,
      fetch,
      credentials: { accessKeyId: "AKIAWRONG", secretAccessKey: secret },
    });
  const failure = async (fetch: FetchLike) => {
    const error = await make(fetch)
      .inspect({ key: "x" })
      .catch((e: unknown) => e);
    checkNoSecrets(error);
    expect(isLockError(error)).toBe(true);
    return error as { code: string; retryable: boolean; message: string };
  };

  it.each([
    "UnrecognizedClientException",
    "InvalidSignatureException",
    "AccessDeniedException",
    "ExpiredTokenException",
  ])("%s is ERR_BACKEND_AUTH, not retryable, without the secret or the signature", async (type) => {
    const error = await failure(answering(400, type));
    expect(error).toMatchObject({ code: "ERR_BACKEND_AUTH", retryable: false });
    expect(error.message).toContain(type);
    expect(error.message).not.toMatch(/Signature=[0-9a-f]{8}/);
  });

  it.each([
    [400, "ProvisionedThroughputExceededException"],
    [400, "ThrottlingException"],
    [400, "RequestLimitExceeded"],
    [500, "InternalServerError"],
    [503, ""],
  ])("HTTP %i %s is retryable", async (status, type) => {
    expect(await failure(answering(status, type))).toMatchObject({ code: "ERR_BACKEND", retryable: true });
  });

  it("a ValidationException is not retryable", async () => {
    expect(await failure(answering(400, "ValidationException"))).toMatchObject({
      code: "ERR_BACKEND",
      retryable: false,
    });
  });

  it("a proxy page or a network error quoting the request shows neither signature, key nor session token", async () => {
    const sessionToken = "IQoJb3JpZ2luX2VjEXAMPLE-echoed-session-token";
    registerSecret(sessionToken);
    const headersOf = (init: Parameters<FetchLike>[1]) => JSON.stringify(init.headers);
    const withSession = (fetch: FetchLike) =>
      dynamodb({
        table,
        region,
        endpoint,
        fetch,
        credentials: { accessKeyId: "AKIAWRONG", secretAccessKey: secret, sessionToken },
      });
    // A body is quoted up to 80 characters: one page per thing it could echo.
    const echo = (what: (init: Parameters<FetchLike>[1]) => string) =>
      withSession(async (_url, init) => new Response(`${what(init)} bad gateway`, { status: 502 }))
        .inspect({ key: "x" })
        .catch((e: unknown) => e);
    const pages = [
      await echo((init) => init.headers.authorization?.split("Signature=")[1] ?? ""),
      await echo((init) => init.headers["x-amz-security-token"] ?? ""),
      await echo(() => secret),
    ];
    const network = await withSession(async (_url, init) => {
      throw new TypeError(`fetch failed: ${headersOf(init)}`);
    })
      .inspect({ key: "x" })
      .catch((e: unknown) => e);
    for (const error of [...pages, network]) {
      expect(error).toMatchObject({ code: "ERR_BACKEND", retryable: true });
      checkNoSecrets(error);
      // The signature alone: 64 hex digits.
      expect(String((error as Error).message) + String((error as Error).cause)).not.toMatch(/[0-9a-f]{64}/);
    }
  });

  it("a reply that is not JSON is retryable", async () => {
    expect(await failure(async () => new Response("<html>proxy</html>", { status: 502 }))).toMatchObject({
      retryable: true,
    });
  });
});

describe("dynamodb options", () => {
  const base = { table, region, credentials, endpoint };
  const bad = (options: object, message: RegExp) => {
    let error: unknown;
    try {
      dynamodb(options as Parameters<typeof dynamodb>[0]);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(TypeError);
    expect(String((error as Error).message)).toMatch(message);
    checkNoSecrets(error);
  };

  it("names what is wrong and what is valid, never a secret", () => {
    bad({ ...base, table: "x" }, /\[dynamodb\] option table must be a table name: 3 to 255/);
    bad({ ...base, table: undefined }, /option table must be a table name/);
    bad({ ...base, region: "EU West" }, /option region must be an AWS region name/);
    bad({ table, credentials, env: {} }, /option region is required \(or set AWS_REGION\)/);
    bad(
      { table, region, env: {} },
      /option credentials is required \(or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY\)/,
    );
    bad(
      { ...base, credentials: { accessKeyId: "AKIA X", secretAccessKey: credentials.secretAccessKey } },
      /accessKeyId must be an access key id/,
    );
    bad(
      { ...base, credentials: { accessKeyId: "AKIA", secretAccessKey: "" } },
      /secretAccessKey must be a non-empty string/,
    );
    bad(
      { ...base, credentials: { ...credentials, sessionToken: "a\nb" } },
      /sessionToken must be a string of characters allowed in a header/,
    );
    bad(
      { ...base, endpoint: `ftp://user:${credentials.secretAccessKey}@x` },
      /option endpoint must be an http\(s\) URL, got ftp:/,
    );
    bad({ ...base, endpoint: "http://127.0.0.1:1/?x=1" }, /must not have a query/);
    bad({ ...base, prefix: 1 }, /option prefix must be a string/);
    bad({ ...base, createTable: "yes" }, /option createTable must be true or false/);
    bad({ ...base, fetch: "fetch" }, /option fetch must be a function/);
  });

  it("defaults the endpoint from the region (China regions included)", async () => {
    const urls: string[] = [];
    const fetch: FetchLike = async (url) => {
      urls.push(url);
      return new Response(JSON.stringify({}), { status: 200 });
    };
    await dynamodb({ table, region: "eu-west-1", credentials, fetch }).inspect({ key: "x" });
    await dynamodb({ table, region: "cn-north-1", credentials, fetch }).inspect({ key: "x" });
    expect(urls).toEqual([
      "https://dynamodb.eu-west-1.amazonaws.com/",
      "https://dynamodb.cn-north-1.amazonaws.com.cn/",
    ]);
  });
});
