// createMutex on the upstash backend, against the real redis-server behind the bridge: the keys
// a lease writes, a hung acquire, and a lease lost behind the holder's back.
import { Redis } from "@upstash/redis";
import { afterAll, describe, expect, inject, it } from "vitest";
import { upstash } from "../../../src/backends/upstash/index.ts";
import { createMutex, isLockError, type Lease } from "../../../src/index.ts";
import { renewalBound, renewalWindow } from "../../../src/timing.ts";
import { type FaultServer, startFaultServer } from "../../harness/servers/upstash-faults.ts";
import { fenceKey, lockKey } from "../../harness/upstash.ts";

const ctx = inject("upstash");
const backend = upstash({ url: ctx.url, token: ctx.token });
const sdk = new Redis({ url: ctx.url, token: ctx.token });
const unique = () => `m-${crypto.randomUUID()}`;

const servers: FaultServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
});

describe("createMutex on upstash", () => {
  it("while a lease is held the SDK sees the lock's PTTL within the ttl and the fence equal to the token", async () => {
    const name = unique();
    const ttl = 3_000;
    const mutex = createMutex(backend, { name, ttl, owner: "reporter 🔒" });
    const lease = await mutex.acquire({ timeout: 5_000 });
    const pttl = await sdk.pttl(lockKey(name));
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(ttl);
    expect(await sdk.get(fenceKey(name))).toBe(lease.token);
    expect(await mutex.holder()).toEqual({ owner: "reporter 🔒", token: lease.token });
    await lease.release();
    expect(await sdk.exists(lockKey(name))).toBe(0);
    expect(await mutex.holder()).toBeNull();
    const next = await mutex.acquire({ timeout: 5_000 });
    expect(next.token).toBe(lease.token + 1);
    await next.release();
  });

  it("a hung acquire ends with a timeout error and no lease", async () => {
    // A proxy that forwards each request to the bridge (so Redis may really take the lock) and
    // never answers: the worst case, an acquire whose outcome the client cannot know.
    const proxy = await startFaultServer((req, _res, body) => {
      void fetch(`${ctx.url}${req.url}`, {
        method: "POST",
        headers: { authorization: String(req.headers.authorization) },
        body,
      }).then((r) => r.text());
    });
    servers.push(proxy);
    const name = unique();
    const ttl = 1_000;
    const hung = createMutex(upstash({ url: proxy.url, token: ctx.token }), { name, ttl, owner: "hung" });
    const started = performance.now();
    const error = await hung.acquire({ timeout: 1_500 }).catch((e: unknown) => e);
    expect(performance.now() - started).toBeLessThan(3_000);
    expect(isLockError(error) && error.code).toBe("ERR_LOCK_TIMEOUT");
    await expect(hung.tryAcquire()).rejects.toMatchObject({ name: "BackendError", retryable: true });
    expect(proxy.requests).toBeGreaterThan(1);

    // Whatever the lost attempts wrote expires within the ttl; then someone else gets the lock
    // with a greater token.
    const other = createMutex(backend, { name, ttl, owner: "other" });
    const lease = await other.acquire({ timeout: ttl * 3 });
    expect(lease.owner).toBe("other");
    expect(lease.token).toBe(Number(await sdk.get(fenceKey(name))));
    await lease.release();
  });

  it("a key deleted behind the holder's back aborts lease.signal at the next renewal", async () => {
    const name = unique();
    const ttl = 1_500;
    const lease: Lease = await createMutex(backend, { name, ttl }).acquire({ timeout: 5_000 });
    const aborted = new Promise<number>((resolve) =>
      lease.signal.addEventListener("abort", () => resolve(performance.now()), { once: true }),
    );
    const deleted = performance.now();
    expect(await sdk.del(lockKey(name))).toBe(1);
    const at = await aborted;
    // The signal aborts at the next renewal (at its latest, plus its request's bound and 50 ms),
    // well before the local deadline.
    expect(at - deleted).toBeLessThan(renewalWindow(ttl).latest + renewalBound(ttl, ttl) + 50);
    expect(isLockError(lease.signal.reason) && lease.signal.reason.code).toBe("ERR_LEASE_LOST");
    await expect(lease.renew()).rejects.toMatchObject({ code: "ERR_LEASE_LOST" });
    await lease.release();
  });
});
