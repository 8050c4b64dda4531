// The upstash backend against a real redis-server behind the Upstash REST bridge (see
// test/setup/upstash.ts). Keys are read back with the official @upstash/redis client. Lock
// names are unique per test, so files running in parallel on the shared server do not meet.
import { inspect as nodeInspect } from "node:util";
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { fromEnv, upstash } from "../src/backends/upstash.ts";
import { BackendError, createMutex, isLockError } from "../src/index.ts";
import { type RedisServer, startRedis } from "./servers/redis.ts";
import { startBridge, type UpstashBridge } from "./servers/upstash-bridge.ts";

const ctx = inject("upstash");
const backend = upstash({ url: ctx.url, token: ctx.token });
const sdk = new Redis({ url: ctx.url, token: ctx.token });
const unique = () => `t-${crypto.randomUUID()}`;
const lockKey = (name: string) => `leasehold:{${name}}`;
const fenceKey = (name: string) => `leasehold:{${name}}:fence`;
const nonce = () => crypto.randomUUID();

/** Everything an error exposes: message, stack, cause chain, own properties. */
const dump = (e: unknown) => `${String(e)}\n${(e as Error)?.stack}\n${nodeInspect(e, { depth: 10 })}`;

describe("options", () => {
  const secret = "s3cret-TOKEN-value";
  it.each([
    [{ url: "", token: secret }, /option url is required/],
    [{ url: "not a url", token: secret }, /option url must be an http\(s\) URL/],
    [{ url: "ftp://example.com", token: secret }, /option url must be an http\(s\) URL, got ftp:$/],
    [{ url: `rediss://default:${secret}@eu1.upstash.io:6379`, token: secret }, /use the REST URL/],
    [{ url: "https://example.com", token: "" }, /option token is required/],
    [{ url: "https://example.com", token: `${secret}\n` }, /token contains characters/],
    [{ url: "https://example.com", token: `Bearer ${secret}` }, /token contains characters/],
    [{ url: "https://example.com", token: secret, prefix: 1 }, /option prefix must be a string/],
    [{ url: "https://example.com", token: secret, fetch: "x" }, /option fetch must be a function/],
  ])("rejects %o at creation with a TypeError that names the option", (options, message) => {
    let error: unknown;
    try {
      upstash(options as never);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toMatch(message);
    expect(dump(error)).not.toContain(secret);
  });

  it("rejects a missing options object", () => {
    expect(() => upstash(undefined as never)).toThrow(TypeError);
  });

  it("fromEnv reads a passed env object (Workers) and ignores a trailing slash in the URL", async () => {
    const b = fromEnv({ UPSTASH_REDIS_REST_URL: `${ctx.url}/`, UPSTASH_REDIS_REST_TOKEN: ctx.token });
    expect(b.name).toBe("upstash");
    expect(await b.inspect(unique())).toBeNull();
    const kv = fromEnv({ KV_REST_API_URL: ctx.url, KV_REST_API_TOKEN: ctx.token }, { prefix: "kv:" });
    const name = unique();
    expect((await kv.acquire({ key: name, owner: "kv", nonce: nonce(), ttl: 5_000 })).ok).toBe(true);
    expect(await sdk.exists(`kv:{${name}}`)).toBe(1);
  });

  it("fromEnv without an argument reads process.env", async () => {
    const saved = { ...process.env };
    try {
      process.env.UPSTASH_REDIS_REST_URL = ctx.url;
      process.env.UPSTASH_REDIS_REST_TOKEN = ctx.token;
      expect(await fromEnv().inspect(unique())).toBeNull();
      delete process.env.UPSTASH_REDIS_REST_TOKEN;
      expect(() => fromEnv()).toThrow(/UPSTASH_REDIS_REST_TOKEN is not set/);
      expect(() => fromEnv({})).toThrow(/UPSTASH_REDIS_REST_URL is not set/);
    } finally {
      process.env = saved;
    }
  });
});

describe("scripts on a real redis-server", () => {
  it("acquire sets the lock with PX and the fence counter; release deletes the lock", async () => {
    const name = unique();
    const n = nonce();
    const ttl = 5_000;
    const r = await backend.acquire({ key: name, owner: "worker-1", nonce: n, ttl });
    expect(r).toEqual({ ok: true, token: 1 });
    const pttl = await sdk.pttl(lockKey(name));
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(ttl);
    expect(await sdk.get(fenceKey(name))).toBe(1);
    expect(await sdk.get(lockKey(name))).toBe(`${n}|1|worker-1`);
    await backend.release({ key: name, nonce: n });
    expect(await sdk.exists(lockKey(name))).toBe(0);
    const again = await backend.acquire({ key: name, owner: "worker-2", nonce: nonce(), ttl });
    expect(again).toEqual({ ok: true, token: 2 });
    expect(await sdk.get(fenceKey(name))).toBe(2);
  });

  it("a taken lock answers the holder and its remaining time", async () => {
    const name = unique();
    await backend.acquire({ key: name, owner: "first", nonce: nonce(), ttl: 4_000 });
    const r = await backend.acquire({ key: name, owner: "second", nonce: nonce(), ttl: 4_000 });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.holder).toEqual({ owner: "first", token: 1 });
    expect(r.retryAfter).toBeGreaterThan(0);
    expect(r.retryAfter).toBeLessThanOrEqual(4_000);
    expect(await sdk.get(fenceKey(name))).toBe(1);
  });

  it("an acquire retried with the same nonce gets the same token and a fresh expiry", async () => {
    const name = unique();
    const n = nonce();
    expect(await backend.acquire({ key: name, owner: "a", nonce: n, ttl: 1_000 })).toEqual({
      ok: true,
      token: 1,
    });
    expect(await backend.acquire({ key: name, owner: "a", nonce: n, ttl: 8_000 })).toEqual({
      ok: true,
      token: 1,
    });
    expect(await sdk.pttl(lockKey(name))).toBeGreaterThan(1_000);
    expect(await sdk.get(fenceKey(name))).toBe(1);
  });

  it.each([
    "with spaces",
    `"double" and 'single' quotes`,
    "pipes | in || the | middle |",
    "|leading and trailing|",
    "new\nlines\r\nand\ttabs",
    "émoji 🔒🚀 and 日本語",
    "123",
    '{"json":true}',
    "x".repeat(256),
  ])("owner %j round-trips through the holder reply and inspect", async (owner) => {
    const name = unique();
    const r = await backend.acquire({ key: name, owner, nonce: nonce(), ttl: 5_000 });
    expect(r.ok).toBe(true);
    const token = r.ok ? r.token : 0;
    const other = await backend.acquire({ key: name, owner: "other", nonce: nonce(), ttl: 5_000 });
    expect(other).toMatchObject({ ok: false, holder: { owner, token } });
    const seen = await backend.inspect(name);
    expect(seen).toMatchObject({ owner, token });
    expect(seen?.ttlLeft).toBeGreaterThan(0);
    expect(seen?.ttlLeft).toBeLessThanOrEqual(5_000);
  });

  it("renew extends only for the holder's nonce; release by another nonce does nothing", async () => {
    const name = unique();
    const n = nonce();
    await backend.acquire({ key: name, owner: "a", nonce: n, ttl: 1_000 });
    expect(await backend.renew({ key: name, nonce: nonce(), ttl: 60_000 })).toBe(false);
    expect(await sdk.pttl(lockKey(name))).toBeLessThanOrEqual(1_000);
    await backend.release({ key: name, nonce: nonce() });
    expect(await backend.inspect(name)).toMatchObject({ owner: "a", token: 1 });
    expect(await backend.renew({ key: name, nonce: n, ttl: 60_000 })).toBe(true);
    expect(await sdk.pttl(lockKey(name))).toBeGreaterThan(1_000);
    await backend.release({ key: name, nonce: n });
    expect(await backend.inspect(name)).toBeNull();
    expect(await backend.renew({ key: name, nonce: n, ttl: 1_000 })).toBe(false);
    await backend.release({ key: name, nonce: n }); // releasing again is a no-op
  });

  it("a key deleted behind the holder's back makes renew answer false", async () => {
    const name = unique();
    const n = nonce();
    await backend.acquire({ key: name, owner: "a", nonce: n, ttl: 5_000 });
    await sdk.del(lockKey(name));
    expect(await backend.renew({ key: name, nonce: n, ttl: 5_000 })).toBe(false);
    expect(await sdk.exists(lockKey(name))).toBe(0);
    // The fence survives, so the next holder's token is still greater.
    expect(await backend.acquire({ key: name, owner: "b", nonce: nonce(), ttl: 5_000 })).toEqual({
      ok: true,
      token: 2,
    });
  });

  it("a custom prefix is used for both keys", async () => {
    const b = upstash({ url: ctx.url, token: ctx.token, prefix: "app1/" });
    const name = unique();
    await b.acquire({ key: name, owner: "a", nonce: nonce(), ttl: 5_000 });
    expect(await sdk.exists(`app1/{${name}}`, `app1/{${name}}:fence`)).toBe(2);
    expect(await backend.inspect(name)).toBeNull();
  });

  it("rejects a nonce containing | before sending anything", async () => {
    await expect(backend.acquire({ key: unique(), owner: "a", nonce: "a|b", ttl: 1_000 })).rejects.toThrow(
      TypeError,
    );
  });

  it("a Redis error is a non-retryable BackendError with Redis' text", async () => {
    const name = unique();
    await sdk.hset(lockKey(name), { field: "value" });
    const error = await backend
      .acquire({ key: name, owner: "a", nonce: nonce(), ttl: 1_000 })
      .catch((e) => e);
    expect(error).toBeInstanceOf(BackendError);
    expect(error).toMatchObject({ code: "ERR_BACKEND", retryable: false, status: 400, backend: "upstash" });
    expect(error.message).toMatch(/^\[leasehold\] \[upstash\] WRONGTYPE/);
  });

  it("a lock key holding a value leasehold did not write is taken, with no holder", async () => {
    const name = unique();
    await sdk.set(lockKey(name), "not ours", { px: 5_000 });
    const r = await backend.acquire({ key: name, owner: "a", nonce: nonce(), ttl: 1_000 });
    expect(r.ok).toBe(false);
    expect(r).not.toHaveProperty("holder");
    await expect(backend.inspect(name)).rejects.toMatchObject({ code: "ERR_BACKEND", retryable: false });
  });
});

describe("round trips, counted at a bridge of this file's own", () => {
  let server: RedisServer;
  let bridge: UpstashBridge;
  beforeAll(async () => {
    // Its own redis-server too: this test flushes the script cache.
    server = await startRedis();
    bridge = await startBridge({ redis: server.socket });
  });
  afterAll(async () => {
    await bridge?.stop();
    await server?.stop();
  });

  it("acquire, renew, release and inspect take one request each, also right after SCRIPT FLUSH", async () => {
    const b = upstash({ url: bridge.url, token: bridge.token });
    const flusher = new Redis({ url: bridge.url, token: bridge.token });
    for (let round = 0; round < 3; round++) {
      if (round === 1) expect(await flusher.scriptFlush()).toBe("OK");
      const name = unique();
      const n = nonce();
      const counted = async (fn: () => Promise<unknown>) => {
        bridge.resetStats();
        await fn();
        return bridge.stats();
      };
      const one = { total: 1, paths: { "/": 1 }, commands: 1 };
      expect(await counted(() => b.acquire({ key: name, owner: "a", nonce: n, ttl: 5_000 }))).toEqual(one);
      expect(await counted(() => b.acquire({ key: name, owner: "b", nonce: nonce(), ttl: 5_000 }))).toEqual(
        one,
      );
      expect(await counted(() => b.renew({ key: name, nonce: n, ttl: 5_000 }))).toEqual(one);
      expect(await counted(() => b.inspect(name))).toEqual(one);
      expect(await counted(() => b.release({ key: name, nonce: n }))).toEqual(one);
    }
  });

  it("through createMutex: tryAcquire, renew and release are one request each", async () => {
    const mutex = createMutex(upstash({ url: bridge.url, token: bridge.token }), {
      name: unique(),
      ttl: 10_000,
      renew: false,
    });
    bridge.resetStats();
    const lease = await mutex.tryAcquire();
    expect(lease).not.toBeNull();
    expect(bridge.stats().total).toBe(1);
    await lease?.renew();
    expect(bridge.stats().total).toBe(2);
    await lease?.release();
    expect(bridge.stats().total).toBe(3);
    expect(bridge.stats().paths).toEqual({ "/": 3 });
  });
});

describe("authentication", () => {
  it("a wrong token is ERR_BACKEND_AUTH, not retryable, and the token appears nowhere", async () => {
    const wrong = "wrong-token-AAAAbbbbCCCC1234";
    const b = upstash({ url: ctx.url, token: wrong });
    for (const call of [
      () => b.acquire({ key: unique(), owner: "a", nonce: nonce(), ttl: 1_000 }),
      () => b.renew({ key: unique(), nonce: nonce(), ttl: 1_000 }),
      () => b.release({ key: unique(), nonce: nonce() }),
      () => b.inspect(unique()),
    ]) {
      const error = await call().catch((e) => e);
      expect(isLockError(error)).toBe(true);
      expect(error).toMatchObject({
        name: "BackendError",
        code: "ERR_BACKEND_AUTH",
        status: 401,
        retryable: false,
      });
      const text = dump(error);
      expect(text).not.toContain(wrong);
      expect(text).not.toContain(ctx.token);
    }
  });

  it("the mutex gives up at once on a wrong token", async () => {
    const mutex = createMutex(upstash({ url: ctx.url, token: "wrong-token-xyz-123" }), { name: unique() });
    const started = performance.now();
    await expect(mutex.acquire({ timeout: 10_000 })).rejects.toMatchObject({ code: "ERR_BACKEND_AUTH" });
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});
