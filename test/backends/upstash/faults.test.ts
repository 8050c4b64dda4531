// Faults the real bridge and redis-server cannot produce on demand: a proxy's 502 page, 5xx, a
// body cut short, a request that never gets an answer, NOPERM and 403 from a restricted token,
// and malformed 200 replies. Each comes from a tiny loopback server of this file, stopped after
// each test. Every error is checked to carry no token.
import { inspect as nodeInspect } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { upstash } from "../../../src/backends/upstash/index.ts";
import type { Backend } from "../../../src/index.ts";
import { answer, type FaultServer, startFaultServer } from "../../harness/servers/upstash-faults.ts";

const token = "fault-test-TOKEN-0123456789";
const servers: FaultServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

async function serve(handler: Parameters<typeof startFaultServer>[0]): Promise<Backend> {
  const server = await startFaultServer(handler);
  servers.push(server);
  return upstash({ url: server.url, token });
}

const calls = (b: Backend, signal?: AbortSignal) => ({
  acquire: () => b.acquire({ key: "k", owner: "o", nonce: crypto.randomUUID(), ttl: 1_000, signal }),
  renew: () => b.renew({ key: "k", nonce: crypto.randomUUID(), ttl: 1_000, signal }),
  release: () => b.release({ key: "k", nonce: crypto.randomUUID(), signal }),
  inspect: () => b.inspect({ key: "k", signal: signal }),
});

/** Runs every backend call and returns the errors; fails if any call resolves. */
async function failures(b: Backend): Promise<Error[]> {
  const out: Error[] = [];
  for (const [op, call] of Object.entries(calls(b))) {
    const result = await call().then(
      (value) => ({ value }),
      (error: Error) => ({ error }),
    );
    if (!("error" in result)) throw new Error(`${op} resolved ${JSON.stringify(result.value)}`);
    expect(nodeInspect(result.error, { depth: 10 }) + result.error.stack).not.toContain(token);
    out.push(result.error);
  }
  return out;
}

describe("HTTP and body faults", () => {
  it("a 502 with an HTML body is a retryable BackendError", async () => {
    const b = await serve(answer(502, "<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html"));
    for (const e of await failures(b)) {
      expect(e).toMatchObject({ name: "BackendError", code: "ERR_BACKEND", status: 502, retryable: true });
      expect(e.message).toMatch(/HTTP 502 with a body that is not JSON: "<html><body><h1>502 Bad Gateway/);
    }
  });

  it("a proxy page echoing the Authorization header does not leak the token", async () => {
    const b = await serve((req, res) => {
      res.writeHead(502, { "content-type": "text/html" });
      res.end(`<p>${req.headers.authorization}</p>`);
    });
    for (const e of await failures(b)) expect(e.message).toContain("[redacted]");
  });

  it("no part of the token survives when the error snippet is cut", async () => {
    const b = await serve((req, res) => {
      res.writeHead(500, { "content-type": "text/plain" });
      res.end(`${"x".repeat(70)}${req.headers.authorization}`);
    });
    for (const e of await failures(b)) {
      expect(e).toMatchObject({ status: 500, retryable: true });
      expect(e.message).not.toContain(token.slice(0, 6));
    }
  });

  it("a 503 with a JSON error is retryable; a 404 is not", async () => {
    let b = await serve(answer(503, '{"error":"service unavailable"}'));
    for (const e of await failures(b)) expect(e).toMatchObject({ status: 503, retryable: true });
    b = await serve(answer(404, '{"error":"not found"}'));
    for (const e of await failures(b)) expect(e).toMatchObject({ status: 404, retryable: false });
  });

  it("truncated JSON is retryable", async () => {
    const b = await serve(answer(200, '{"result":[1,'));
    for (const e of await failures(b))
      expect(e).toMatchObject({ code: "ERR_BACKEND", status: 200, retryable: true });
  });

  it("a body cut short by a dropped connection is retryable", async () => {
    const b = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-length": "100" });
      res.write('{"result":[1,');
      setTimeout(() => res.socket?.destroy(), 10);
    });
    for (const e of await failures(b)) expect(e).toMatchObject({ code: "ERR_BACKEND", retryable: true });
  });

  it("a refused connection is retryable", async () => {
    const server = await startFaultServer(answer(200, "{}"));
    await server.stop();
    const b = upstash({ url: server.url, token });
    for (const e of await failures(b)) expect(e).toMatchObject({ code: "ERR_BACKEND", retryable: true });
  });

  it("Redis' transient errors (LOADING, BUSY, ...) are retryable", async () => {
    const b = await serve(answer(400, '{"error":"LOADING Redis is loading the dataset in memory"}'));
    for (const e of await failures(b)) {
      expect(e).toMatchObject({ status: 400, retryable: true });
      expect(e.message).toContain("LOADING Redis is loading");
    }
  });
});

describe("permission faults (a restricted token on the real service)", () => {
  it("403 is ERR_BACKEND_AUTH", async () => {
    const b = await serve(answer(403, '{"error":"Forbidden"}'));
    for (const e of await failures(b))
      expect(e).toMatchObject({ code: "ERR_BACKEND_AUTH", retryable: false });
  });

  it("NOPERM is ERR_BACKEND_AUTH", async () => {
    const b = await serve(
      answer(400, `{"error":"NOPERM this user has no permissions to run the 'eval' command"}`),
    );
    for (const e of await failures(b)) {
      expect(e).toMatchObject({ code: "ERR_BACKEND_AUTH", status: 400, retryable: false });
      expect(e.message).toContain("NOPERM");
    }
  });
});

describe("malformed 200 replies never yield a lease", () => {
  it.each([
    "{}",
    "[]",
    "null",
    '"OK"',
    '{"result":"OK"}',
    '{"result":null}',
    '{"result":1}',
    '{"result":[1]}',
    '{"result":[1,7]}',
    '{"result":[1,"7",0]}',
    '{"result":[1,0,0]}',
    '{"result":[1,-3,0]}',
    '{"result":[1,1.5,0]}',
    '{"result":[1,7,"extra"]}',
    '{"result":[1,7,1]}',
    '{"result":[1,7,0.5]}',
    '{"result":[1,7,0,0]}',
    '{"result":[true,7,0]}',
    '{"result":[0,"a|1|b"]}',
    '{"result":[0,"a|1|b",100]}',
    '{"result":[0,5]}',
    '{"result":[0,"5",1]}',
    '{"result":[0,5,"1"]}',
    '{"result":[0,5,1,2]}',
    '[{"result":[1,7,0]}]',
    '{"result":[1,7,0],"error":"ERR oops"}',
  ])("acquire rejects %s", async (body) => {
    const b = await serve(answer(200, body));
    const result = await b.acquire({ key: "k", owner: "o", nonce: crypto.randomUUID(), ttl: 1_000 }).then(
      (value) => ({ value }),
      (error: Error) => ({ error }),
    );
    expect(result).toHaveProperty("error");
    expect("error" in result && result.error).toMatchObject({ name: "BackendError" });
  });

  it.each([
    ['{"result":[1,7,0]}', { ok: true, token: 7 }],
    ['{"result":[2,7,0]}', { ok: true, token: 7 }],
    ['{"result":[0,250,3]}', { ok: false, retryAfter: 250 }],
    ['{"result":[0,-1,0]}', { ok: false }],
  ])(
    "acquire reads %s (grant or retried grant: token, index; taken: the lock's PTTL, its holder's token)",
    async (body, expected) => {
      const b = await serve(answer(200, body));
      expect(await b.acquire({ key: "k", owner: "o", nonce: crypto.randomUUID(), ttl: 1_000 })).toEqual(
        expected,
      );
    },
  );

  it.each([
    ['{"result":[1,7,2]}', { ok: true, token: 7, index: 2 }],
    ['{"result":[0,300,4,5,0]}', { ok: false, retryAfter: 300 }],
    ['{"result":[0,-1,4,5,0]}', { ok: false }],
    ['{"result":[1,7,3]}', "error"],
    ['{"result":[0,300,4,5]}', "error"],
    ['{"result":[0,300,4,5,0,1]}', "error"],
    ['{"result":[0,300,4,"5",0]}', "error"],
  ])(
    "acquireAny on 3 keys reads %s (taken: the earliest expiry, then each lock's holder's token)",
    async (body, expected) => {
      const b = await serve(answer(200, body));
      const result = b.acquireAny!({
        keys: ["a", "b", "c"],
        owner: "o",
        nonce: crypto.randomUUID(),
        ttl: 1_000,
      });
      if (expected === "error")
        await expect(result).rejects.toMatchObject({ name: "BackendError", retryable: true });
      else expect(await result).toEqual(expected);
    },
  );

  it.each(['{"result":"1"}', '{"result":2}', '{"result":true}', '{"result":null}'])(
    "renew and release reject %s",
    async (body) => {
      const b = await serve(answer(200, body));
      const { renew, release } = calls(b);
      await expect(renew()).rejects.toMatchObject({ name: "BackendError", retryable: true });
      await expect(release()).rejects.toMatchObject({ name: "BackendError", retryable: true });
    },
  );

  it.each(['{"result":1}', '{"result":["a|1|b"]}', '{"result":["a|1|b","5"]}', '{"result":[5,5]}'])(
    "inspect rejects %s",
    async (body) => {
      const b = await serve(answer(200, body));
      await expect(b.inspect({ key: "k" })).rejects.toMatchObject({ name: "BackendError" });
    },
  );
});

describe("abort", () => {
  it("a hung request is ended by its signal, with the signal's reason", async () => {
    const b = await serve(() => {
      // never answer; afterEach closes the server and drops the connection
    });
    for (const op of ["acquire", "renew", "release", "inspect"] as const) {
      const started = performance.now();
      const error = await calls(b, AbortSignal.timeout(100))
        [op]()
        .catch((e: unknown) => e);
      expect(error, op).toBeInstanceOf(DOMException);
      expect((error as DOMException).name, op).toBe("TimeoutError");
      const elapsed = performance.now() - started;
      expect(elapsed, op).toBeGreaterThanOrEqual(90);
      expect(elapsed, op).toBeLessThan(2_000);
    }
    const controller = new AbortController();
    const reason = new Error("stop now");
    const pending = calls(b, controller.signal).acquire();
    setTimeout(() => controller.abort(reason), 20);
    await expect(pending).rejects.toBe(reason);
  });

  it("an already aborted signal rejects with its reason", async () => {
    const b = await serve(answer(200, '{"result":[1,1]}'));
    const reason = new Error("aborted before");
    await expect(calls(b, AbortSignal.abort(reason)).acquire()).rejects.toBe(reason);
  });
});
