// The fault proxy itself: each fault kind does what it says, clients are told apart by port,
// a partition black-holes one client while the others pass, random mode is reproducible from its
// seed, and stop() frees everything, hung requests included. Also: Azure SharedKey requests
// still verify through the proxy (the path is unchanged), and the library maps every fault to a
// typed error.
import { BlobServiceClient } from "@azure/storage-blob";
import { afterEach, describe, expect, inject, it } from "vitest";
import { azureBlob } from "../../src/backends/azure-blob/index.ts";
import { upstash } from "../../src/backends/upstash/index.ts";
import { createMutex, isLockError } from "../../src/index.ts";
import { type Fault, type FaultProxy, randomRule, startFaultProxy } from "./servers/fault-proxy.ts";

const { url, token } = inject("upstash");
const proxies: FaultProxy[] = [];
afterEach(async () => {
  await Promise.all(proxies.splice(0).map((p) => p.stop()));
});

function proxy(target = url, rule?: Parameters<typeof startFaultProxy>[1]): FaultProxy {
  const p = startFaultProxy(target, rule);
  proxies.push(p);
  return p;
}

/** POSTs a Redis command to an Upstash URL; resolves status and body, or the error's message. */
async function redis(base: string, command: unknown[], ms = 2_000) {
  const t0 = performance.now();
  try {
    const res = await fetch(`${base}/`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(command),
      signal: AbortSignal.timeout(ms),
    });
    const text = await res.text();
    return { status: res.status, text, type: res.headers.get("content-type"), ms: performance.now() - t0 };
  } catch (error) {
    const e = error as Error & { cause?: { code?: string } };
    return { error: `${e.name}: ${e.message} ${e.cause?.code ?? ""}`, ms: performance.now() - t0 };
  }
}

const direct = (command: unknown[]) => redis(url, command);
/** Sends `SET <a new key> x` through proxy client `client` under `fault`; the key and the outcome. */
async function setThrough(p: FaultProxy, client: string, fault: Fault, timeout?: number) {
  const key = `proxy:${crypto.randomUUID()}`;
  p.setRule(() => fault);
  return { key, r: await redis(client, ["SET", key, "x"], timeout) };
}
/** Checks, straight at the server, whether the proxied `SET key x` was applied. */
const expectApplied = async (key: string, applied: boolean) =>
  expect(await direct(["GET", key])).toMatchObject({ text: applied ? '{"result":"x"}' : '{"result":null}' });

describe("fault proxy", () => {
  it("passes requests through unchanged", async () => {
    const p = proxy();
    const a = await p.client("a");
    expect(a).not.toBe(url);
    const key = `proxy:${crypto.randomUUID()}`;
    expect(await redis(a, ["SET", key, "v"])).toMatchObject({ status: 200, text: '{"result":"OK"}' });
    expect(await direct(["GET", key])).toMatchObject({ status: 200, text: '{"result":"v"}' });
    expect(p.counts().passed).toBe(1);
    expect(p.requests()).toEqual({ a: 1 });
  });

  it("delay: the request reaches the server late", async () => {
    const key = `proxy:${crypto.randomUUID()}`;
    const p = proxy(url, () => ({ kind: "delay", ms: 300 }));
    const a = await p.client("a");
    const pending = redis(a, ["SET", key, "late"]);
    await new Promise((r) => setTimeout(r, 100));
    expect(await direct(["GET", key])).toMatchObject({ text: '{"result":null}' }); // not arrived yet
    const r = await pending;
    expect(r).toMatchObject({ status: 200 });
    expect(r.ms).toBeGreaterThanOrEqual(290);
    expect(p.counts().delay).toBe(1);
  });

  it("delayResponse: the server applies at once, the answer comes late", async () => {
    const key = `proxy:${crypto.randomUUID()}`;
    const p = proxy(url, () => ({ kind: "delayResponse", ms: 300 }));
    const pending = redis(await p.client("a"), ["SET", key, "early"]);
    await new Promise((r) => setTimeout(r, 100));
    expect(await direct(["GET", key])).toMatchObject({ text: '{"result":"early"}' });
    expect((await pending).ms).toBeGreaterThanOrEqual(290);
  });

  it("hang: never answers; with forward the server still applies it", async () => {
    const p = proxy();
    const a = await p.client("a");
    for (const forward of [false, true]) {
      const { key, r } = await setThrough(p, a, { kind: "hang", forward }, 400);
      expect(r.error).toMatch(/TimeoutError/);
      p.setRule(undefined);
      await expectApplied(key, forward);
    }
    expect(p.counts().hang).toBe(2);
  });

  it("reset: the connection is reset, before or after the server applied it", async () => {
    const p = proxy();
    const a = await p.client("a");
    for (const forward of [false, true]) {
      const { key, r } = await setThrough(p, a, { kind: "reset", forward });
      expect(r.error).toMatch(/fetch failed|terminated|ECONNRESET|socket/i);
      expect(r.ms).toBeLessThan(1_000);
      await expectApplied(key, forward);
    }
    expect(p.counts().reset).toBe(2);
  });

  it("status: 500/502/503 with an HTML or XML page", async () => {
    const p = proxy();
    const a = await p.client("a");
    for (const [status, format] of [
      [500, "html"],
      [502, "xml"],
      [503, "html"],
    ] as const) {
      p.setRule(() => ({ kind: "status", status, format }));
      const r = await redis(a, ["PING"]);
      expect(r.status).toBe(status);
      expect(r.text).toMatch(format === "html" ? /^<!DOCTYPE html>/ : /^<\?xml/);
      expect(r.type).toMatch(format === "html" ? /text\/html/ : /xml/);
    }
    expect(p.counts().status).toBe(3);
  });

  it("truncate: a well-framed short body, or a declared length the connection never delivers", async () => {
    const p = proxy();
    const a = await p.client("a");
    const key = `proxy:${crypto.randomUUID()}`;
    await direct(["SET", key, "x".repeat(200)]);
    p.setRule(() => ({ kind: "truncate", fraction: 0.5, declared: false }));
    const short = await redis(a, ["GET", key]);
    expect(short.status).toBe(200);
    expect(short.text!.length).toBe(Math.floor(('{"result":""}'.length + 200) / 2));
    expect(() => JSON.parse(short.text!)).toThrow();
    p.setRule(() => ({ kind: "truncate", fraction: 0.5, declared: true }));
    expect((await redis(a, ["GET", key])).error).toMatch(/terminated|other side closed|fetch failed/i);
    expect(p.counts().truncate).toBe(2);
  });

  it("partition: black-holes one client while another passes, then heals", async () => {
    const p = proxy();
    const [a, b] = await Promise.all([p.client("a"), p.client("b")]);
    expect(new URL(a).port).not.toBe(new URL(b).port);
    p.partition("a", 500);
    expect(p.isPartitioned("a")).toBe(true);
    const [ra, rb] = await Promise.all([redis(a, ["PING"], 300), redis(b, ["PING"], 300)]);
    expect(ra.error).toMatch(/TimeoutError/);
    expect(rb).toMatchObject({ status: 200, text: '{"result":"PONG"}' });
    await new Promise((r) => setTimeout(r, 250));
    expect(p.isPartitioned("a")).toBe(false);
    expect(await redis(a, ["PING"])).toMatchObject({ status: 200 });
    // A rule can start a partition too; heal() ends it early.
    p.setRule((req) => (req.client === "b" ? { kind: "partition", ms: 60_000 } : undefined));
    expect((await redis(b, ["PING"], 200)).error).toMatch(/TimeoutError/);
    expect((await redis(b, ["PING"], 200)).error).toMatch(/TimeoutError/);
    p.setRule(undefined);
    p.heal("b");
    expect(await redis(b, ["PING"])).toMatchObject({ status: 200 });
    expect(p.counts()).toMatchObject({ partition: 1, blackholed: 2 });
  });

  it("random mode is reproducible from its seed and counts by kind", () => {
    const opts = {
      seed: 42,
      delay: 0.1,
      delayResponse: 0.1,
      hang: 0.1,
      reset: 0.1,
      status: 0.1,
      truncate: 0.1,
      partition: 0.1,
    };
    const draw = () => {
      const rule = randomRule(opts);
      return Array.from({ length: 500 }, (_, i) =>
        rule({ client: "a", seq: i, clientSeq: i, method: "POST", url: "/", headers: {}, body: "" }),
      );
    };
    const one = draw();
    expect(draw()).toEqual(one);
    const kinds = new Map<string, number>();
    for (const f of one) kinds.set(f?.kind ?? "pass", (kinds.get(f?.kind ?? "pass") ?? 0) + 1);
    for (const k of ["delay", "delayResponse", "hang", "reset", "status", "truncate", "partition", "pass"]) {
      expect(kinds.get(k), k).toBeGreaterThan(20);
    }
  });

  it("random mode meets every kind with a probability above 0 within 16 requests a kind, however rare", () => {
    const rule = randomRule({ seed: 7, hang: 1e-9, truncate: 1e-9, partition: 1e-9, reset: 0 });
    const drawn = Array.from({ length: 16 * 3 }, (_, i) =>
      rule({ client: "a", seq: i, clientSeq: i, method: "POST", url: "/", headers: {}, body: "" }),
    );
    expect(drawn.filter((f) => f !== undefined).map((f) => f?.kind)).toEqual([
      "partition",
      "hang",
      "truncate",
    ]);
  });

  it("stop() closes every server and socket, hung requests included", async () => {
    const p = startFaultProxy(url, () => ({ kind: "hang" }));
    const a = await p.client("a");
    const pending = redis(a, ["PING"], 10_000);
    await new Promise((r) => setTimeout(r, 100));
    const before = process.getActiveResourcesInfo().filter((r) => r === "TCPSocketWrap").length;
    await p.stop();
    const r = await pending;
    expect(r.error).toMatch(/fetch failed|terminated|other side closed|socket/i);
    expect(r.ms).toBeLessThan(2_000);
    expect((await redis(a, ["PING"], 500)).error).toMatch(/fetch failed|ECONNREFUSED/);
    expect(process.getActiveResourcesInfo().filter((x) => x === "TCPSocketWrap").length).toBeLessThan(before);
    await p.stop(); // idempotent
    await expect(p.client("b")).rejects.toThrow(/stopped/);
  });
});

describe("the library through the proxy", () => {
  const faults: Fault[] = [
    { kind: "hang" },
    { kind: "hang", forward: true },
    { kind: "reset" },
    { kind: "reset", forward: true },
    { kind: "status", status: 502, format: "html" },
    { kind: "status", status: 503, format: "xml", forward: true },
    { kind: "truncate", fraction: 0.5, declared: false },
    { kind: "truncate", fraction: 0.3, declared: true },
  ];

  it("upstash: every fault ends tryAcquire within ttl − guard with a retryable BackendError, never a lease", async () => {
    const p = proxy();
    const backend = upstash({ url: await p.client("lib"), token });
    const mutex = createMutex(backend, { name: `proxy-${crypto.randomUUID()}`, ttl: 1_000, stopMargin: 100 });
    for (const fault of faults) {
      p.setRule(() => fault);
      const t0 = performance.now();
      const error = await mutex.tryAcquire().then(
        (lease) => ({ lease }),
        (e: unknown) => e,
      );
      const ms = performance.now() - t0;
      expect(isLockError(error), JSON.stringify(fault)).toBe(true);
      expect(error).toMatchObject({ name: "BackendError", retryable: true });
      expect(ms, JSON.stringify(fault)).toBeLessThan(1_000 - 112 + 200);
      // A lock the lost answer may have taken is freed in the background (forget).
      p.setRule(undefined);
      await expect.poll(() => mutex.holder(), { timeout: 2_000 }).toBeNull();
    }
  });

  it("azure: SharedKey requests verify through the proxy; a 503 page is a retryable BackendError", async () => {
    const az = inject("azurite");
    const container = `proxy-${crypto.randomUUID().slice(0, 8)}`;
    await BlobServiceClient.fromConnectionString(az.connectionString).createContainer(container);
    const p = proxy(az.accountUrl);
    const accountUrl = await p.client("az");
    expect(new URL(accountUrl).pathname).toBe(new URL(az.accountUrl).pathname);
    const backend = azureBlob({
      accountUrl,
      accountName: az.accountName,
      accountKey: az.accountKey,
      container,
    });
    const mutex = createMutex(backend, { name: "through-proxy", ttl: 15_000 });
    const lease = await mutex.tryAcquire();
    expect(lease?.token).toBe(1);
    await lease!.release();
    p.setRule(() => ({ kind: "status", status: 503, format: "xml" }));
    await expect(mutex.tryAcquire()).rejects.toMatchObject({
      name: "BackendError",
      status: 503,
      retryable: true,
    });
    // the lease request got the 503; the HEAD sent beside it (the blob's type and counter) gets
    // one too, but a failed lease does not wait for it, so it may still be on its way
    expect(p.counts().status).toBeGreaterThanOrEqual(1);
    expect(p.counts().status).toBeLessThanOrEqual(2);
  });
});
