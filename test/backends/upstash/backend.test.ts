// The upstash backend against a real redis-server behind the Upstash REST bridge (see
// test/harness/setup/upstash.ts). Keys are read back with the official @upstash/redis client. Lock
// names are unique per test, so files running in parallel on the shared server do not meet.
import { spawn } from "node:child_process";
import { inspect as nodeInspect } from "node:util";
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { type FenceHealed, fromEnv, upstash } from "../../../src/backends/upstash/index.ts";
import { BackendError, createMutex, isLockError, LockTimeoutError } from "../../../src/index.ts";
import { thrown } from "../../harness/doubles.ts";
import { nodeScript } from "../../harness/node-script.ts";
import { registerSecret } from "../../harness/secrets.ts";
import { type Fault, startFaultProxy } from "../../harness/servers/fault-proxy.ts";
import { type RedisServer, startRedis } from "../../harness/servers/redis.ts";
import { startBridge, type UpstashBridge } from "../../harness/servers/upstash-bridge.ts";
import { fenceKey, lockKey } from "../../harness/upstash.ts";

const ctx = inject("upstash");
const backend = upstash({ url: ctx.url, token: ctx.token });
const sdk = new Redis({ url: ctx.url, token: ctx.token });
const unique = () => `t-${crypto.randomUUID()}`;
const nonce = () => crypto.randomUUID();

/** acquire, renew, release and inspect of fresh names through `b`. */
const everyCall = (b: typeof backend) => [
  () => b.acquire({ key: unique(), owner: "a", nonce: nonce(), ttl: 1_000 }),
  () => b.renew({ key: unique(), nonce: nonce(), ttl: 1_000 }),
  () => b.release({ key: unique(), nonce: nonce() }),
  () => b.inspect({ key: unique() }),
];

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
    [
      { url: "https://example.com", token: secret, onFenceHealed: "warn" },
      /option onFenceHealed must be a function/,
    ],
  ])("rejects %o at creation with a TypeError that names the option", (options, message) => {
    const error = thrown(() => upstash(options as never));
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
    expect(await b.inspect({ key: unique() })).toBeNull();
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
      expect(await fromEnv().inspect({ key: unique() })).toBeNull();
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

  it("a taken lock answers its remaining time (who holds it is holder()'s job)", async () => {
    const name = unique();
    await backend.acquire({ key: name, owner: "first", nonce: nonce(), ttl: 4_000 });
    const r = await backend.acquire({ key: name, owner: "second", nonce: nonce(), ttl: 4_000 });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(Object.keys(r).sort()).toEqual(["ok", "retryAfter"]);
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
  ])("owner %j round-trips through the taken reply and inspect", async (owner) => {
    const name = unique();
    const r = await backend.acquire({ key: name, owner, nonce: nonce(), ttl: 5_000 });
    expect(r.ok).toBe(true);
    const token = r.ok ? r.token : 0;
    const other = await backend.acquire({ key: name, owner: "other", nonce: nonce(), ttl: 5_000 });
    // The taken reply carries the holder to the backend (its token counts as seen), not to the caller.
    expect(other).toEqual({ ok: false, retryAfter: expect.any(Number) });
    const seen = await backend.inspect({ key: name });
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
    expect(await backend.inspect({ key: name })).toMatchObject({ owner: "a", token: 1 });
    expect(await backend.renew({ key: name, nonce: n, ttl: 60_000 })).toBe(true);
    expect(await sdk.pttl(lockKey(name))).toBeGreaterThan(1_000);
    await backend.release({ key: name, nonce: n });
    expect(await backend.inspect({ key: name })).toBeNull();
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
    expect(await backend.inspect({ key: name })).toBeNull();
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

  it("acquireAny fails with WRONGTYPE on a key of another type where it would take it, and leaves it as it was", async () => {
    // ACQUIRE_ANY reads several locks with MGET, which answers nil for a hash: the free slot is
    // read again with GET before it is taken.
    const [held, hash] = [unique(), unique()];
    await backend.acquire({ key: held, owner: "h", nonce: nonce(), ttl: 5_000 });
    await sdk.hset(lockKey(hash), { field: "value" });
    const error = await backend.acquireAny!({
      keys: [held, hash],
      owner: "a",
      nonce: nonce(),
      ttl: 1_000,
    }).catch((e) => e);
    expect(error).toBeInstanceOf(BackendError);
    expect(error).toMatchObject({ code: "ERR_BACKEND", retryable: false, backend: "upstash" });
    expect(error.message).toMatch(/^\[leasehold\] \[upstash\] WRONGTYPE/);
    expect(await sdk.hgetall(lockKey(hash))).toEqual({ field: "value" });
    expect(await sdk.exists(fenceKey(hash))).toBe(0);
  });

  it("a lock key holding a value leasehold did not write is taken, with no holder", async () => {
    const name = unique();
    await sdk.set(lockKey(name), "not ours", { px: 5_000 });
    const r = await backend.acquire({ key: name, owner: "a", nonce: nonce(), ttl: 1_000 });
    expect(r.ok).toBe(false);
    expect(r).not.toHaveProperty("holder");
    await expect(backend.inspect({ key: name })).rejects.toMatchObject({
      code: "ERR_BACKEND",
      retryable: false,
    });
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
      expect(await counted(() => b.inspect({ key: name }))).toEqual(one);
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
    for (const call of everyCall(b)) {
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

// What a real Upstash account adds to the emulator (issue 12): eviction or a failover that sets
// the fence counter back, read-only tokens, and the plan's limit errors.
const readOnly = upstash({ url: ctx.url, token: ctx.readOnlyToken });
registerSecret(ctx.readOnlyToken);

/** Takes and frees `name` `times` times through `b`; returns the last token. */
async function cycle(b: typeof backend, name: string, times: number): Promise<number> {
  let token = 0;
  for (let i = 0; i < times; i++) {
    const n = nonce();
    const r = await b.acquire({ key: name, owner: "cycle", nonce: n, ttl: 5_000 });
    if (!r.ok) throw new Error("lock taken");
    token = r.token;
    await b.release({ key: name, nonce: n });
  }
  return token;
}

describe("a fence counter that goes back (eviction, a failover that lost writes, a flush)", () => {
  /** A backend that records what onFenceHealed is told. */
  const healing = () => {
    const told: FenceHealed[] = [];
    return { told, b: upstash({ url: ctx.url, token: ctx.token, onFenceHealed: (info) => told.push(info) }) };
  };

  it("the acquire heals it: the counter is raised above the highest token seen, the lease granted with that token, and onFenceHealed told", async () => {
    const name = unique();
    const { told, b } = healing();
    expect(await cycle(b, name, 2)).toBe(2);
    // What eviction of the fence key does: the counter starts again at 1.
    expect(await sdk.del(fenceKey(name))).toBe(1);
    const n = nonce();
    expect(await b.acquire({ key: name, owner: "a", nonce: n, ttl: 5_000 })).toEqual({ ok: true, token: 3 });
    // The lease and the counter both carry the healed token.
    expect(await sdk.get(fenceKey(name))).toBe(3);
    expect(await b.inspect({ key: name })).toMatchObject({ owner: "a", token: 3 });
    expect(told).toEqual([
      { backend: "upstash", name, seen: 2, got: 1, token: 3, message: expect.any(String) },
    ]);
    const { message } = told[0]!;
    expect(message).toMatch(
      new RegExp(
        `^\\[leasehold\\] \\[upstash\\] the fence counter of lock "${name}" went back \\(seen 2, got 1\\)`,
      ),
    );
    expect(message).toMatch(/eviction/);
    expect(message).toMatch(/failover/);
    expect(message).toContain(fenceKey(name));
    expect(message).toMatch(/raised to 3/);
    expect(message).not.toContain(ctx.token);
    await b.release({ key: name, nonce: n });
    // In step again: the next lease is one more, and nothing is reported.
    expect(await cycle(b, name, 1)).toBe(4);
    expect(told).toHaveLength(1);
  });

  it("mutex.acquire gets a lease at once, with a token above every one it saw", async () => {
    const name = unique();
    const { told, b } = healing();
    const mutex = createMutex(b, { name, ttl: 5_000 });
    const first = await mutex.acquire();
    await first.release();
    await sdk.del(fenceKey(name));
    const second = await mutex.acquire({ timeout: 5_000 });
    expect(second.token).toBeGreaterThan(first.token);
    expect(told.map((t) => t.token)).toEqual([second.token]);
    await second.release();
  });

  it("by default the heal is printed with console.warn; an onFenceHealed that throws is ignored", async () => {
    const name = unique();
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      expect(await cycle(backend, name, 2)).toBe(2);
      await sdk.del(fenceKey(name));
      expect(await cycle(backend, name, 1)).toBe(3);
      expect(warn).toHaveBeenCalledTimes(1);
      expect(String(warn.mock.calls[0]![0])).toMatch(/went back \(seen 2, got 1\).* raised to 3/);
    } finally {
      warn.mockRestore();
    }
    const throwing = upstash({
      url: ctx.url,
      token: ctx.token,
      onFenceHealed: () => {
        throw new Error("observer failed");
      },
    });
    const other = unique();
    expect(await cycle(throwing, other, 1)).toBe(1);
    await sdk.del(fenceKey(other));
    expect(await cycle(throwing, other, 1)).toBe(2);
  });

  it("when the raise fails, the lock is freed and the acquire fails, retryable as the raise's failure was", async () => {
    // The fault proxy answers the raise (the only script with KEEPTTL) with a 503, or delays it
    // past the lease's ttl so that the lock is no longer ours when it runs.
    const proxy = startFaultProxy(ctx.url);
    let fault: Fault | undefined;
    proxy.setRule((req) => (req.body.includes("KEEPTTL") ? fault : undefined));
    try {
      const told: FenceHealed[] = [];
      const b = upstash({
        url: await proxy.client("c"),
        token: ctx.token,
        onFenceHealed: (i) => told.push(i),
      });
      for (const [f, why] of [
        [{ kind: "status", status: 503, format: "html" }, /HTTP 503/],
        [{ kind: "delay", ms: 300 }, /the lock was no longer ours/],
      ] as const) {
        const name = unique();
        expect(await cycle(b, name, 2)).toBe(2);
        await sdk.del(fenceKey(name));
        fault = f;
        const error = await b.acquire({ key: name, owner: "a", nonce: nonce(), ttl: 100 }).catch((e) => e);
        expect(error).toBeInstanceOf(BackendError);
        expect(error).toMatchObject({ code: "ERR_BACKEND", retryable: true, backend: "upstash" });
        expect(error.message).toMatch(/fence counter of lock "t-[^"]+" went back \(seen 2, got 1\)/);
        expect(error.message).toMatch(/Raising it to 3 failed/);
        expect(error.message).toMatch(why);
        expect(error.message).toContain(`SET ${fenceKey(name)} 2`);
        expect(dump(error)).not.toContain(ctx.token);
        expect(await sdk.exists(lockKey(name))).toBe(0);
        fault = undefined;
        // The next attempt heals it: the counter is at 1, still not above 2.
        expect(await cycle(b, name, 1)).toBe(3);
      }
      expect(told.map((t) => [t.got, t.token])).toEqual([
        [2, 3],
        [2, 3],
      ]);
    } finally {
      await proxy.stop();
    }
  });

  it("tokens seen through inspect and through a taken lock count too", async () => {
    const name = unique();
    const other = upstash({ url: ctx.url, token: ctx.token });
    expect(await cycle(other, name, 3)).toBe(3);
    const n = nonce();
    expect(await other.acquire({ key: name, owner: "b", nonce: n, ttl: 5_000 })).toMatchObject({ token: 4 });
    // This backend never acquired the name: it sees token 4 by inspect, and 4 as the holder.
    expect(await backend.inspect({ key: name })).toMatchObject({ owner: "b", token: 4 });
    const viaInspect = healing();
    await viaInspect.b.inspect({ key: name });
    const viaHolder = healing();
    expect(await viaHolder.b.acquire({ key: name, owner: "c", nonce: nonce(), ttl: 5_000 })).toMatchObject({
      ok: false,
    });
    await other.release({ key: name, nonce: n });
    await sdk.del(fenceKey(name));
    expect(await cycle(viaInspect.b, name, 1)).toBe(5);
    expect(viaInspect.told).toMatchObject([{ seen: 4, got: 1, token: 5 }]);
    // Healed to 5 already: 6 is above everything viaHolder saw.
    expect(await cycle(viaHolder.b, name, 1)).toBe(6);
    expect(viaHolder.told).toEqual([]);
  });

  it("acquireAny counts the tokens of the holders of keys that are all taken, and heals the slot it takes", async () => {
    const [a, b] = [unique(), unique()];
    const other = upstash({ url: ctx.url, token: ctx.token });
    expect(await cycle(other, a, 2)).toBe(2);
    const [na, nb] = [nonce(), nonce()];
    expect(await other.acquire({ key: a, owner: "h", nonce: na, ttl: 5_000 })).toMatchObject({ token: 3 });
    expect(await other.acquire({ key: b, owner: "h", nonce: nb, ttl: 5_000 })).toMatchObject({ token: 1 });
    const fresh = healing();
    const any = () => fresh.b.acquireAny!({ keys: [a, b], owner: "c", nonce: nonce(), ttl: 5_000 });
    expect(await any()).toMatchObject({ ok: false });
    await other.release({ key: a, nonce: na });
    await sdk.del(fenceKey(a));
    expect(await any()).toEqual({ ok: true, token: 4, index: 0 });
    expect(fresh.told).toMatchObject([{ name: a, seen: 3, got: 1, token: 4 }]);
    expect(await sdk.get(fenceKey(a))).toBe(4);
    await other.release({ key: b, nonce: nb });
  });

  it("answers to concurrent calls that come back first do not count against an acquire already sent", async () => {
    // The winner's answer (token 5) is held back; meanwhile a loser is told the holder has
    // token 5, and an inspect sees a later holder with token 6. Neither was seen before the
    // winner's request left, so neither makes its token 5 a counter that went back.
    let letGo = () => {};
    const held = new Promise<void>((resolve) => (letGo = resolve));
    const reply = (result: unknown) => new Response(JSON.stringify({ result }));
    const raised: unknown[] = [];
    const told: FenceHealed[] = [];
    const fake = upstash({
      url: "https://fake.invalid",
      token: "fake-token-0123456789",
      onFenceHealed: (info) => told.push(info),
      fetch: async (_url, init) => {
        const command = JSON.parse(init.body ?? "[]");
        if (command[0] === "EVAL_RO") return reply(["n2|6|later", 1_000]);
        if (String(command[1]).includes("KEEPTTL")) {
          raised.push(command[6]); // the token of the raise
          return reply(1);
        }
        if (command[7] === "winner") return held.then(() => reply([1, 5, 0]));
        // Taken: the smallest PTTL, then the holder's token.
        return reply([0, 1_000, 5]);
      },
    });
    const take = (owner: string) => fake.acquire({ key: "k", owner, nonce: nonce(), ttl: 1_000 });
    const winner = take("winner");
    expect(await take("loser")).toMatchObject({ ok: false });
    expect(await fake.inspect({ key: "k" })).toMatchObject({ token: 6 });
    letGo();
    expect(await winner).toEqual({ ok: true, token: 5 });
    expect(told).toEqual([]);
    // Seen before it was sent, 6 does count against the next acquire: healed to 7.
    expect(await take("winner")).toEqual({ ok: true, token: 7 });
    expect(raised).toEqual([7]);
    expect(told).toMatchObject([{ name: "k", seen: 6, got: 5, token: 7 }]);
  });

  it("the memory is bounded: the least recently seen of more than 4 096 names is forgotten", async () => {
    // A fetch that answers every acquire as granted with the next token of a shared counter, so
    // 4 097 names cost no network; the fence "goes back" for name "first" by answering 1 again.
    let next = 1;
    let reply = () => next++;
    const told: FenceHealed[] = [];
    const fake = upstash({
      url: "https://fake.invalid",
      token: "fake-token-0123456789",
      onFenceHealed: (info) => told.push(info),
      fetch: async (_url, init) =>
        new Response(JSON.stringify({ result: init.body?.includes("KEEPTTL") ? 1 : [1, reply(), 0] })),
    });
    const take = (key: string) => fake.acquire({ key, owner: "o", nonce: nonce(), ttl: 1_000 });
    await take("first");
    for (let i = 0; i < 4_095; i++) await take(`other-${i}`);
    reply = () => 1;
    expect(await take("first")).toEqual({ ok: true, token: 2 });
    expect(told).toMatchObject([{ name: "first", seen: 1, got: 1, token: 2 }]);
    // "first" is now the most recent; 4 096 further names push it out.
    reply = () => next++;
    for (let i = 0; i < 4_096; i++) await take(`more-${i}`);
    reply = () => 1;
    expect(await take("first")).toEqual({ ok: true, token: 1 });
    expect(told).toHaveLength(1);
  });
});

describe("a read-only token", () => {
  it("can inspect: backend.inspect and mutex.holder() work, raw strings without base64", async () => {
    const name = unique();
    const owner = "émoji 🔒 | owner";
    const lease = await createMutex(backend, { name, owner, ttl: 5_000, renew: false }).acquire();
    const seen = await readOnly.inspect({ key: name });
    expect(seen).toMatchObject({ owner, token: lease.token });
    expect(seen?.ttlLeft).toBeGreaterThan(0);
    expect(await createMutex(readOnly, { name }).holder()).toMatchObject({ owner, token: lease.token });
    await lease.release();
    expect(await readOnly.inspect({ key: name })).toBeNull();
  });

  it("can inspect a lock held shared, in one request: the newest reader and how many are live", async () => {
    const name = unique();
    const make = (owner: string) => createMutex(backend, { name, owner, ttl: 5_000, renew: false });
    const a = (await make("a").tryAcquire({ mode: "shared" }))!;
    const b = (await make("b").tryAcquire({ mode: "shared" }))!;
    let requests = 0;
    const counted = upstash({
      url: ctx.url,
      token: ctx.readOnlyToken,
      fetch: (url, init) => {
        requests++;
        return fetch(url, init);
      },
    });
    expect(await createMutex(counted, { name }).holder()).toEqual({ owner: "b", token: b.token, readers: 2 });
    expect(requests).toBe(1);
    await b.release();
    // The lock's value still names b (the newest granted); readers counts the live ones.
    expect(await readOnly.inspect({ key: name })).toMatchObject({ readers: 1 });
    await a.release();
    expect(await readOnly.inspect({ key: name })).toBeNull();
  });

  it("acquire, renew and release reject with ERR_BACKEND_AUTH saying the token is read-only", async () => {
    const name = unique();
    for (const call of [
      () => readOnly.acquire({ key: name, owner: "a", nonce: nonce(), ttl: 1_000 }),
      () => readOnly.renew({ key: name, nonce: nonce(), ttl: 1_000 }),
      () => readOnly.release({ key: name, nonce: nonce() }),
    ]) {
      const error = await call().catch((e) => e);
      expect(error).toMatchObject({ name: "BackendError", code: "ERR_BACKEND_AUTH", retryable: false });
      expect(error.message).toMatch(/^\[leasehold\] \[upstash\] NOPERM .*'eval'.*\(HTTP 400\)/);
      expect(error.message).toMatch(/the token is read-only/);
      expect(error.message).toMatch(/standard REST token/);
      expect(dump(error)).not.toContain(ctx.readOnlyToken);
    }
    expect(await sdk.exists(lockKey(name), fenceKey(name))).toBe(0);
    const started = performance.now();
    await expect(createMutex(readOnly, { name }).acquire({ timeout: 5_000 })).rejects.toMatchObject({
      code: "ERR_BACKEND_AUTH",
      message: expect.stringMatching(/read-only/),
    });
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it("`leasehold status` runs with it (the CLI, as a process)", async () => {
    const name = unique();
    const lease = await createMutex(backend, { name, owner: "cli-holder", ttl: 20_000 }).acquire();
    try {
      const [node, ...args] = nodeScript("cli/main.ts", "status", "--name", name, "--json");
      const child = spawn(node, args, {
        env: {
          PATH: process.env.PATH,
          UPSTASH_REDIS_REST_URL: ctx.url,
          UPSTASH_REDIS_REST_TOKEN: ctx.readOnlyToken,
        },
        cwd: new URL("../../../", import.meta.url),
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      let err = "";
      child.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
      child.stderr.setEncoding("utf8").on("data", (c: string) => (err += c));
      const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
      expect({ code, err }).toEqual({ code: 0, err: "" });
      expect(JSON.parse(out)).toMatchObject({ name, holder: { owner: "cli-holder", token: lease.token } });
    } finally {
      await lease.release();
    }
  });

  describe("whose user may run read commands only, not EVAL_RO", () => {
    let bridge: UpstashBridge;
    beforeAll(async () => {
      // Redis puts EVAL_RO in @scripting, not @read: such a user gets NOPERM for it.
      bridge = await startBridge({ redis: ctx.redisSocket, readOnlyRules: ["+@read"] });
      registerSecret(bridge.readOnlyToken);
    });
    afterAll(() => bridge?.stop());

    it("inspects with GET and PTTL in one pipeline, after one refused EVAL_RO", async () => {
      const name = unique();
      const b = upstash({ url: bridge.url, token: bridge.readOnlyToken });
      const n = nonce();
      await backend.acquire({ key: name, owner: "p", nonce: n, ttl: 5_000 });
      bridge.resetStats();
      const first = await b.inspect({ key: name });
      expect(first).toMatchObject({ owner: "p", token: 1 });
      expect(first?.ttlLeft).toBeGreaterThan(0);
      expect(bridge.stats().paths).toEqual({ "/": 1, "/pipeline": 1 });
      bridge.resetStats();
      expect(await b.inspect({ key: name })).toMatchObject({ owner: "p", token: 1 });
      expect(bridge.stats()).toEqual({ total: 1, paths: { "/pipeline": 1 }, commands: 3 });
      await backend.release({ key: name, nonce: n });
      expect(await b.inspect({ key: name })).toBeNull();
      // Held shared: the readers counted in the same pipeline.
      const reader = await backend.acquireShared!({ key: name, owner: "r", nonce: n, ttl: 5_000 });
      expect(await b.inspect({ key: name })).toMatchObject({
        owner: "r",
        token: reader.ok && reader.token,
        readers: 1,
      });
      await backend.releaseShared!({ key: name, nonce: n });
      await expect(b.acquire({ key: name, owner: "a", nonce: nonce(), ttl: 1_000 })).rejects.toThrow(
        /read-only/,
      );
    });
  });
});

describe("Upstash's limit errors fail at once", () => {
  // redis-server cannot produce these answers: the bridge fakes them (failWith). Upstash's docs
  // name the texts (redis/troubleshooting) but not the HTTP status. @upstash/redis reports them
  // as "<error>, command was: …", which it does only for non-2xx answers, so single commands do
  // not get 200; the docs give 400 for a failed command, and a rate limit may well be 429. Both
  // are tested, and 200 as in a pipeline's entries.
  let bridge: UpstashBridge;
  beforeAll(async () => {
    bridge = await startBridge({ redis: ctx.redisSocket });
  });
  afterAll(() => bridge?.stop());

  const daily =
    "ERR max daily request limit exceeded. Limit: 10000, Usage: 10000. See https://upstash.com/docs/redis/troubleshooting/max_daily_request_limit for details";
  it.each([
    [429, daily],
    [400, daily],
    [429, "ERR max requests limit exceeded."],
    [400, "ERR max request size exceeded"],
    [413, "ERR max request size exceeded"],
    [429, "ERR max concurrent connections exceeded"],
    [500, "ERR max key size exceeded"],
    [400, "ERR DB capacity quota exceeded"],
    [200, "ERR max single record size exceeded"],
  ])("HTTP %i %j: every operation rejects, not retryable, with the service's text", async (status, text) => {
    const b = upstash({ url: bridge.url, token: bridge.token });
    bridge.failWith({ status, error: `${text} (token ${bridge.token})` });
    registerSecret(bridge.token);
    try {
      for (const call of everyCall(b)) {
        const error = await call().catch((e) => e);
        expect(error).toMatchObject({ name: "BackendError", code: "ERR_BACKEND", status, retryable: false });
        expect(error.message).toContain(text);
        expect(error.message).toMatch(/a limit of the Upstash database or plan/);
        expect(error.message).toContain("[redacted]");
        expect(dump(error)).not.toContain(bridge.token);
      }
    } finally {
      bridge.failWith(null);
    }
  });

  it("mutex.acquire({ timeout }) rejects with the limit error after one request, not a LockTimeoutError", async () => {
    const mutex = createMutex(upstash({ url: bridge.url, token: bridge.token }), { name: unique() });
    bridge.failWith({ status: 429, error: daily });
    bridge.resetStats();
    try {
      const started = performance.now();
      const error = await mutex.acquire({ timeout: 5_000 }).catch((e) => e);
      expect(error).not.toBeInstanceOf(LockTimeoutError);
      expect(error).toMatchObject({ name: "BackendError", status: 429, retryable: false });
      expect(error.message).toContain("ERR max daily request limit exceeded");
      expect(performance.now() - started).toBeLessThan(1_000);
      expect(bridge.stats().total).toBe(1);
    } finally {
      bridge.failWith(null);
    }
  });

  it("other 429s and 5xx stay retryable", async () => {
    const b = upstash({ url: bridge.url, token: bridge.token });
    for (const [status, error] of [
      [429, "Too Many Requests"],
      [503, "ERR service unavailable"],
    ] as const) {
      bridge.failWith({ status, error });
      try {
        await expect(b.inspect({ key: unique() })).rejects.toMatchObject({ status, retryable: true });
      } finally {
        bridge.failWith(null);
      }
    }
  });
});
