/**
 * The DynamoDB backend: speaks DynamoDB's JSON API with `fetch` only, signed with SigV4 through
 * WebCrypto; no AWS SDK. Runs on Node, Bun, Deno and Cloudflare Workers.
 *
 * DynamoDB never expires an item on time (its TTL deletes lazily, within days), so this backend
 * declares `expiry: "observed"`: a contender takes a lock over only after it has seen the
 * holder's record version unchanged for the holder's ttl plus a margin on its own clock, with a
 * compare-and-set on that version (docs/DESIGN.md §14). A crashed holder's lock is taken over
 * about ttl + 1 % after a contender first looks at it; a released one is free at once.
 *
 * One item per lock, partition key `pk` = prefix + name: `fence` (Number, the fence counter,
 * kept after release so tokens keep increasing), and while held `holder` (the lease's nonce),
 * `owner`, `ver` (a random version, new with every write) and `ttl` (ms). Every write is one
 * conditional `UpdateItem`; `inspect` is one strongly consistent `GetItem`. A refused acquire
 * asks for the holder's item with `ReturnValuesOnConditionCheckFailure` (one request on AWS); a
 * server that does not send it back (dynalite, the test server) costs one consistent `GetItem`
 * more.
 *
 * @example A mutex on DynamoDB, credentials and region from the environment
 * ```ts
 * import { createMutex } from "leasehold";
 * import { dynamodb } from "leasehold/dynamodb";
 *
 * const backend = dynamodb({ table: "locks" });
 * await using lease = await createMutex(backend, { name: "nightly-report" }).acquire();
 * ```
 *
 * @module
 */
import type { AcquireResult, Backend, HolderInfo } from "../../backend.ts";
import { BackendError } from "../../errors.ts";
import { check } from "../../options.ts";
import { malformed as malformedReply } from "../shared/errors.ts";
import { client, type Item, NAME, type Reply } from "./client.ts";
import { config, type DynamoDBOptions } from "./options.ts";

export type { AwsCredentials, AwsCredentialsOption, DynamoDBOptions } from "./options.ts";

// Attribute names go through ExpressionAttributeNames: `ttl` and `owner` are reserved words.
const NAMES = { "#h": "holder", "#o": "owner", "#v": "ver", "#t": "ttl", "#f": "fence" };

/**
 * Creates a DynamoDB backend for {@link createMutex}.
 *
 * @param options `table` (partition key `pk`, String), and optionally `region`, `credentials`,
 *   `env`, `endpoint`, `fetch`, `createTable` and `prefix`; see {@link DynamoDBOptions}.
 * @returns A backend named `"dynamodb"` with `expiry: "observed"` and `raiseFence`.
 * @throws {TypeError} When an option is missing or invalid; no message shows a secret.
 *
 * @example Explicit credentials, with the table created on first use
 * ```ts
 * import { createMutex } from "leasehold";
 * import { dynamodb } from "leasehold/dynamodb";
 *
 * declare const env: { AWS_ACCESS_KEY_ID: string; AWS_SECRET_ACCESS_KEY: string };
 * const backend = dynamodb({
 *   table: "leasehold-locks",
 *   region: "eu-west-1",
 *   credentials: { accessKeyId: env.AWS_ACCESS_KEY_ID, secretAccessKey: env.AWS_SECRET_ACCESS_KEY },
 *   createTable: true,
 * });
 * const lease = await createMutex(backend, { name: "cron" }).tryAcquire();
 * ```
 */
export function dynamodb(options: DynamoDBOptions): Backend {
  const cfg = config(options);
  const { call } = client(cfg);
  /** The item's primary key for the lock key `key`. */
  const itemKey = (key: string) => ({ pk: { S: cfg.prefix + key } });
  const nonceArg = (nonce: string) => {
    check(typeof nonce === "string" && nonce !== "", "[dynamodb]", "nonce must be a non-empty string");
    return { S: nonce };
  };

  const malformed = (what: string): BackendError => malformedReply(NAME, what, undefined, 200);

  /**
   * The fence counter of an item, a positive safe integer. For a `grant`, any positive integer:
   * one past the safe range (the counter was raised to its end) is passed on, and the core
   * refuses it as an exhausted fence counter and gives the lock back (docs/DESIGN.md §5.1).
   */
  function fenceOf(item: Item | undefined, grant = false): number {
    const n = Number(item?.fence?.N);
    if (!(grant ? Number.isInteger(n) : Number.isSafeInteger(n)) || n <= 0)
      throw malformed("the item's fence is not a positive integer");
    return n;
  }

  /**
   * The item a failed condition found: the one the server sent back, or (dynalite) one strongly
   * consistent read, which may see a later write: callers treat it as the state after the refusal.
   */
  async function found(
    reply: Reply & { ok: false },
    key: string,
    signal?: AbortSignal,
  ): Promise<Item | undefined> {
    if (reply.item) return reply.item;
    const got = await call("GetItem", { Key: itemKey(key), ConsistentRead: true }, signal);
    if (!got.ok) throw malformed("a read failed a condition");
    const item = got.json.Item;
    return typeof item === "object" && item !== null ? (item as Item) : undefined;
  }

  return {
    name: NAME,
    expiry: "observed",

    async acquire({ key, owner, nonce, ttl, signal, takeover }): Promise<AcquireResult> {
      // A free record, or the version the core saw unchanged long enough; the fence counts up in
      // the same write. Another try when the holder left between the refusal and the read.
      for (let attempt = 0; attempt < 3; attempt++) {
        const reply = await call(
          "UpdateItem",
          {
            Key: itemKey(key),
            UpdateExpression: "SET #h = :h, #o = :o, #v = :v, #t = :t ADD #f :one",
            ConditionExpression:
              takeover === undefined ? "attribute_not_exists(#h)" : "attribute_not_exists(#h) OR #v = :tk",
            ExpressionAttributeNames: NAMES,
            ExpressionAttributeValues: {
              ":h": nonceArg(nonce),
              ":o": { S: owner },
              ":v": { S: crypto.randomUUID() },
              ":t": { N: String(ttl) },
              ":one": { N: "1" },
              ...(takeover === undefined ? {} : { ":tk": { S: takeover } }),
            },
            ReturnValues: "UPDATED_NEW",
            ReturnValuesOnConditionCheckFailure: "ALL_OLD",
          },
          signal,
        );
        if (reply.ok) return { ok: true, token: fenceOf(reply.json.Attributes as Item | undefined, true) };
        const item = await found(reply, key, signal);
        const holder = item?.holder?.S;
        if (holder === undefined) continue; // released meanwhile: try again
        if (holder === nonce) {
          // A retried acquire whose first try was applied: keep the token, write a new version
          // (the deadline counts from this request, so contenders must count from it too).
          const renewed = await renewItem(key, nonce, ttl, signal, "ALL_NEW");
          if (renewed === undefined) continue;
          return { ok: true, token: fenceOf(renewed, true) };
        }
        const version = item?.ver?.S;
        const held = Number(item?.ttl?.N);
        if (typeof version !== "string" || !(held > 0))
          throw malformed("the holder's item has no version or ttl");
        return { ok: false, version, ttl: held };
      }
      throw new BackendError("the lock changed hands three times during one acquire; try again", {
        backend: NAME,
        retryable: true,
      });
    },

    async renew({ key, nonce, ttl, signal }): Promise<boolean> {
      return (await renewItem(key, nonce, ttl, signal, "NONE")) !== undefined;
    },

    async release({ key, nonce, signal }): Promise<void> {
      // The fence stays: the next holder's token counts on from it.
      await call(
        "UpdateItem",
        {
          Key: itemKey(key),
          UpdateExpression: "REMOVE #h, #o, #v, #t",
          ConditionExpression: "#h = :h",
          ExpressionAttributeNames: { "#h": "holder", "#o": "owner", "#v": "ver", "#t": "ttl" },
          ExpressionAttributeValues: { ":h": nonceArg(nonce) },
        },
        signal,
      );
    },

    async inspect(name, signal): Promise<HolderInfo | null> {
      const reply = await call(
        "GetItem",
        {
          Key: itemKey(name),
          ConsistentRead: true,
          ProjectionExpression: "#h, #o, #f",
          ExpressionAttributeNames: { "#h": "holder", "#o": "owner", "#f": "fence" },
        },
        signal,
      );
      if (!reply.ok) throw malformed("a read failed a condition");
      const item = reply.json.Item as Item | undefined;
      if (item?.holder?.S === undefined) return null;
      const owner = item.owner?.S;
      if (typeof owner !== "string") throw malformed("the holder's item has no owner");
      return { owner, token: fenceOf(item) };
    },

    async raiseFence({ key, nonce, token, signal }): Promise<boolean> {
      check(Number.isSafeInteger(token) && token > 0, "[dynamodb]", "token must be a positive integer");
      const reply = await call(
        "UpdateItem",
        {
          Key: itemKey(key),
          UpdateExpression: "SET #f = :tok, #v = :v",
          ConditionExpression: "#h = :h AND #f < :tok",
          ExpressionAttributeNames: { "#h": "holder", "#v": "ver", "#f": "fence" },
          ExpressionAttributeValues: {
            ":h": nonceArg(nonce),
            ":tok": { N: String(token) },
            ":v": { S: crypto.randomUUID() },
          },
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        },
        signal,
      );
      if (reply.ok) return true;
      // Refused: either not the holder, or the holder whose fence is already at least `token`.
      return (await found(reply, key, signal))?.holder?.S === nonce;
    },
  };

  /** A renewal: a new version and ttl if `nonce` holds `key`; the item after it, or undefined. */
  async function renewItem(
    key: string,
    nonce: string,
    ttl: number,
    signal: AbortSignal | undefined,
    returns: "NONE" | "ALL_NEW",
  ): Promise<Item | undefined> {
    const reply = await call(
      "UpdateItem",
      {
        Key: itemKey(key),
        UpdateExpression: "SET #v = :v, #t = :t",
        ConditionExpression: "#h = :h",
        ExpressionAttributeNames: { "#h": "holder", "#v": "ver", "#t": "ttl" },
        ExpressionAttributeValues: {
          ":h": nonceArg(nonce),
          ":v": { S: crypto.randomUUID() },
          ":t": { N: String(ttl) },
        },
        ReturnValues: returns,
      },
      signal,
    );
    if (!reply.ok) return undefined;
    return (reply.json.Attributes as Item | undefined) ?? {};
  }
}
