// Wake on release on the redis backend (docs/DESIGN.md §19, §5.9): a waiter listens on a second
// connection made from the user's client and is woken by the release, not by its next poll; a
// lost connection leaves it polling; the connection closes when the last waiter leaves. A
// redis-server of this file's own (it kills pub/sub clients and counts them), with a password;
// ioredis and node-redis in both majors (5 and 6). The cluster clients on the shared 3-node
// cluster (test/harness/setup/redis-cluster.ts): woken by a release published on another node.
import { Redis as IORedis } from "ioredis";
import { Redis as IORedis6 } from "ioredis6";
import { createClient } from "redis";
import { createClient as createClient6 } from "redis6";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type RedisClientLike, redis } from "../../../src/backends/redis/index.ts";
import { upstash } from "../../../src/backends/upstash/index.ts";
import { type Backend, capabilities, createMutex, type LockEvent, runOnce } from "../../../src/index.ts";
import { backoff } from "../../../src/timing.ts";
import { registerSecret } from "../../harness/secrets.ts";
import { freePort } from "../../harness/servers/listen.ts";
import { type RedisServer, startRedis } from "../../harness/servers/redis.ts";
import { closeClients, client as sharedClient } from "./clients.ts";

const PASSWORD = `watch-redis-${crypto.randomUUID()}`;
registerSecret(PASSWORD);

let port: number;
let server: RedisServer;
let admin: IORedis;
beforeAll(async () => {
  port = await freePort();
  server = await startRedis({ port, args: ["--requirepass", PASSWORD] });
  admin = new IORedis({ host: "127.0.0.1", port, password: PASSWORD });
});
afterAll(async () => {
  admin?.disconnect();
  await closeClients();
  await server?.stop();
});

const closers: (() => unknown)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c()));
});

interface Closable {
  on(event: "error", listener: () => void): unknown;
}
const clients: Record<string, () => Promise<RedisClientLike & Closable>> = {
  ioredis: async () => {
    const c = new IORedis({ host: "127.0.0.1", port, password: PASSWORD });
    closers.push(() => c.disconnect());
    return c;
  },
  "ioredis 6": async () => {
    const c = new IORedis6({ host: "127.0.0.1", port, password: PASSWORD });
    closers.push(() => c.disconnect());
    return c;
  },
  "node-redis": async () => {
    const c = await createClient({ url: `redis://:${PASSWORD}@127.0.0.1:${port}` }).connect();
    closers.push(() => c.destroy());
    return c;
  },
  "node-redis 6": async () => {
    const c = await createClient6({ url: `redis://:${PASSWORD}@127.0.0.1:${port}` }).connect();
    closers.push(() => c.destroy());
    return c;
  },
};

/** Polls `ok` every 20 ms until it holds, for at most `ms`. */
async function until(
  ok: () => boolean | Promise<boolean>,
  ms = 10_000,
  what = "the condition",
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`${what} did not hold within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The connections to this file's server (CLIENT LIST), or those subscribed to a channel. */
const connections = async (...type: ["TYPE", "pubsub"] | []) =>
  ((await admin.call("CLIENT", "LIST", ...type)) as string).split("\n").filter(Boolean).length;
const subscribers = () => connections("TYPE", "pubsub");
/**
 * Waits until the server counts `n` connections: the admin's and the test's client (2), once
 * the server saw the others close. A connection that is open but subscribed to nothing counts.
 */
const settled = (n: number, what: string) => until(async () => (await connections()) === n, 10_000, what);

/** The outcomes of a mutex's attempt events, in order. */
const outcomes = (events: Attempt[]) => events.map((e) => e.outcome);
type Attempt = Extract<LockEvent, { type: "attempt" }> & { at: number };

/**
 * A waiter on `name`: `events` its attempts, each with the time it was answered; `listening`
 * resolves once it listens: it made its second attempt (the one at once after the watch started)
 * and the server counts a subscriber to the name's channel. (Not the attempt alone: under load
 * its first pause, 25 ms, can end before the subscriber connection is open, and a poll's
 * attempt comes second; a loaded run saw the extra connection missing from the count that way.)
 */
function waiter(backend: Backend, name: string, retryDelay = 60_000) {
  const events: Attempt[] = [];
  const record = (e: LockEvent) => {
    if (e.type === "attempt") events.push({ ...e, at: Date.now() });
  };
  const mutex = createMutex(backend, { name, ttl: 30_000, retryDelay, onEvent: record });
  const lease = mutex.acquire({ timeout: 50_000 });
  const channel = `leasehold:leasehold:{${name}}`;
  const listening = until(
    async () =>
      events.length >= 2 && ((await admin.call("PUBSUB", "NUMSUB", channel)) as [string, number])[1] >= 1,
    // Roomy: a slow clean-clone run saw a waiter not yet listening after 10 s (the tests below
    // have 60 s for that).
    25_000,
    "listening",
  );
  return { events, lease, listening, record };
}

// The pause after a refusal starts at 25 ms and doubles (src/timing.ts backoff, docs/DESIGN.md
// §4.7), whatever retryDelay is: a waiter is let refused this many times, so that its next pause
// is at least 0.6 × 25 × 2^7 = 1 920 ms, before the release it should be woken by.
const REFUSALS = 8;
const shortestPause = (refusals: number) => 0.6 * backoff(refusals - 1, 60_000);

/**
 * Waits until `w` was refused REFUSALS times, runs `release`, and checks that the next attempt,
 * the grant, came sooner than any poll could have: no attempt but the woken one after the refusals.
 */
async function wokenBy(w: ReturnType<typeof waiter>, release: () => Promise<unknown>) {
  await until(() => w.events.length >= REFUSALS, 15_000, `${REFUSALS} refusals`);
  await release();
  await (await w.lease).release();
  expect(outcomes(w.events)).toEqual([...Array(REFUSALS).fill("taken"), "granted"]);
  const [last, grant] = w.events.slice(-2);
  expect(grant!.at - last!.at).toBeLessThan(shortestPause(REFUSALS));
}

describe.each(Object.entries(clients))("%s", { timeout: 60_000 }, (_label, make) => {
  it("a waiter is handed the lock by the release's notice, not by a poll, on one extra connection closed when the last waiter leaves", async () => {
    const backend = redis(await make());
    expect(capabilities(backend).watch).toBe(true);
    const names = [`wake-${crypto.randomUUID()}`, `wake-${crypto.randomUUID()}`];
    const held = await Promise.all(
      names.map((name) => createMutex(backend, { name, ttl: 30_000 }).acquire()),
    );
    await settled(2, "nobody waits: no extra connection");
    // Three waiters, two on one name: one connection for all, subscribed once to each channel.
    const waiters = [waiter(backend, names[0]!), waiter(backend, names[1]!), waiter(backend, names[1]!)];
    await Promise.all(waiters.map((w) => w.listening));
    expect(await connections()).toBe(3);
    expect(await subscribers()).toBe(1);
    const channel = `leasehold:leasehold:{${names[1]}}`;
    expect(await admin.call("PUBSUB", "NUMSUB", channel)).toEqual([channel, 1]);
    await wokenBy(waiters[0]!, () => held[0]!.release());
    expect(await connections()).toBe(3); // the two others still wait
    // Both are woken; one takes it, the other waits on for the next release.
    await held[1]!.release();
    await (await Promise.race([waiters[1]!.lease, waiters[2]!.lease])).release();
    await (await Promise.all([waiters[1]!.lease, waiters[2]!.lease]))[0].release();
    await settled(2, "the extra connection closed");
  });

  it("a lost connection (CLIENT KILL TYPE pubsub): the waiter listens again after its next attempt, on a new connection, and is woken by the release", async () => {
    const backend = redis(await make());
    const name = `lost-${crypto.randomUUID()}`;
    const mutex = createMutex(backend, { name, ttl: 30_000 });
    const held = await mutex.acquire();
    await settled(2, "nobody waits: no extra connection");
    const w = waiter(backend, name);
    await w.listening;
    const before = w.events.length;
    expect(await admin.call("CLIENT", "KILL", "TYPE", "pubsub")).toBe(1);
    // Its next attempt comes after its pause (25 ms doubling): then it subscribes again.
    await until(
      async () => w.events.length > before && (await subscribers()) === 1,
      25_000,
      "listening again",
    );
    expect(await connections()).toBe(3);
    // Woken, not polled: granted sooner after its last refusal than any pause it could be in.
    await until(() => w.events.length >= REFUSALS, 15_000, `${REFUSALS} refusals`);
    const refused = w.events.length;
    await held.release();
    await (await w.lease).release();
    expect(outcomes(w.events)).toEqual([...Array(refused).fill("taken"), "granted"]);
    const [last, grant] = w.events.slice(-2);
    expect(grant!.at - last!.at).toBeLessThan(shortestPause(refused));
    await settled(2, "the extra connection closed");
  });

  it("runOnce: a standby is woken by the fire's completion", async () => {
    const backend = redis(await make());
    const name = `once-${crypto.randomUUID()}`;
    let finish!: () => void;
    const finished = new Promise<void>((r) => {
      finish = r;
    });
    let started!: () => void;
    const running = new Promise<void>((r) => {
      started = r;
    });
    const runner = runOnce(createMutex(backend, { name, ttl: 30_000 }), "fire-1", async () => {
      started();
      await finished;
      return 1;
    });
    await running;
    await settled(2, "nobody waits: no extra connection");
    const events: Attempt[] = [];
    const standby = createMutex(backend, {
      name,
      ttl: 30_000,
      retryDelay: 60_000,
      onEvent: (e) => e.type === "attempt" && events.push({ ...e, at: Date.now() }),
    });
    const waiting = runOnce(standby, "fire-1", () => 2, { standby: true, timeout: 50_000 });
    await until(() => events.length >= REFUSALS, 15_000, `${REFUSALS} refusals`);
    expect(await connections()).toBe(3);
    finish();
    expect(await runner).toMatchObject({ ran: true, value: 1 });
    expect(await waiting).toMatchObject({ ran: false, reason: "done" });
    expect(outcomes(events)).toEqual([...Array(REFUSALS).fill("taken"), "done"]);
    const [last, done] = events.slice(-2);
    expect(done!.at - last!.at).toBeLessThan(shortestPause(REFUSALS));
    await settled(2, "the extra connection closed");
  });
});

describe("what the scripts publish (on leasehold: and the lock key)", () => {
  it("a release, a completed fire and the last reader's release publish once each; nothing else publishes", async () => {
    const listener = new IORedis({ host: "127.0.0.1", port, password: PASSWORD });
    closers.push(() => listener.disconnect());
    const heard: string[] = [];
    listener.on("pmessage", (_p: string, channel: string) => heard.push(channel));
    await listener.psubscribe("leasehold:*");
    const backend = redis(await clients.ioredis!());
    const key = `scripts-${crypto.randomUUID()}`;
    const channel = `leasehold:leasehold:{${key}}`;
    const r = (nonce: string) => ({ key, owner: "o", nonce, ttl: 30_000 });
    /** What was published on the way through `steps`, after a PING to the same server. */
    const published = async (steps: () => Promise<unknown>) => {
      heard.length = 0;
      await steps();
      await admin.publish("leasehold:ping", "");
      await until(() => heard.includes("leasehold:ping"), 5_000, "the ping");
      return heard.filter((c) => c !== "leasehold:ping");
    };
    expect(await published(() => backend.acquire(r("a")))).toEqual([]);
    expect(await published(() => backend.renew(r("a")))).toEqual([]);
    expect(await published(() => backend.release(r("b")))).toEqual([]); // not ours
    expect(await published(() => backend.release(r("a")))).toEqual([channel]);
    expect(await published(() => backend.release(r("a")))).toEqual([]); // already free
    // A completed fire (runOnce's record).
    await backend.acquire(r("c"));
    expect(await published(() => backend.complete!({ ...r("c"), retain: 60_000 }))).toEqual([channel]);
    await admin.del(`leasehold:{${key}}`);
    // Shared mode: the last reader's release only; a waiting writer's mark is no release.
    await backend.acquireShared!(r("r1"));
    await backend.acquireShared!(r("r2"));
    expect(await published(() => backend.acquire({ ...r("w"), waiter: "w1" }))).toEqual([]);
    expect(await published(() => backend.releaseShared!(r("w1")))).toEqual([]);
    expect(await published(() => backend.releaseShared!(r("r1")))).toEqual([]);
    expect(await published(() => backend.releaseShared!(r("r2")))).toEqual([channel]);
  });

  it("a writer waiting for readers is woken by the last reader's release", async () => {
    const backend = redis(await clients.ioredis!());
    const name = `shared-${crypto.randomUUID()}`;
    const readers = await Promise.all(
      [0, 1].map(() => createMutex(backend, { name, ttl: 30_000 }).acquire({ mode: "shared" })),
    );
    await wokenBy(waiter(backend, name), async () => {
      await readers[0]!.release();
      await readers[1]!.release();
    });
  });
});

describe("a user without rights to the channel (Redis 7's ACL default: resetchannels)", () => {
  it("releases as before; its waiters poll", async () => {
    const user = `nochannels-${crypto.randomUUID()}`;
    const password = `pw-${crypto.randomUUID()}`;
    registerSecret(password);
    await admin.call("ACL", "SETUSER", user, "on", `>${password}`, "~*", "resetchannels", "+@all");
    const c = new IORedis({ host: "127.0.0.1", port, username: user, password });
    closers.push(() => c.disconnect());
    const backend = redis(c);
    const name = `acl-${crypto.randomUUID()}`;
    const held = await createMutex(backend, { name, ttl: 30_000 }).acquire();
    const polling = waiter(backend, name, 300);
    await until(() => outcomes(polling.events).length >= 1, 10_000, "the first attempt");
    await held.release(); // the script's PUBLISH is refused; the DEL is not
    await (await polling.lease).release();
    expect(outcomes(polling.events).at(-1)).toBe("granted");
    // Its SUBSCRIBE was refused too: the watch failed and its connection was closed.
    await settled(2, "the extra connection closed");
  });
});

describe.each(["ioredis Cluster", "node-redis cluster", "ioredis 6 Cluster", "node-redis 6 cluster"])(
  "%s",
  (label) => {
    it("waiters are woken by releases published on the nodes of their locks' slots", async () => {
      const backend = redis(await sharedClient(label));
      expect(capabilities(backend).watch).toBe(true);
      // Three names: their slots lie on different nodes, the subscriber is on one.
      const names = [0, 1, 2].map(() => `cluster-wake-${crypto.randomUUID()}`);
      const held = await Promise.all(
        names.map((name) => createMutex(backend, { name, ttl: 30_000 }).acquire()),
      );
      const waiters = names.map((name) => waiter(backend, name));
      await Promise.all(waiters.map((w, i) => wokenBy(w, () => held[i]!.release())));
    });
  },
);

it("@upstash/redis through redis(): no watch (REST has no connection to subscribe on); upstash() neither", async () => {
  expect(capabilities(redis(await sharedClient("@upstash/redis"))).watch).toBe(false);
  expect(capabilities(upstash({ url: "http://127.0.0.1:1", token: "t" })).watch).toBe(false);
});
