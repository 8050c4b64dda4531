// A semaphore's acquire is one request on the two backends of the shared Redis scripts (upstash
// over REST, counted at its fetch; redis over ioredis, counted at the client), whatever the limit;
// and the key layout: a slot is tagged by the semaphore's name (one cluster slot for all of
// them: the conformance suite's semaphore checks run on a 3-node cluster in conformance.test.ts),
// a mutex's keys are what they were.
import IORedis from "ioredis";
import { afterAll, describe, expect, inject, it, vi } from "vitest";
import type { FetchLike } from "../../../src/backend.ts";
import { redis } from "../../../src/backends/redis/index.ts";
import { upstash } from "../../../src/backends/upstash/index.ts";
import { createMutex, createSemaphore, isLockError, type Permit } from "../../../src/index.ts";
import { registerSecret } from "../../harness/secrets.ts";

const up = inject("upstash");
const ctx = inject("redis");
registerSecret(ctx.password);
const raw = new IORedis({ host: ctx.host, port: ctx.port, username: ctx.username, password: ctx.password });
const client = new IORedis({
  host: ctx.host,
  port: ctx.port,
  username: ctx.username,
  password: ctx.password,
});
afterAll(async () => {
  await raw.quit();
  await client.quit();
});

/**
 * Counts the requests; with `lose` set, the next request is applied by the server and its reply
 * lost (the connection drops after sending it), as the fault of the give-back tests.
 */
function newCounter() {
  const counter = { requests: 0, lose: false };
  const send = async <T>(request: () => Promise<T>, lost: string): Promise<T> => {
    counter.requests++;
    const losing = counter.lose;
    counter.lose = false;
    const reply = await request();
    if (losing) throw new TypeError(lost);
    return reply;
  };
  return { counter, send };
}

/** The upstash backend with its requests counted at its fetch. */
function countedUpstash() {
  const { counter, send } = newCounter();
  const fetchFn: FetchLike = (url, init) => send(() => fetch(url, init), "fetch failed");
  return { backend: upstash({ url: up.url, token: up.token, fetch: fetchFn }), counter };
}

/** The redis backend over ioredis, with the client's script calls counted. */
function countedRedis() {
  const { counter, send } = newCounter();
  const counted = new Proxy(client, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if ((prop === "evalsha" || prop === "eval") && typeof value === "function") {
        return (...args: unknown[]) =>
          send(
            () => (value as (...a: unknown[]) => Promise<unknown>).apply(target, args),
            "Connection is closed.",
          );
      }
      return value;
    },
  });
  return { backend: redis(counted), counter };
}

describe.each([
  ["upstash (requests at its fetch)", countedUpstash],
  ["redis over ioredis (script calls at the client)", countedRedis],
])("%s", (_, make) => {
  it.each([1, 5, 50])("limit %i: every acquire, granted or refused, is one request", async (limit) => {
    const { backend, counter } = make();
    const name = `sem-requests-${limit}-${crypto.randomUUID().slice(0, 8)}`;
    const sem = createSemaphore(backend, { name, limit, ttl: 5_000, renew: false });
    await sem.tryAcquire().then((p) => p?.release()); // the first call loads the script (redis: EVALSHA, then EVAL)
    const permits: Permit[] = [];
    for (let i = 0; i < limit; i++) {
      const before = counter.requests;
      permits.push((await sem.acquire({ timeout: 5_000 }))!);
      expect(counter.requests - before).toBe(1);
    }
    expect(new Set(permits.map((p) => p.slot)).size).toBe(limit);
    const before = counter.requests;
    expect(await sem.tryAcquire()).toBeNull();
    expect(counter.requests - before).toBe(1);
    await Promise.all(permits.map((p) => p.release()));
  });

  it("limit 50: an acquire whose reply was lost is given back with one request, not one per slot", async () => {
    const { backend, counter } = make();
    const name = `sem-give-back-${crypto.randomUUID().slice(0, 8)}`;
    const sem = createSemaphore(backend, { name, limit: 50, ttl: 30_000, renew: false });
    const slot0 = `leasehold:{${name}}:permit:0`;
    // Twice: the first round loads the scripts (redis: EVALSHA answered NOSCRIPT, then EVAL).
    for (const round of [1, 2]) {
      const before = counter.requests;
      counter.lose = true;
      const error = await sem.tryAcquire().catch((e: unknown) => e);
      expect(isLockError(error) && error.code, String(error)).toBe("ERR_BACKEND");
      // The lost acquire took slot 0 (the first free one: its fence counted it); the give-back frees it.
      expect(await raw.get(`${slot0}:fence`)).toBe(String(round));
      await vi.waitFor(async () => expect(await raw.exists(slot0)).toBe(0), {
        timeout: 10_000,
        interval: 20,
      });
      if (round === 2) expect(counter.requests - before, "the acquire and its give-back").toBe(2);
    }
  });
});

it("a slot's keys carry the semaphore's name as hash tag; a mutex's keys are unchanged", async () => {
  const { backend } = countedUpstash();
  const name = `layout-${crypto.randomUUID().slice(0, 8)}`;
  const permit = (await createSemaphore(backend, { name, limit: 2 }).tryAcquire())!;
  const lease = (await createMutex(backend, { name }).tryAcquire())!;
  const keys = (await raw.keys(`leasehold:{${name}}*`)).sort();
  expect(keys).toEqual([
    `leasehold:{${name}}`,
    `leasehold:{${name}}:fence`,
    `leasehold:{${name}}:permit:${permit.slot}`,
    `leasehold:{${name}}:permit:${permit.slot}:fence`,
  ]);
  await permit.release();
  await lease.release();
});
