// Shared mode on the shared Redis scripts (docs/DESIGN.md §18), against the real redis-server and
// the Upstash bridge the harness starts: each shared operation is one request, the key layout
// (a lock held shared is `*|token|owner` expiring with its last reader; the readers and the
// waiting writers are sorted sets beside it, gone when empty), and no nonce may be `*`.
import IORedis from "ioredis";
import { afterAll, describe, expect, inject, it } from "vitest";
import type { FetchLike } from "../../../src/backend.ts";
import { redis } from "../../../src/backends/redis/index.ts";
import type { FenceHealed } from "../../../src/backends/shared/redis-scripts.ts";
import { upstash } from "../../../src/backends/upstash/index.ts";
import { createMutex } from "../../../src/index.ts";
import { registerSecret } from "../../harness/secrets.ts";

const up = inject("upstash");
const ctx = inject("redis");
registerSecret(ctx.password);
const raw = new IORedis({ host: ctx.host, port: ctx.port, username: ctx.username, password: ctx.password });
afterAll(async () => {
  await raw.quit();
});

const shared = { mode: "shared" } as const;

describe("upstash: shared mode", () => {
  it("acquireShared, renewShared and releaseShared are one request each, granted or refused", async () => {
    let requests = 0;
    const fetchFn: FetchLike = (url, init) => {
      requests++;
      return fetch(url, init);
    };
    const backend = upstash({ url: up.url, token: up.token, fetch: fetchFn });
    const name = `shared-requests-${crypto.randomUUID().slice(0, 8)}`;
    const make = (owner: string) => createMutex(backend, { name, owner, ttl: 5_000, renew: false });
    const count = async <T>(op: () => Promise<T>): Promise<[T, number]> => {
      const before = requests;
      const value = await op();
      return [value, requests - before];
    };
    const [reader, granted] = await count(() => make("r1").tryAcquire(shared));
    expect(reader).not.toBeNull();
    expect(granted).toBe(1);
    expect((await count(() => reader!.renew()))[1]).toBe(1);
    const writer = await make("w").tryAcquire();
    expect(writer).toBeNull();
    const [, released] = await count(() => reader!.release());
    expect(released).toBe(1);
    const w = (await make("w").tryAcquire())!;
    const [refused, refusedRequests] = await count(() => make("r2").tryAcquire(shared));
    expect([refused, refusedRequests]).toEqual([null, 1]);
    await w.release();
  });
});

describe("redis: shared mode's keys", () => {
  it("a lock held shared is *|token|owner until its last reader's expiry; nothing is left after the last release", async () => {
    const backend = redis(raw);
    const name = `shared-keys-${crypto.randomUUID().slice(0, 8)}`;
    const lock = `leasehold:{${name}}`;
    const make = (owner: string, ttl: number) => createMutex(backend, { name, owner, ttl, renew: false });
    const short = (await make("short", 2_000).tryAcquire(shared))!;
    const long = (await make("long", 20_000).tryAcquire(shared))!;
    expect(await raw.get(lock)).toBe(`*|${long.token}|long`);
    // The lock lasts as long as its longest-lived reader (20 s), not its newest's or first's.
    expect(await raw.pttl(lock)).toBeGreaterThan(10_000);
    expect(await raw.zcard(`${lock}:readers`)).toBe(2);
    expect(await backend.inspect({ key: name })).toMatchObject({
      owner: "long",
      token: long.token,
      readers: 2,
    });
    await long.release();
    // The one left: the lock now expires with it.
    expect(await raw.pttl(lock)).toBeLessThanOrEqual(2_000);
    await short.release();
    expect(await raw.exists(lock, `${lock}:readers`, `${lock}:writers`)).toBe(0);
    expect(await raw.get(`${lock}:fence`)).toBe(String(long.token));
  });

  it("a reader granted after the fence counter went back is raised above every token seen, as a writer is", async () => {
    const told: FenceHealed[] = [];
    const backend = redis(raw, { onFenceHealed: (info) => told.push(info) });
    const name = `shared-heal-${crypto.randomUUID().slice(0, 8)}`;
    const lock = `leasehold:{${name}}`;
    const make = (owner: string) => createMutex(backend, { name, owner, ttl: 5_000 });
    for (let i = 0; i < 3; i++) await (await make("w").acquire()).release();
    const reader = (await make("r1").acquire(shared))!;
    expect(reader.token).toBe(4);
    await raw.del(`${lock}:fence`); // the counter lost (a restart without persistence, eviction)
    const healed = (await make("r2").acquire(shared))!;
    expect(healed.token).toBe(5); // not 1: above the 4 this backend saw
    expect(told).toEqual([
      { backend: "redis", name, seen: 4, got: 1, token: 5, message: expect.stringMatching(/went back/) },
    ]);
    expect(await raw.get(`${lock}:fence`)).toBe("5");
    expect(await raw.get(lock)).toBe(`*|5|r2`);
    // Both readers still hold and renew; the next writer's token is above both.
    await Promise.all([reader.renew(), healed.renew()]); // each rejects when its lease is gone
    expect([reader.valid, healed.valid]).toEqual([true, true]);
    await Promise.all([reader.release(), healed.release()]);
    const writer = await make("w").acquire();
    expect(writer.token).toBe(6);
    await writer.release();
  });

  it("refuses the nonce *, which would read a lock held shared as its own", async () => {
    const backend = redis(raw);
    await expect((async () => backend.renew({ key: "n", nonce: "*", ttl: 1_000 }))()).rejects.toThrow(
      /not "\*"/,
    );
    await expect(backend.acquireShared!({ key: "n", owner: "o", nonce: "*", ttl: 1_000 })).rejects.toThrow(
      TypeError,
    );
  });
});
