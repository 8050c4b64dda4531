// What a fire of runOnce leaves on DynamoDB (dynalite; docs/DESIGN.md §17): one item per fire,
// whose done record carries the table's TTL attribute `expires` and no counter (the token comes
// from the mutex name's item), read back with the AWS SDK; the requests a late instance and a run
// cost; a plain lease held on the name while a fire draws keeps its token. dynalite never deletes
// by TTL (nor has UpdateTimeToLive): what is checked is the attribute DynamoDB would delete by,
// and that a reader counts the record as gone once `until` passed.
import { ScanCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, describe, expect, inject, it } from "vitest";
import type { Backend, FetchLike } from "../../../src/backend.ts";
import { dynamodb } from "../../../src/backends/dynamodb/index.ts";
import { fireKey } from "../../../src/once.ts";
import { sleep } from "../../../src/time.ts";
import { sdkClient } from "../../harness/servers/dynalite.ts";
import { withOldItem } from "./old-item.ts";

const { endpoint, region, credentials, table } = inject("dynamodb");
const sdk = sdkClient(endpoint);
afterAll(() => sdk.destroy());

/** The number in a Number attribute (NaN when there is none). */
const num = (attribute: unknown) => Number((attribute as { N?: string } | undefined)?.N);
const unique = (what: string) => `${what}-${crypto.randomUUID().slice(0, 8)}`;
const TTL = 5_000;

/** A backend with its own key prefix, recording each request's operation. */
function setup(): { backend: Backend; prefix: string; ops: string[] } {
  const ops: string[] = [];
  const prefix = `${unique("once")}/`;
  const counting: FetchLike = (url, init) => {
    ops.push(init.headers["x-amz-target"]?.replace("DynamoDB_20120810.", "") ?? "?");
    return fetch(url, init);
  };
  return {
    backend: dynamodb({ table, region, credentials, endpoint, prefix, fetch: counting }),
    prefix,
    ops,
  };
}

/** Every item under `prefix`, by partition key without the prefix. */
async function items(prefix: string): Promise<Record<string, Record<string, unknown>>> {
  const { Items = [] } = await sdk.send(
    new ScanCommand({
      TableName: table,
      FilterExpression: "begins_with(pk, :p)",
      ExpressionAttributeValues: { ":p": { S: prefix } },
      ConsistentRead: true,
    }),
  );
  return Object.fromEntries(Items.map((i) => [String(i.pk?.S).slice(prefix.length), i]));
}

/** Takes `key`; its nonce and token. */
async function take(backend: Backend, key: string, owner = "runner") {
  const nonce = crypto.randomUUID();
  const r = await backend.acquire({ key, owner, nonce, ttl: TTL });
  if (!r.ok) throw new Error(`acquire answered ${JSON.stringify(r)}`);
  return { nonce, token: r.token };
}

describe("dynamodb: what a fire of runOnce leaves", () => {
  it("one item per fire, its record with the TTL attribute expires and no counter; the name's item keeps the counter", async () => {
    const { backend, prefix } = setup();
    const name = "job";
    const plain = await take(backend, name);
    await backend.release({ key: name, nonce: plain.nonce });
    const keys = await Promise.all(["1", "2", "3"].map((tick) => fireKey(name, tick)));
    const tokens: number[] = [];
    for (const key of keys) {
      const a = await take(backend, key);
      const before = Date.now();
      expect(await backend.complete?.({ key, nonce: a.nonce, retain: 60_000 })).toBe(true);
      const record = (await items(prefix))[key]!;
      expect(record).toMatchObject({
        holder: { S: "" },
        owner: { S: "runner" },
        token: { N: String(a.token) },
      });
      expect(record).not.toHaveProperty("fence");
      expect(record).not.toHaveProperty("ttl");
      const until = num(record.until);
      expect(until).toBeGreaterThanOrEqual(before + 60_000);
      expect(num(record.expires)).toBe(Math.ceil(until / 1_000));
      tokens.push(a.token);
    }
    expect(tokens).toEqual([...tokens].sort((x, y) => x - y));
    expect(tokens[0]).toBeGreaterThan(plain.token);
    const all = await items(prefix);
    // The name's item (its counter) and one item per fire: no counter item per fire.
    expect(Object.keys(all).sort()).toEqual([name, ...keys].sort());
    expect(all[name]).toEqual({ pk: { S: `${prefix}${name}` }, fence: { N: String(tokens[2]) } });
  });

  it("after retain the record is gone for a reader (its TTL attribute already past) and the fire runs again with a greater token", async () => {
    const { backend, prefix } = setup();
    const key = await fireKey("job", "tick");
    const a = await take(backend, key);
    expect(await backend.complete?.({ key, nonce: a.nonce, retain: 300 })).toBe(true);
    expect(await backend.inspect({ key })).toMatchObject({ owner: "runner", token: a.token, done: true });
    const record = (await items(prefix))[key];
    const expires = num(record?.expires);
    expect(expires).toBe(Math.ceil(num(record?.until) / 1_000));
    // Past the record's end and its TTL attribute (whole seconds): gone for a reader, whether or
    // not the store deleted the item yet (dynalite never does).
    await sleep(expires * 1_000 - Date.now() + 100);
    expect(await backend.inspect({ key })).toBeNull();
    const b = await take(backend, key, "next");
    expect(b.token).toBeGreaterThan(a.token);
    const item = (await items(prefix))[key]!;
    // A running fire's item: its lease, its own token, no record left, deleted by TTL long after its lease.
    expect(item).toMatchObject({
      holder: { S: b.nonce },
      tokenFor: { S: b.nonce },
      token: { N: String(b.token) },
    });
    expect(item).not.toHaveProperty("until");
    expect(num(item.expires) * 1_000).toBeGreaterThan(Date.now() + TTL);
  });

  it("a released fire's item keeps no lease and carries the TTL attribute, so the store deletes it", async () => {
    const { backend, prefix } = setup();
    const key = await fireKey("job", "failed");
    const a = await take(backend, key);
    await backend.release({ key, nonce: a.nonce });
    const item = (await items(prefix))[key]!;
    expect(item).not.toHaveProperty("holder");
    expect(item).not.toHaveProperty("fence");
    expect(num(item.expires)).toBeGreaterThan(Date.now() / 1_000);
    expect(await backend.inspect({ key })).toBeNull();
    expect((await take(backend, key)).token).toBeGreaterThan(a.token);
  });

  it("a late instance's done is one GetItem; a run is a read, a draw and a write, and complete one write", async () => {
    const { backend, ops } = setup();
    const key = await fireKey("job", "count");
    const a = await take(backend, key);
    expect(ops.splice(0)).toEqual(["GetItem", "UpdateItem", "UpdateItem"]);
    expect(await backend.complete?.({ key, nonce: a.nonce, retain: 60_000 })).toBe(true);
    expect(ops.splice(0)).toEqual(["UpdateItem"]);
    const late = await backend.acquire({ key, owner: "late", nonce: crypto.randomUUID(), ttl: TTL });
    expect(late).toEqual({ ok: false, done: { owner: "runner", token: a.token } });
    expect(ops.splice(0)).toEqual(["GetItem"]);
    // A fire that is running: one read too, with the holder's version and ttl for the takeover.
    const other = await fireKey("job", "running");
    await take(backend, other);
    ops.length = 0;
    expect(
      await backend.acquire({ key: other, owner: "b", nonce: crypto.randomUUID(), ttl: TTL }),
    ).toMatchObject({
      ok: false,
      ttl: TTL,
    });
    expect(ops.splice(0)).toEqual(["GetItem"]);
  });

  it("a plain lease held on the name keeps its token while fires draw from the name's counter", async () => {
    const { backend, prefix, ops } = setup();
    const name = "job";
    const plain = await take(backend, name, "plain");
    ops.length = 0;
    const f1 = await take(backend, await fireKey(name, "1"));
    // The first draw writes the plain lease's token beside it: a refused draw, the read of the
    // item (dynalite sends no old item back), that write, the draw; then the fire's write.
    expect(ops.splice(0)).toEqual([
      "GetItem",
      "UpdateItem",
      "GetItem",
      "UpdateItem",
      "UpdateItem",
      "UpdateItem",
    ]);
    const f2 = await take(backend, await fireKey(name, "2"));
    expect(ops.splice(0)).toEqual(["GetItem", "UpdateItem", "UpdateItem"]);
    expect(f1.token).toBeGreaterThan(plain.token);
    expect(f2.token).toBeGreaterThan(f1.token);
    expect(await backend.inspect({ key: name })).toEqual({ owner: "plain", token: plain.token });
    // A retried acquire of the plain lease answers its own token, not the counter's.
    expect(await backend.acquire({ key: name, owner: "plain", nonce: plain.nonce, ttl: TTL })).toEqual({
      ok: true,
      token: plain.token,
    });
    expect((await items(prefix))[name]?.fence).toEqual({ N: String(f2.token) });
    // Completed on the name itself, the record keeps the plain lease's token.
    expect(await backend.complete?.({ key: name, nonce: plain.nonce, retain: 300 })).toBe(true);
    expect(await backend.acquire({ key: name, owner: "late", nonce: crypto.randomUUID(), ttl: TTL })).toEqual(
      {
        ok: false,
        done: { owner: "plain", token: plain.token },
      },
    );
    await sleep(400);
    // Over by the reader's clock: the record is taken in place, with the counter's next token.
    expect((await take(backend, name, "next")).token).toBe(f2.token + 1);
  });

  it("raiseFence on a plain lease held while a fire drew: its token rises, above or below the counter", async () => {
    const { backend } = setup();
    const plain = await take(backend, "job", "plain");
    const fire = await take(backend, await fireKey("job", "1"));
    const raise = (token: number) =>
      backend.raiseFence?.({ key: "job", owner: "plain", nonce: plain.nonce, token });
    // Below the counter (the fire drew it): the lease's own token rises, the counter stays.
    expect(await raise(fire.token)).toBe(true);
    expect(await backend.inspect({ key: "job" })).toEqual({ owner: "plain", token: fire.token });
    // Above it: both.
    expect(await raise(fire.token + 5)).toBe(true);
    expect(await backend.inspect({ key: "job" })).toEqual({ owner: "plain", token: fire.token + 5 });
    expect((await take(backend, await fireKey("job", "2"))).token).toBe(fire.token + 6);
    expect(await backend.inspect({ key: "job" })).toEqual({ owner: "plain", token: fire.token + 5 });
  });

  it("where the server sends the old item back (AWS; double), the first draw beside a plain lease costs two writes more, and no read", async () => {
    const ops: string[] = [];
    const prefix = `${unique("once")}/`;
    const read = async (pk: string) => (await items(prefix))[pk.slice(prefix.length)];
    const backend = dynamodb({ table, region, credentials, endpoint, prefix, fetch: withOldItem(read, ops) });
    const plain = await take(backend, "job", "plain");
    ops.length = 0;
    const fire = await take(backend, await fireKey("job", "1"));
    expect(ops).toEqual(["GetItem", "UpdateItem", "UpdateItem", "UpdateItem", "UpdateItem"]);
    expect(fire.token).toBe(plain.token + 1);
    expect(await backend.inspect({ key: "job" })).toEqual({ owner: "plain", token: plain.token });
  });

  it("a fire's tokens strictly increase when another grant and release land between an acquire's draw and its write", async () => {
    const { backend: other, prefix } = setup();
    let hold: (() => void) | undefined;
    let held: Promise<void> | undefined;
    let writes = 0;
    // The global fetch, with this instance's second write (the write after its draw) held until
    // released: the delay of a slow network, not a fake store.
    const slow: FetchLike = async (url, init) => {
      if (init.headers["x-amz-target"]?.endsWith("UpdateItem") && ++writes === 2) {
        held = new Promise((resolve) => {
          hold = resolve;
        });
        await held;
      }
      return fetch(url, init);
    };
    const backend = dynamodb({ table, region, credentials, endpoint, prefix, fetch: slow });
    const key = await fireKey("job", "race");
    const late = backend.acquire({ key, owner: "late", nonce: crypto.randomUUID(), ttl: TTL });
    while (hold === undefined) await sleep(5);
    const between = await take(other, key, "between");
    await other.release({ key, nonce: between.nonce });
    hold();
    const r = await late;
    expect(r.ok && r.token).toBeGreaterThan(between.token);
    expect((await items(prefix))[key]?.token).toEqual({ N: String(r.ok && r.token) });
  });

  it("raiseFence on a fire whose counter step fails leaves the lease's token as it was (the counter first)", async () => {
    // A counter write that keeps failing (HTTP 500 from a fetch double in front of dynalite: a
    // fault dynalite cannot produce on demand); every other request reaches dynalite.
    const prefix = `${unique("once")}/`;
    let failCounter = false;
    const backend = dynamodb({
      table,
      region,
      credentials,
      endpoint,
      prefix,
      fetch: (url, init) => {
        const body = JSON.parse(String(init.body ?? "{}")) as { Key?: { pk?: { S?: string } } };
        if (
          failCounter &&
          body.Key?.pk?.S === `${prefix}job` &&
          /UpdateItem/.test(init.headers["x-amz-target"] ?? "")
        )
          return Promise.resolve(new Response('{"__type":"InternalServerError"}', { status: 500 }));
        return fetch(url, init);
      },
    });
    const key = await fireKey("job", "failing");
    const a = await take(backend, key);
    failCounter = true;
    await expect(
      backend.raiseFence!({ key, owner: "runner", nonce: a.nonce, token: a.token + 10 }),
    ).rejects.toThrow();
    failCounter = false;
    expect(await backend.inspect({ key })).toEqual({ owner: "runner", token: a.token });
  });

  it("complete refuses a retain outside 1 … 2 147 483 647 ms with a RangeError, before sending anything", async () => {
    const { backend, ops } = setup();
    for (const retain of [0, 1.5, 2_147_483_648, Number.NaN]) {
      const e = await backend.complete!({ key: "job:fire:1", nonce: crypto.randomUUID(), retain }).catch(
        (x: unknown) => x,
      );
      expect(e).toBeInstanceOf(RangeError);
      expect((e as Error).message).toContain("retain must be an integer from 1 to 2147483647 ms");
    }
    expect(ops).toEqual([]);
  });

  it("raiseFence on a fire raises its lease's token and the name's counter: later grants draw above it", async () => {
    const { backend } = setup();
    const key = await fireKey("job", "raised");
    const a = await take(backend, key);
    expect(await backend.raiseFence?.({ key, owner: "runner", nonce: a.nonce, token: a.token + 10 })).toBe(
      true,
    );
    expect(await backend.inspect({ key })).toEqual({ owner: "runner", token: a.token + 10 });
    expect(
      await backend.raiseFence?.({ key, owner: "x", nonce: crypto.randomUUID(), token: a.token + 20 }),
    ).toBe(false);
    const plain = await take(backend, "job", "plain");
    expect(plain.token).toBe(a.token + 11);
    await backend.release({ key: "job", nonce: plain.nonce });
    // Raised again to a token below the counter: the counter never goes back.
    expect(await backend.raiseFence?.({ key, owner: "runner", nonce: a.nonce, token: a.token + 10 })).toBe(
      true,
    );
    expect((await take(backend, "job")).token).toBe(a.token + 12);
  });
});
