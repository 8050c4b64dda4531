// The redis backend against faults of a real redis-server of this file's own (so restarting it
// disturbs no other file): the server restarted mid-lease, a wrong password, an unknown script
// (SCRIPT FLUSH), a closed client; and what it refuses to accept as a client. ioredis and
// node-redis in both majors (5 and 6, the npm aliases "ioredis6" and "redis6").
import { Redis as IORedis } from "ioredis";
import { Redis as IORedis6 } from "ioredis6";
import { createClient } from "redis";
import { createClient as createClient6 } from "redis6";
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import { type FenceHealed, type RedisClientLike, redis } from "../../../src/backends/redis/index.ts";
import { upstash } from "../../../src/backends/upstash/index.ts";
import { createMutex, isLockError } from "../../../src/index.ts";
import { registerSecret } from "../../harness/secrets.ts";
import { freePort } from "../../harness/servers/listen.ts";
import { type RedisServer, startRedis } from "../../harness/servers/redis.ts";

const PASSWORD = `own-redis-${crypto.randomUUID()}`;
registerSecret(PASSWORD);
const WRONG = `wrong-${crypto.randomUUID()}`;
registerSecret(WRONG);

let port: number;
let server: RedisServer;
const start = async () => {
  server = await startRedis({ port, args: ["--requirepass", PASSWORD] });
};
beforeAll(async () => {
  port = await freePort();
  await start();
});
afterAll(() => server?.stop());

const closers: (() => unknown)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c()));
});

/** A TCP client of either major: its reconnect errors are silenced in these tests. */
interface ErrorEmitter {
  on(event: "error", listener: () => void): unknown;
}
const ioredis =
  <C extends ErrorEmitter & { disconnect(): void }>(make: (password: string) => C) =>
  async (password = PASSWORD) => {
    const c = make(password);
    c.on("error", () => {}); // reconnect noise while the server is down
    closers.push(() => c.disconnect());
    return c;
  };
const nodeRedis =
  <C extends ErrorEmitter & { connect(): Promise<unknown>; destroy(): void }>(make: (url: string) => C) =>
  async (password = PASSWORD) => {
    const c = make(`redis://:${password}@127.0.0.1:${port}`);
    c.on("error", () => {});
    await c.connect();
    closers.push(() => c.destroy());
    return c;
  };
const clients = {
  ioredis: ioredis((password) => new IORedis({ host: "127.0.0.1", port, password, maxRetriesPerRequest: 1 })),
  "ioredis 6": ioredis(
    (password) => new IORedis6({ host: "127.0.0.1", port, password, maxRetriesPerRequest: 1 }),
  ),
  "node-redis": nodeRedis((url) => createClient({ url, disableOfflineQueue: false })),
  "node-redis 6": nodeRedis((url) => createClient6({ url, disableOfflineQueue: false })),
};

describe.each(Object.entries(clients))("%s", (_label, make) => {
  it("the server restarted mid-lease: the loss is seen at the deadline, never as held, and the reset fence is healed above every token seen", async () => {
    const told: FenceHealed[] = [];
    const backend = redis(await make(), { onFenceHealed: (info) => told.push(info) });
    const name = `restart-${crypto.randomUUID()}`;
    const mutex = createMutex(backend, { name, ttl: 1_000, retryDelay: 50 });
    const lease = await mutex.acquire({ timeout: 5_000 });
    const lost = new Promise<{ at: number; deadline: number }>((resolve) =>
      lease.signal.addEventListener("abort", () => resolve({ at: Date.now(), deadline: lease.expiresAt }), {
        once: true,
      }),
    );
    await server.stop(); // no persistence: the lock and its fence counter are gone
    expect(lease.valid).toBe(true); // nothing known yet: the lease holds until its deadline
    const { at, deadline } = await lost;
    expect(at).toBeGreaterThanOrEqual(deadline - 15); // timers fire a few ms early at most
    expect(at - deadline).toBeLessThan(300);
    expect(lease.valid).toBe(false);
    expect(lease.signal.reason).toMatchObject({ code: "ERR_LEASE_LOST" });
    await start();
    // The counter restarted at 0: the backend that saw the old token raises it above that token
    // instead of handing it out again, and says so.
    const again = await mutex.acquire({ timeout: 5_000 });
    expect(again.token).toBe(lease.token + 1);
    expect(told).toEqual([
      { backend: "redis", name, seen: lease.token, got: 1, token: again.token, message: expect.any(String) },
    ]);
    expect(told[0]!.message).toMatch(/fence counter of lock "restart-[^"]+" went back \(seen \d+, got 1\)/);
    expect(told[0]!.message).toMatch(/restart without persistence/);
    expect(told[0]!.message).not.toContain(PASSWORD);
    await again.release();
    // The counter itself was raised: a fresh backend (another process) goes on from there.
    const fresh = await createMutex(redis(await make()), { name, ttl: 1_000 }).acquire({ timeout: 5_000 });
    expect(fresh.token).toBe(again.token + 1);
    await fresh.release();
  });

  it("after SCRIPT FLUSH the next operation loads the script again; then one EVALSHA per operation", async () => {
    const c = await make();
    const calls: string[] = [];
    // The client's own methods, counted: an object of the client's shape.
    const count =
      <A extends unknown[]>(what: string, fn: (...a: A) => Promise<unknown>) =>
      (...a: A) => {
        calls.push(what);
        return fn(...a);
      };
    let counted: object;
    if (c instanceof IORedis || c instanceof IORedis6) {
      counted = {
        call: c.call.bind(c),
        eval: count("eval", (s: string, n: number, ...rest: string[]) => c.eval(s, n, ...rest)),
        evalsha: count("evalsha", (s: string, n: number, ...rest: string[]) => c.evalsha(s, n, ...rest)),
      };
    } else {
      const n = c as ReturnType<typeof createClient>;
      counted = {
        sendCommand: n.sendCommand.bind(n),
        eval: count("eval", (s: string, o: { keys: string[]; arguments: string[] }) => n.eval(s, o)),
        evalSha: count("evalsha", (s: string, o: { keys: string[]; arguments: string[] }) => n.evalSha(s, o)),
      };
    }
    const flush = new IORedis({ host: "127.0.0.1", port, password: PASSWORD });
    closers.push(() => flush.disconnect());
    await flush.script("FLUSH");
    const backend = redis(counted as RedisClientLike);
    const r = { key: `scripts-${crypto.randomUUID()}`, owner: "o", nonce: crypto.randomUUID(), ttl: 5_000 };
    await backend.acquire(r);
    expect(calls).toEqual(["evalsha", "eval"]);
    calls.length = 0;
    await backend.renew(r);
    await backend.renew(r);
    expect(calls).toEqual(["evalsha", "eval", "evalsha"]); // RENEW loaded once, then by SHA
    calls.length = 0;
    await backend.acquire({ ...r, nonce: crypto.randomUUID() }); // taken: still one command
    await backend.release(r);
    await backend.release(r);
    expect(calls).toEqual(["evalsha", "evalsha", "eval", "evalsha"]);
  });
});

describe("clients", () => {
  it.each(["ioredis", "ioredis 6"] as const)(
    "%s with a wrong password: an ERR_BACKEND_AUTH error at once, without the password",
    async (label) => {
      // (node-redis and Bun do not hand over a client whose AUTH failed: connect() does not resolve.)
      const c = await clients[label](WRONG);
      const started = Date.now();
      const error = await createMutex(redis(c), { name: "wrong-password", ttl: 1_000 })
        .acquire({ timeout: 10_000 })
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(Date.now() - started).toBeLessThan(2_000); // not retried until the timeout
      expect(error).toMatchObject({ name: "BackendError", code: "ERR_BACKEND_AUTH", retryable: false });
      expect((error as Error).message).toMatch(/\[redis\] WRONGPASS/);
      expect(JSON.stringify(error) + String(error) + String((error as Error).cause)).not.toContain(WRONG);
    },
  );

  it("an error quoting a connection URL shows no password", async () => {
    const secret = `url-secret-${crypto.randomUUID()}`;
    registerSecret(secret);
    const c = new IORedis(`redis://:${secret}@127.0.0.1:${port}`, { maxRetriesPerRequest: 1 });
    c.on("error", () => {});
    closers.push(() => c.disconnect());
    // A command that fails with a message quoting the URL (some proxies and wrappers do), in the
    // error and in its cause.
    const quoting = Object.assign(c, {
      evalsha: async () => {
        const url = `redis://:${secret}@127.0.0.1:${port}`;
        throw new Error(`connect to ${url} failed`, { cause: new Error(`password ${secret}, ${url}`) });
      },
    });
    const error = await redis(quoting)
      .renew({ key: "k", nonce: "n", ttl: 1_000 })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(error).toMatchObject({ name: "BackendError", retryable: true });
    expect(String((error as Error).message)).toContain("redis://[redacted]@127.0.0.1");
    expect(String((error as Error).message) + String((error as Error).cause)).not.toContain(secret);
  });

  it("an unrecognised client is a TypeError naming the accepted shapes", () => {
    for (const bad of [null, undefined, 42, "redis://localhost", {}, { get() {} }, () => {}]) {
      expect(() => redis(bad as never)).toThrow(TypeError);
    }
    expect(() => redis({} as never)).toThrow(
      /\[redis\] client must be an ioredis Redis or Cluster, a node-redis client or cluster .*Bun's RedisClient.*@upstash\/redis.*got an object without those methods/,
    );
    expect(() => redis({ send() {} }, { prefix: 1 as never })).toThrow(/option prefix must be a string/);
    expect(() => redis({ send() {} }, { onFenceHealed: "warn" as never })).toThrow(
      new TypeError("[leasehold] [redis] option onFenceHealed must be a function"),
    );
  });

  it("a client closed by its owner fails with a BackendError, not a hang", async () => {
    const c = await clients.ioredis();
    await c.quit();
    const error = await redis(c)
      .acquire({ key: "closed", owner: "o", nonce: "n", ttl: 1_000 })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(isLockError(error)).toBe(true);
    expect(error).toMatchObject({ name: "BackendError", backend: "redis" });
  });
});

describe("the same lock through Upstash REST and a TCP client", () => {
  it("upstash() and redis(ioredis) on one redis-server exclude each other and share the fence", async () => {
    const { url, token } = inject("upstash");
    const ctx = inject("redis");
    registerSecret(ctx.password);
    const c = new IORedis({ host: ctx.host, port: ctx.port, username: ctx.username, password: ctx.password });
    closers.push(() => c.disconnect());
    const name = `shared-${crypto.randomUUID()}`;
    const viaRest = createMutex(upstash({ url, token }), { name, ttl: 5_000, owner: "rest" });
    const viaTcp = createMutex(redis(c), { name, ttl: 5_000, owner: "tcp" });
    const first = await viaRest.acquire();
    expect(await viaTcp.tryAcquire()).toBeNull();
    expect(await viaTcp.holder()).toEqual({ owner: "rest", token: first.token });
    await first.release();
    const second = await viaTcp.acquire();
    expect(second.token).toBeGreaterThan(first.token);
    expect(await viaRest.tryAcquire()).toBeNull();
    expect(await viaRest.holder()).toEqual({ owner: "tcp", token: second.token });
    await second.release();
    const third = await viaRest.acquire();
    expect(third.token).toBeGreaterThan(second.token);
    await third.release();
  });
});
