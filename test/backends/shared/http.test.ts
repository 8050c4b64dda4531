// What every HTTP backend request does (src/backends/shared/http.ts), through the upstash backend against the real
// redis-server behind the shared bridge: no framework cache can answer for the server, no redirect
// is followed, and no reply is read past the size cap. The "other server" and the padded replies
// come from small local HTTP servers here, because the bridge cannot produce them: each says so.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { gzipSync } from "node:zlib";
import { Redis } from "@upstash/redis";
import { afterEach, describe, expect, inject, it } from "vitest";
import type { FetchLike } from "../../../src/backend.ts";
import { MAX_REPLY_BYTES } from "../../../src/backends/shared/http.ts";
import { upstash } from "../../../src/backends/upstash/index.ts";
import { BackendError, createMutex, LeaseLostError } from "../../../src/index.ts";
import { within } from "../../../src/time.ts";

const ctx = inject("upstash");
const sdk = new Redis({ url: ctx.url, token: ctx.token });
const unique = (what: string) => `http-${what}-${crypto.randomUUID()}`;
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

async function serve(handler: Parameters<typeof createServer>[1]): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe("cache: no-store", () => {
  it("a caching fetch wrapper (as Next.js patches fetch) cannot keep a lost lease alive", async () => {
    // Caches every POST by URL and body unless the request says cache: "no-store", as a
    // framework's data cache does. A renewal's body is the same for the lease's whole life.
    const cache = new Map<string, { status: number; body: string }>();
    let hits = 0;
    const caching: FetchLike = async (url, init) => {
      if (init.cache === "no-store") return fetch(url, init);
      const key = `${url} ${init.body}`;
      if (cache.has(key)) hits++;
      else {
        const res = await fetch(url, init);
        cache.set(key, { status: res.status, body: await res.text() });
      }
      const hit = cache.get(key)!;
      return new Response(hit.body, { status: hit.status });
    };
    const name = unique("cache");
    const mutex = createMutex(upstash({ url: ctx.url, token: ctx.token, fetch: caching }), {
      name,
      ttl: 3_000,
      renew: false,
    });
    const lease = (await mutex.tryAcquire())!;
    await lease.renew();
    expect(await sdk.del(`leasehold:{${name}}`)).toBe(1); // the lock is gone on the server
    await expect(lease.renew()).rejects.toBeInstanceOf(LeaseLostError);
    expect(hits).toBe(0);
  });

  it("a fetch that refuses the cache field (old workerd dates) is asked again without it, once", async () => {
    const seen: (string | undefined)[] = [];
    const picky: FetchLike = (url, init) => {
      seen.push(init.cache);
      if (init.cache !== undefined) {
        // workerd's own words, before compatibility date 2024-11-11
        throw new Error("The 'cache' field on 'RequestInitializerDict' is not implemented.");
      }
      return fetch(url, init);
    };
    const mutex = createMutex(upstash({ url: ctx.url, token: ctx.token, fetch: picky }), {
      name: unique("picky"),
    });
    const lease = (await mutex.tryAcquire())!;
    expect(lease.token).toBeGreaterThan(0);
    await lease.release();
    expect(seen).toEqual(["no-store", undefined, undefined]);
  });
});

describe("redirects are never followed", () => {
  it("a 307 to another server is a non-retryable error, not a lease from that server", async () => {
    // The other server grants anything: a lock library that followed the redirect would take its
    // answer as the lock's (Node drops the Authorization header, not the answer).
    const other = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ result: [1, 7, 0] }));
    });
    const redirecting = await serve((_req, res) => {
      res.writeHead(307, { location: `${other}/` });
      res.end();
    });
    const mutex = createMutex(upstash({ url: redirecting, token: ctx.token }), { name: unique("redirect") });
    const error = await mutex.tryAcquire().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BackendError);
    expect((error as BackendError).retryable).toBe(false);
    expect((error as BackendError).status).toBe(307);
    expect((error as Error).message).toMatch(
      /answered with a redirect \(HTTP 307\); leasehold does not follow redirects/,
    );
    // and acquire() fails at once instead of retrying until its timeout
    const started = performance.now();
    await expect(mutex.acquire({ timeout: 5_000 })).rejects.toBeInstanceOf(BackendError);
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});

describe("reply size cap", () => {
  it(`refuses a reply over ${MAX_REPLY_BYTES} bytes without reading it whole, and never takes it as a lease`, async () => {
    // The bridge cannot pad its answers: this server answers a valid grant after 8 MiB of spaces
    // (chunked, no length), and counts what it managed to send before the client hung up.
    let sent = 0;
    const padded = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      const chunk = " ".repeat(65_536);
      let left = 128;
      const pump = (): void => {
        while (left > 0) {
          left--;
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once("drain", pump);
        }
        res.end(JSON.stringify({ result: [1, 1, 0] }));
      };
      res.on("close", () => (left = 0));
      pump();
    });
    const mutex = createMutex(upstash({ url: padded, token: ctx.token }), { name: unique("big") });
    const error = await mutex.tryAcquire().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BackendError);
    expect((error as Error).message).toMatch(`the reply is longer than ${MAX_REPLY_BYTES} bytes; not read`);
    expect((error as BackendError).retryable).toBe(true);
    expect(sent).toBeLessThan(8 * 1024 * 1024);
  });

  it("counts a compressed reply as it is decoded: a small gzip that expands past the cap is refused", async () => {
    // 16 MiB of spaces and a valid grant, gzipped to a few KiB with a Content-Length that fits the cap.
    const bomb = gzipSync(
      Buffer.from(`${" ".repeat(16 * 1024 * 1024)}${JSON.stringify({ result: [1, 1, 0] })}`),
    );
    expect(bomb.length).toBeLessThan(MAX_REPLY_BYTES);
    const zipped = await serve((_req, res) => {
      res.writeHead(200, {
        "content-type": "application/json",
        "content-encoding": "gzip",
        "content-length": String(bomb.length),
      });
      res.end(bomb);
    });
    const mutex = createMutex(upstash({ url: zipped, token: ctx.token }), { name: unique("gzip") });
    const error = await mutex.tryAcquire().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BackendError);
    expect((error as Error).message).toMatch(/the reply is longer than \d+ bytes/);
  });

  it("refuses a declared Content-Length over the cap before reading any of the body", async () => {
    let bodyBytes = 0;
    const huge = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-length": String(300 * 1024 * 1024) });
      const timer = setInterval(() => {
        bodyBytes += 1_024;
        res.write(" ".repeat(1_024));
      }, 5);
      res.on("close", () => clearInterval(timer));
    });
    const mutex = createMutex(upstash({ url: huge, token: ctx.token }), { name: unique("declared") });
    const error = await mutex.tryAcquire().catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/the reply is longer than \d+ bytes/);
    expect(bodyBytes).toBeLessThan(MAX_REPLY_BYTES);
  });
});

describe("a reply body that never ends", () => {
  it("is abandoned at the request's bound, even by a fetch whose body ignores the abort (nodejs/node#56917)", async () => {
    // A double, for a fault no server here can produce: Node's fetch may leave `text()` pending
    // forever when the request is aborted while its body is being read (nodejs/node#56917, seen
    // as a process that exited with its lead() unsettled). This fetch answers 200 with headers,
    // and a body whose reading never ends and does not listen to the signal.
    const stuck: FetchLike = async () => {
      const reply = new Response('{"result":[1,1]}', { headers: { "content-length": "16" } });
      Object.defineProperty(reply, "text", { value: () => new Promise<string>(() => {}) });
      return reply;
    };
    const mutex = createMutex(upstash({ url: "http://127.0.0.1:9", token: "t".repeat(24), fetch: stuck }), {
      name: unique("stuck"),
      ttl: 1_000,
    });
    const started = performance.now();
    const outcome =
      (await within(
        mutex.tryAcquire().then(
          () => "a lease",
          (error: unknown) => error,
        ),
        10_000,
      )) ?? "still pending after 10 s";
    expect(outcome).toBeInstanceOf(BackendError);
    expect((outcome as BackendError).message).toMatch(/acquire got no answer within \d+ ms/);
    expect((outcome as BackendError).retryable).toBe(true);
    expect(performance.now() - started).toBeLessThan(10_000);
  });
});
