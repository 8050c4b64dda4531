// Secrets: errors, causes, stacks and messages never contain the Upstash token, the Azure account
// key, a SAS signature, a bearer token or the Durable Object route's token. This file drives the error paths that carry a secret
// nearby (wrong credentials against the real servers, proxies echoing the request, network errors
// quoting the URL or headers, token providers that fail, option validation with secret-looking
// values) and checks each error deeply. The suite-wide check (every LockError constructed and
// everything printed, in every test file) lives in test/harness/secrets.ts; the last test here
// proves that it is active when vitest.config.ts lists it in setupFiles.
import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { azureBlob } from "../../src/backends/azure-blob/index.ts";
import { durableObject } from "../../src/backends/cloudflare/index.ts";
import { upstash } from "../../src/backends/upstash/index.ts";
import { createMutex, type FetchLike, isLockError } from "../../src/index.ts";
import { thrown } from "../harness/doubles.ts";
import { checkNoSecrets, registerSecret, secretStats } from "../harness/secrets.ts";
import { fakeEntraToken, nodeFetch } from "../harness/servers/azurite.ts";
import { listenLoopback } from "../harness/servers/listen.ts";

const { url, token } = inject("upstash");
const az = inject("azurite");

/** Settles `p`; returns the rejection (failing if it resolved). */
async function failure(p: Promise<unknown>): Promise<Error> {
  const r = await p.then(
    (value) => ({ value }),
    (error: Error) => ({ error }),
  );
  if (!("error" in r)) throw new Error(`expected a rejection, got ${String(r.value)}`);
  return r.error;
}

let echo: Server;
let echoUrl = "";
beforeAll(async () => {
  // A "proxy" that answers 502 with everything it received: URL (a SAS), headers (Authorization), body.
  echo = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      const page = `<html><body><pre>${req.method} ${req.url}\n${JSON.stringify(req.headers)}\n${body}</pre></body></html>`;
      // (Echoing them into x-ms-error-code: "an error code echoing the SAS signature ..." below.)
      res.writeHead(502, { "content-type": "text/html" });
      res.end(page);
    });
  });
  echoUrl = await listenLoopback(echo);
});
afterAll(async () => {
  echo.closeAllConnections();
  await new Promise((r) => echo.close(r));
});

describe("upstash", () => {
  it("a wrong token: 401 is a non-retryable auth error that names neither token", async () => {
    const wrong = `wrong-${crypto.randomUUID()}`;
    registerSecret(wrong);
    const mutex = createMutex(upstash({ url, token: wrong }), { name: "secrets", ttl: 1_000 });
    for (const op of [
      () => mutex.tryAcquire(),
      () => mutex.acquire({ timeout: 500 }),
      () => mutex.holder(),
    ]) {
      const e = await failure(op());
      expect(e).toMatchObject({ code: "ERR_BACKEND_AUTH", status: 401 });
      checkNoSecrets(e, "401");
    }
  });

  it("a proxy echoing the request, and network errors quoting the token, are redacted", async () => {
    const mutex = createMutex(upstash({ url: echoUrl, token }), { name: "secrets", ttl: 1_000 });
    const e = await failure(mutex.tryAcquire());
    expect(e).toMatchObject({ name: "BackendError", status: 502 });
    checkNoSecrets(e, "echo");
    const quoting: FetchLike = async (u, init) => {
      const cause = new Error(`connect ECONNREFUSED (headers ${JSON.stringify(init.headers)}) ${u}`);
      throw new TypeError(`fetch failed: Authorization: ${init.headers.authorization}`, { cause });
    };
    const m2 = createMutex(upstash({ url, token, fetch: quoting }), { name: "secrets", ttl: 1_000 });
    const e2 = await failure(m2.tryAcquire());
    expect(isLockError(e2)).toBe(true);
    expect(String(e2.message)).toContain("[redacted]");
    checkNoSecrets(e2, "quoting fetch");
  });

  it('a token with " and \\ is redacted in every form, also after JSON.stringify quoted it', async () => {
    const odd = `tok"en\\sec${crypto.randomUUID().slice(0, 8)}`;
    registerSecret(odd);
    // A server that answers something unexpected that quotes the token (in a nested string, so
    // the message's JSON.stringify escapes it).
    const quoting = createServer((req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ result: { echo: `${req.headers.authorization}`, again: [odd] } }));
    });
    const quotingUrl = await listenLoopback(quoting);
    try {
      const mutex = createMutex(upstash({ url: quotingUrl, token: odd }), { name: "secrets", ttl: 1_000 });
      const e = await failure(mutex.tryAcquire());
      expect(e.message).toMatch(/unexpected reply: .*\[redacted\]/);
      expect(e.message).not.toContain(JSON.stringify(odd).slice(1, -1));
      checkNoSecrets(e, "JSON-escaped token");
    } finally {
      await new Promise((r) => quoting.close(r));
    }
  });

  it("a token shorter than 4 characters is redacted too", async () => {
    const denying = createServer((req, res) => {
      res.writeHead(502, { "content-type": "text/plain" });
      res.end(`denied: ${req.headers.authorization}`);
    });
    const denyingUrl = await listenLoopback(denying);
    try {
      const mutex = createMutex(upstash({ url: denyingUrl, token: "Q9z" }), { name: "secrets", ttl: 1_000 });
      const e = await failure(mutex.tryAcquire());
      expect(e).toMatchObject({ name: "BackendError", status: 502 });
      expect(e.message).toContain("denied: Bearer [redacted]");
      expect(e.message).not.toMatch(/Q9z/);
    } finally {
      await new Promise((r) => denying.close(r));
    }
  });

  it("option validation never quotes a token or a URL password", () => {
    const cases: [() => unknown, string][] = [
      [() => upstash({ url, token: "secret token with spaces 1234" }), "secret token with spaces 1234"],
      [() => upstash({ url, token: "tok\nen-secret-5678" }), "tok\nen-secret-5678"],
      [
        () => upstash({ url: "redis://default:RedisPassw0rd99@eu1.upstash.io:6379", token }),
        "RedisPassw0rd99",
      ],
      [() => upstash({ url: "rediss://:RedisPassw0rd77@x:6379", token }), "RedisPassw0rd77"],
      [() => upstash({ url: "not a url RedisPassw0rd55", token }), "RedisPassw0rd55"],
    ];
    for (const [make, secret] of cases) {
      registerSecret(secret);
      const error = thrown(() => make());
      expect(error).toBeInstanceOf(TypeError);
      checkNoSecrets(error, secret);
    }
  });
});

describe("cloudflare", () => {
  const cf = inject("cloudflare");
  it("a wrong token, a proxy echoing the request, and network errors quoting the token are redacted", async () => {
    const wrong = `wrong-${crypto.randomUUID()}`;
    registerSecret(wrong);
    const refused = await failure(
      createMutex(durableObject({ url: cf.url, token: wrong }), { name: "s" }).acquire(),
    );
    expect(refused).toMatchObject({ code: "ERR_BACKEND_AUTH", status: 401 });
    checkNoSecrets(refused, "401");
    const echoed = await failure(
      createMutex(durableObject({ url: echoUrl, token: cf.token }), { name: "s" }).tryAcquire(),
    );
    expect(echoed).toMatchObject({ name: "BackendError", status: 502 });
    checkNoSecrets(echoed, "echo");
    const quoting: FetchLike = async (_u, init) => {
      throw new TypeError(`fetch failed: Authorization: ${init.headers.authorization}`);
    };
    const m = createMutex(durableObject({ url: cf.url, token: cf.token, fetch: quoting }), { name: "s" });
    const quoted = await failure(m.tryAcquire());
    expect(String(quoted.message)).toContain("[redacted]");
    checkNoSecrets(quoted, "quoting fetch");
  });
});

describe("azure-blob", () => {
  const container = `secrets-${crypto.randomUUID().slice(0, 8)}`;
  const wrongKey = Buffer.from(crypto.getRandomValues(new Uint8Array(64))).toString("base64");

  it("a wrong account key: 403 names neither key", async () => {
    registerSecret(wrongKey);
    const backend = azureBlob({
      accountUrl: az.accountUrl,
      accountName: az.accountName,
      accountKey: wrongKey,
      container,
      createContainer: true,
    });
    const mutex = createMutex(backend, { name: "secrets", ttl: 15_000 });
    for (const op of [() => mutex.tryAcquire(), () => mutex.holder()]) {
      const e = await failure(op());
      expect(e).toMatchObject({ code: "ERR_BACKEND_AUTH", status: 403 });
      checkNoSecrets(e, "403 SharedKey");
    }
  });

  it("a SAS with a wrong signature, through a proxy that echoes the URL: the sig never appears", async () => {
    const sig = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64");
    registerSecret(sig);
    const sasToken = `sv=2024-11-04&ss=b&srt=sco&sp=rwdlacup&se=2099-01-01T00:00:00Z&sig=${encodeURIComponent(sig)}`;
    for (const accountUrl of [az.accountUrl, `${echoUrl}/devstoreaccount1`]) {
      const mutex = createMutex(azureBlob({ accountUrl, sasToken, container }), {
        name: "secrets",
        ttl: 15_000,
      });
      const e = await failure(mutex.tryAcquire());
      expect(isLockError(e), String(e)).toBe(true);
      checkNoSecrets(e, `SAS via ${accountUrl}`);
    }
    const conn = `BlobEndpoint=${echoUrl}/devstoreaccount1;SharedAccessSignature=${sasToken}`;
    registerSecret(conn);
    const e = await failure(
      createMutex(azureBlob({ connectionString: conn, container }), { name: "s", ttl: 15_000 }).tryAcquire(),
    );
    checkNoSecrets(e, "SAS connection string");
  });

  it("bearer tokens: refused by the OAuth Azurite, echoed by a proxy, or in a failing getToken", async () => {
    const bad = fakeEntraToken({ audience: "https://not-storage.example.com" });
    registerSecret(bad);
    const credential = (t: string) => ({
      getToken: async () => ({ token: t, expiresOnTimestamp: Date.now() + 3_600_000 }),
    });
    const oauth = az.oauth!;
    const m1 = createMutex(
      azureBlob({
        accountUrl: oauth.accountUrl,
        credential: credential(bad),
        container,
        fetch: nodeFetch({ ca: oauth.ca }),
      }),
      { name: "secrets", ttl: 15_000 },
    );
    const e1 = await failure(m1.tryAcquire());
    expect(e1).toMatchObject({ code: "ERR_BACKEND_AUTH" });
    checkNoSecrets(e1, "bearer 401");
    const good = fakeEntraToken();
    registerSecret(good);
    const m2 = createMutex(
      azureBlob({ accountUrl: `${echoUrl}/devstoreaccount1`, credential: credential(good), container }),
      {
        name: "secrets",
        ttl: 15_000,
      },
    );
    checkNoSecrets(await failure(m2.tryAcquire()), "bearer echo");
    // A credential that fails: its error becomes the cause (leasehold cannot know what in it is
    // secret; THREATS.md says so). Known secrets still never appear.
    const leaky = `own-text-of-the-credential-${crypto.randomUUID()}`;
    const failing = {
      getToken: async () => {
        throw new Error(`AADSTS700082: refresh token ${leaky} expired`, {
          cause: new Error(`token=${leaky}`),
        });
      },
    };
    const m3 = createMutex(azureBlob({ accountUrl: az.accountUrl, credential: failing, container }), {
      name: "s",
      ttl: 15_000,
    });
    const e3 = await failure(m3.tryAcquire());
    expect(e3).toMatchObject({ code: "ERR_BACKEND_AUTH" });
    checkNoSecrets(e3, "getToken failure");
  });

  it("option validation never quotes a key, a SAS or a connection string", () => {
    const notBase64 = "this-is-not-base64-but-secret!!";
    const sasNoSig = "sv=2024-11-04&sp=rw&secretish=Abcdefghij0123456789";
    const conn = `AccountName=acc;AccountKey=${notBase64};EndpointSuffix=core.windows.net`;
    const cases: [() => unknown, string][] = [
      [
        () => azureBlob({ accountUrl: az.accountUrl, accountName: "acc", accountKey: notBase64, container }),
        notBase64,
      ],
      [() => azureBlob({ accountUrl: az.accountUrl, sasToken: sasNoSig, container }), sasNoSig],
      [() => azureBlob({ connectionString: conn, container }), notBase64],
      [() => azureBlob({ connectionString: `AccountKey=${az.accountKey}`, container }), az.accountKey],
      [() => azureBlob({ connectionString: `garbage ${az.accountKey}`, container }), az.accountKey],
      [
        () =>
          azureBlob({
            accountUrl: `${az.accountUrl}?sig=Abcdefghij0123456789XYZ`,
            sasToken: "sig=x",
            container,
          }),
        "Abcdefghij0123456789XYZ",
      ],
      [() => azureBlob({ connectionString: az.connectionString, container: "Bad_Container" }), az.accountKey],
    ];
    for (const [make, secret] of cases) {
      registerSecret(secret);
      const error = thrown(() => make());
      expect(error, secret).toBeInstanceOf(TypeError);
      checkNoSecrets(error, secret);
    }
  });

  // The error code (x-ms-error-code or the body's <Code>) was copied into the message unredacted
  // (CHANGELOG.md, Fixed: "An Azure error code could carry a secret").
  it("an error code echoing the SAS signature is not copied into the message", async () => {
    // A sig that no shape detector knows, so the suite-wide check stays quiet: this test is the check.
    const sig = `Zq${crypto.randomUUID().replaceAll("-", "")}`;
    const backend = azureBlob({
      accountUrl: "http://127.0.0.1:1/devstoreaccount1",
      sasToken: `sv=2024-11-04&sp=rw&sig=${sig}`,
      container: "locks",
      fetch: (u) => {
        const echoed = new URL(u).searchParams.get("sig") ?? "";
        return Promise.resolve({
          status: 502,
          headers: new Headers({ "x-ms-error-code": echoed }),
          text: async () => "",
        });
      },
    });
    const error = await createMutex(backend, { name: "e", ttl: 15_000 })
      .tryAcquire()
      .catch((e: Error) => e);
    expect(isLockError(error)).toBe(true);
    expect(`${(error as Error).message}\n${(error as Error).stack}`).not.toContain(sig);
  });
});

describe("the suite-wide check", () => {
  it("is active: LockErrors are recorded and console output is scanned (needs setupFiles)", async (ctx) => {
    const before = secretStats();
    const mutex = createMutex(upstash({ url, token: `wrong-${crypto.randomUUID()}` }), {
      name: "s",
      ttl: 1_000,
    });
    await mutex.tryAcquire().catch(() => {});
    console.log("[secrets] stats so far in this worker:", JSON.stringify(secretStats()));
    const after = secretStats();
    if (after.lockErrors === before.lockErrors) {
      ctx.skip(
        "test/harness/secrets.ts is not in vitest.config.ts setupFiles: only this file's explicit checks ran",
      );
    }
    expect(after.lockErrors).toBeGreaterThan(before.lockErrors);
    expect(after.console).toBeGreaterThan(before.console);
    expect(after.secrets).toBeGreaterThanOrEqual(2); // the injected token and account key at least
    expect(token.length).toBeGreaterThan(6);
  });
});
