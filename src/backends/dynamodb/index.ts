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
 * A fire of runOnce (`name:fire:<id>`, docs/DESIGN.md §17) has no counter of its own: its item
 * holds its lease with the lease's `token` (`tokenFor`: the nonce it belongs to), drawn from the
 * `fence` of the mutex name's item; its done record (`holder` "", `until` in epoch ms) carries
 * the table's TTL attribute `expires` (epoch seconds), so DynamoDB deletes the whole item once
 * the record is over. A fire's acquire reads its item first (a late instance's "done" is that
 * one read), draws the token, then takes the item if it is still as read.
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
import type { AcquireRequest, AcquireResult, Backend, FireHolder, HolderInfo } from "../../backend.ts";
import { BackendError } from "../../errors.ts";
import { check } from "../../options.ts";
import { counterOf } from "../../slots.ts";
import { malformed as malformedReply } from "../shared/errors.ts";
import { checkRetain } from "../shared/options.ts";
import { client, type Item, NAME, type Reply } from "./client.ts";
import { config, type DynamoDBOptions } from "./options.ts";

export type { AwsCredentials, AwsCredentialsOption, DynamoDBOptions } from "./options.ts";

// Attribute names go through ExpressionAttributeNames: `ttl` and `owner` are reserved words.
const NAMES = { "#h": "holder", "#o": "owner", "#v": "ver", "#t": "ttl", "#f": "fence" };

/** Every attribute, by the `#name` the expressions use for it. */
const ATTRIBUTES: Record<string, string> = {
  h: "holder",
  o: "owner",
  v: "ver",
  t: "ttl",
  f: "fence",
  tk: "token",
  tf: "tokenFor",
  u: "until",
  x: "expires",
};

/** The ExpressionAttributeNames of `expressions`: each `#name` in them, in order of appearance. */
function namesOf(...expressions: (string | undefined)[]): Record<string, string> {
  const names: Record<string, string> = {};
  for (const e of expressions)
    for (const [ref, n] of (e ?? "").matchAll(/#(\w+)/g)) names[ref] = ATTRIBUTES[n!]!;
  return names;
}

/**
 * The `holder` of a completed fire's record: no nonce (they are non-empty) matches it, so renew,
 * release, raiseFence and a plain acquire's condition treat the record as held by someone else.
 */
const DONE = "";

/**
 * How long after its lease's end by the writer's clock (s) a fire's item that is no record may
 * be deleted by the table's TTL: far beyond any clock skew, so no live lease is ever deleted, and
 * a fire's acquire never reads a free item that is deleted and written again before it writes.
 */
const LINGER = 3_600;

/** The `expires` attribute (the table's TTL attribute, epoch seconds) for the epoch ms `at`. */
const expiresAt = (at: number) => ({ N: String(Math.ceil(at / 1_000)) });

/** Conditional writes that lost a race to another writer are tried again this many times. */
const ATTEMPTS = 5;

/**
 * Creates a DynamoDB backend for {@link createMutex}.
 *
 * @param options `table` (partition key `pk`, String), and optionally `region`, `credentials`,
 *   `env`, `endpoint`, `fetch`, `createTable` and `prefix`; see {@link DynamoDBOptions}.
 * @returns A backend named `"dynamodb"` with `expiry: "observed"`, `raiseFence` and `complete`.
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
  /** A fire's key: it draws its tokens from its mutex name's item (docs/DESIGN.md §17). */
  const isFire = (key: string) => counterOf(key) !== key;

  const malformed = (what: string): BackendError => malformedReply(NAME, what, undefined, 200);

  /**
   * A positive safe integer attribute. For a `grant`, any positive integer: one past the safe
   * range (the counter was raised to its end) is passed on, and the core refuses it as an
   * exhausted fence counter and gives the lock back (docs/DESIGN.md §5.1).
   */
  function positive(attribute: Record<string, unknown> | undefined, what: string, grant = false): number {
    const n = Number(attribute?.N);
    if (!(grant ? Number.isInteger(n) : Number.isSafeInteger(n)) || n <= 0)
      throw malformed(`the item's ${what} is not a positive integer`);
    return n;
  }

  /** The fence counter of an item. */
  const fenceOf = (item: Item | undefined, grant = false) => positive(item?.fence, "fence", grant);

  /**
   * The token of an item's holder: its `token` when written for it (a fire's lease, a done record,
   * a plain lease whose counter a fire's draw moved on), else the item's counter.
   */
  const tokenOf = (item: Item | undefined, grant = false): number =>
    item?.tokenFor?.S !== undefined && item.tokenFor.S === item.holder?.S
      ? positive(item.token, "token", grant)
      : fenceOf(item, grant);

  /** The item's completed fire, while its record lasts by this machine's clock; else undefined. */
  function doneOf(item: Item | undefined): FireHolder | undefined {
    if (item?.holder?.S !== DONE || !(Number(item.until?.N) > Date.now())) return undefined;
    const owner = item.owner?.S;
    if (typeof owner !== "string") throw malformed("the fire's record has no owner");
    return { owner, token: tokenOf(item) };
  }

  /** One conditional `UpdateItem` on `key`'s item; the names come from the expressions. */
  function update(
    key: string,
    u: {
      set: string;
      when?: string;
      values?: Record<string, unknown>;
      returns?: "UPDATED_NEW" | "ALL_NEW";
      old?: boolean;
    },
    signal: AbortSignal | undefined,
  ): Promise<Reply> {
    return call(
      "UpdateItem",
      {
        Key: itemKey(key),
        UpdateExpression: u.set,
        ...(u.when === undefined ? {} : { ConditionExpression: u.when }),
        ExpressionAttributeNames: namesOf(u.set, u.when),
        ...(u.values && Object.keys(u.values).length > 0 ? { ExpressionAttributeValues: u.values } : {}),
        ...(u.returns ? { ReturnValues: u.returns } : {}),
        ...(u.old ? { ReturnValuesOnConditionCheckFailure: "ALL_OLD" } : {}),
      },
      signal,
    );
  }

  /** `key`'s whole item, read strongly consistent; undefined when there is none. */
  async function read(key: string, signal?: AbortSignal): Promise<Item | undefined> {
    const got = await call("GetItem", { Key: itemKey(key), ConsistentRead: true }, signal);
    if (!got.ok) throw malformed("a read failed a condition");
    const item = got.json.Item;
    return typeof item === "object" && item !== null ? (item as Item) : undefined;
  }

  /**
   * The item a failed condition found: the one the server sent back, or (dynalite) one strongly
   * consistent read, which may see a later write: callers treat it as the state after the refusal.
   */
  const found = (reply: Reply & { ok: false }, key: string, signal?: AbortSignal) =>
    reply.item ? Promise.resolve(reply.item) : read(key, signal);

  /** The refusal of a lease held by someone else: its version and ttl, for the core's takeover. */
  function refusal(item: Item | undefined): AcquireResult {
    const version = item?.ver?.S;
    const held = Number(item?.ttl?.N);
    if (typeof version !== "string" || !(held > 0))
      throw malformed("the holder's item has no version or ttl");
    return { ok: false, version, ttl: held };
  }

  const changing = () =>
    new BackendError("the lock changed hands three times during one acquire; try again", {
      backend: NAME,
      retryable: true,
    });

  /**
   * Runs `set` on the counter of the mutex name `name` (its item's `fence`); the updated
   * attributes. With `only`, only while its condition `when` holds: undefined once `enough` says
   * the item read after a refusal needs it no more. A plain lease held on the name has the
   * counter as its token: its token is first written for it (`tokenFor`, `token`), so the counter
   * moves on without it.
   */
  async function onCounter(
    name: string,
    set: string,
    values: Record<string, unknown>,
    signal: AbortSignal | undefined,
    only?: { when: string; enough: (item: Item | undefined) => boolean },
  ): Promise<Item | undefined> {
    const free = "(attribute_not_exists(#h) OR #tf = #h)";
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const reply = await update(
        name,
        {
          set,
          when: only ? `${free} AND (${only.when})` : free,
          values,
          returns: "UPDATED_NEW",
          old: true,
        },
        signal,
      );
      if (reply.ok) return (reply.json.Attributes as Item | undefined) ?? {};
      const item = await found(reply, name, signal);
      if (only?.enough(item)) return undefined;
      const holder = item?.holder?.S;
      if (holder === undefined || item?.tokenFor?.S === holder) continue; // changed meanwhile
      // Not frozen if the holder changed meanwhile (the condition): look again.
      await update(
        name,
        {
          set: "SET #tf = #h, #tk = #f",
          when: "#h = :h AND (attribute_not_exists(#tf) OR #tf <> #h)",
          values: { ":h": { S: holder } },
        },
        signal,
      );
    }
    throw new BackendError(`the counter of ${JSON.stringify(name)} kept changing under concurrent writes`, {
      backend: NAME,
      retryable: true,
    });
  }

  /** The values of a new lease's attributes: holder, owner, a new version, ttl. */
  const leaseValues = ({ nonce, owner, ttl }: AcquireRequest) => ({
    ":h": nonceArg(nonce),
    ":o": { S: owner },
    ":v": { S: crypto.randomUUID() },
    ":t": { N: String(ttl) },
  });

  /** A plain key's acquire: one conditional write that takes the item and counts its fence up. */
  async function acquireKey(r: AcquireRequest): Promise<AcquireResult> {
    const { key, nonce, ttl, signal, takeover } = r;
    const values = () => ({ ...leaseValues(r), ":one": { N: "1" } });
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
            ...values(),
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
      if (holder === DONE) {
        const done = doneOf(item);
        if (done) return { ok: false, done };
        // A completed fire's record, over by this machine's clock: taken if it is still that record.
        const taken = await update(
          key,
          {
            set: "SET #h = :h, #o = :o, #v = :v, #t = :t REMOVE #u ADD #f :one",
            when: "#v = :was",
            values: { ...values(), ":was": item?.ver ?? { S: "" } },
            returns: "UPDATED_NEW",
          },
          signal,
        );
        if (taken.ok) return { ok: true, token: fenceOf(taken.json.Attributes as Item | undefined, true) };
        continue;
      }
      if (holder === nonce) {
        const retried = await again(key, nonce, ttl, signal);
        if (retried) return retried;
        continue;
      }
      return refusal(item);
    }
    throw changing();
  }

  /**
   * A fire's acquire: a read (a done record or a running lease answers at once), then the token
   * drawn from the mutex name's counter, then a write that takes the item if it is still as read.
   * Tokens of the key strictly increase: a grant's draw follows its read, which follows every
   * earlier grant on the item (a grant in between changes the version and fails the write).
   */
  async function acquireFire(r: AcquireRequest): Promise<AcquireResult> {
    const { key, nonce, ttl, signal, takeover } = r;
    for (let attempt = 0; attempt < 3; attempt++) {
      const item = await read(key, signal);
      const done = doneOf(item);
      if (done) return { ok: false, done };
      const holder = item?.holder?.S;
      if (holder === nonce) {
        const retried = await again(key, nonce, ttl, signal);
        if (retried) return retried;
        continue;
      }
      const was = item?.ver;
      if (holder !== undefined && holder !== DONE && takeover !== was?.S) return refusal(item);
      // Free, a record that is over, or the version the core saw unchanged long enough.
      const drawn = await onCounter(counterOf(key), "ADD #f :one", { ":one": { N: "1" } }, signal);
      const token = fenceOf(drawn, true);
      const taken = await update(
        key,
        {
          set: "SET #h = :h, #o = :o, #v = :v, #t = :t, #tk = :tk, #tf = :h, #x = :x REMOVE #u",
          when: was === undefined ? "attribute_not_exists(#v)" : "#v = :was",
          values: {
            ...leaseValues(r),
            ":tk": { N: String(token) },
            ":x": expiresAt(Date.now() + ttl + LINGER * 1_000),
            ...(was === undefined ? {} : { ":was": was }),
          },
        },
        signal,
      );
      if (taken.ok) return { ok: true, token };
      // Someone wrote in between: the drawn token is skipped, which keeps tokens increasing.
    }
    throw changing();
  }

  /** A retried acquire whose first try was applied: the same token, a new version; undefined if lost. */
  async function again(
    key: string,
    nonce: string,
    ttl: number,
    signal: AbortSignal | undefined,
  ): Promise<AcquireResult | undefined> {
    // The deadline counts from this request, so contenders must count from it too.
    const renewed = await renewItem(key, nonce, ttl, signal, "ALL_NEW");
    return renewed === undefined ? undefined : { ok: true, token: tokenOf(renewed, true) };
  }

  return {
    name: NAME,
    expiry: "observed",

    acquire: (r): Promise<AcquireResult> => (isFire(r.key) ? acquireFire(r) : acquireKey(r)),

    async renew({ key, nonce, ttl, signal }): Promise<boolean> {
      return (await renewItem(key, nonce, ttl, signal, "NONE")) !== undefined;
    },

    async release({ key, nonce, signal }): Promise<void> {
      if (isFire(key)) {
        // A fire's item holds no counter: the table's TTL deletes it (after LINGER).
        await update(
          key,
          {
            set: "SET #v = :v, #x = :x REMOVE #h, #o, #t",
            when: "#h = :h",
            values: {
              ":h": nonceArg(nonce),
              ":v": { S: crypto.randomUUID() },
              ":x": expiresAt(Date.now() + LINGER * 1_000),
            },
          },
          signal,
        );
        return;
      }
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

    async inspect({ key, signal }): Promise<HolderInfo | null> {
      const projection = "#h, #o, #f, #tk, #tf, #u";
      const reply = await call(
        "GetItem",
        {
          Key: itemKey(key),
          ConsistentRead: true,
          ProjectionExpression: projection,
          ExpressionAttributeNames: namesOf(projection),
        },
        signal,
      );
      if (!reply.ok) throw malformed("a read failed a condition");
      const item = reply.json.Item as Item | undefined;
      const holder = item?.holder?.S;
      if (holder === undefined) return null;
      if (holder === DONE) {
        const done = doneOf(item);
        return done ? { ...done, ttlLeft: Number(item?.until?.N) - Date.now(), done: true } : null;
      }
      const owner = item?.owner?.S;
      if (typeof owner !== "string") throw malformed("the holder's item has no owner");
      return { owner, token: tokenOf(item) };
    },

    // The holder's lease becomes its completed fire's record (holder DONE, until); on a fire's
    // key with the TTL attribute, so DynamoDB deletes the item once it is over. A reader counts
    // the record as gone once `until` passed on its own clock (the TTL deletes lazily).
    async complete({ key, nonce, retain, signal }): Promise<boolean> {
      checkRetain("[dynamodb]", retain);
      const fire = isFire(key);
      const until = Date.now() + retain;
      const record = `SET #h = :e, #tf = :e, #u = :u, #v = :v${fire ? ", #x = :x" : ""}`;
      const values = {
        ":h": nonceArg(nonce),
        ":e": { S: DONE },
        ":u": { N: String(until) },
        ":v": { S: crypto.randomUUID() },
        ...(fire ? { ":x": expiresAt(until) } : {}),
      };
      // The record keeps the lease's token: the one written for the holder (a fire's lease, or a
      // plain one a fire's draw froze), else the item's counter (a plain key: tried first).
      const steps = [
        {
          set: `${record}, #tk = #f REMOVE #t`,
          when: "#h = :h AND (attribute_not_exists(#tf) OR #tf <> :h)",
        },
        { set: `${record} REMOVE #t`, when: "#h = :h AND #tf = :h" },
      ];
      for (const step of fire ? steps.slice(1) : steps)
        if ((await update(key, { ...step, values }, signal)).ok) return true;
      return false;
    },

    async raiseFence({ key, nonce, token, signal }): Promise<boolean> {
      check(Number.isSafeInteger(token) && token > 0, "[dynamodb]", "token must be a positive integer");
      const values = {
        ":h": nonceArg(nonce),
        ":tok": { N: String(token) },
        ":v": { S: crypto.randomUUID() },
      };
      // The token written for the holder (a fire's lease, a plain one a fire's draw froze).
      const raiseOwn = () =>
        update(
          key,
          { set: "SET #tk = :tok, #v = :v", when: "#h = :h AND #tf = :h AND #tk < :tok", values, old: true },
          signal,
        );
      if (isFire(key)) {
        // The name's counter to at least `token` (later grants draw above it), then the lease's
        // token, so the token never shows above the counter (a failed counter step leaves it as
        // it was). Only the holder raises the counter: its item is read first.
        if ((await read(key, signal))?.holder?.S !== nonce) return false;
        await onCounter(counterOf(key), "SET #f = :tok", { ":tok": values[":tok"] }, signal, {
          when: "attribute_not_exists(#f) OR #f < :tok",
          enough: (item) => Number(item?.fence?.N) >= token,
        });
        const reply = await raiseOwn();
        return reply.ok || (await found(reply, key, signal))?.holder?.S === nonce;
      }
      // A plain key: the counter is the lease's token (again, once raised above a frozen one).
      const reply = await update(
        key,
        { set: "SET #f = :tok, #v = :v REMOVE #tf", when: "#h = :h AND #f < :tok", values, old: true },
        signal,
      );
      if (reply.ok) return true;
      // Refused: either not the holder, or the holder whose fence is already at least `token`.
      const item = await found(reply, key, signal);
      if (item?.holder?.S !== nonce) return false;
      if (item.tokenFor?.S !== nonce) return true;
      const own = await raiseOwn();
      return own.ok || (await found(own, key, signal))?.holder?.S === nonce;
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
    const fire = isFire(key);
    const reply = await call(
      "UpdateItem",
      {
        Key: itemKey(key),
        UpdateExpression: fire ? "SET #v = :v, #t = :t, #x = :x" : "SET #v = :v, #t = :t",
        ConditionExpression: "#h = :h",
        ExpressionAttributeNames: {
          "#h": "holder",
          "#v": "ver",
          "#t": "ttl",
          ...(fire ? { "#x": "expires" } : {}),
        },
        ExpressionAttributeValues: {
          ":h": nonceArg(nonce),
          ":v": { S: crypto.randomUUID() },
          ":t": { N: String(ttl) },
          ...(fire ? { ":x": expiresAt(Date.now() + ttl + LINGER * 1_000) } : {}),
        },
        ReturnValues: returns,
      },
      signal,
    );
    if (!reply.ok) return undefined;
    return (reply.json.Attributes as Item | undefined) ?? {};
  }
}
