// The backend from the environment (cli/backend.ts): missing or wrong configuration, secrets never
// printed, and an unreachable backend told apart from a taken lock (exit 69, not 75).
import { createServer as createHttpServer } from "node:http";
import { type AddressInfo, createServer, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { bare, cli, closedPort, ctx, sleep, stopChildren, unique, upstashEnv } from "../harness/cli.ts";

afterEach(stopChildren);

describe("backend configuration", () => {
  it("without configuration exits 2 and names the variables to set", async () => {
    const runs = [
      cli(["status", "--name", "x"], { env: bare }),
      cli(["exec", "--name", "x", "--", "true"], { env: bare }),
      cli(["status", "--name", "x", "--backend", "azure-blob"], { env: upstashEnv }),
      cli(["status", "--name", "x"], { env: { ...bare, UPSTASH_REDIS_REST_URL: ctx.url } }),
      cli(["status", "--name", "x", "--backend", "mysql"], { env: upstashEnv }),
    ];
    expect(await Promise.all(runs.map((r) => r.status))).toEqual([2, 2, 2, 2, 2]);
    for (const r of runs.slice(0, 2)) {
      expect(r.stderr).toMatch(/UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN/);
      expect(r.stderr).toMatch(
        /AZURE_STORAGE_CONNECTION_STRING and --container \(or LEASEHOLD_AZURE_CONTAINER\)/,
      );
    }
    expect(runs[2]!.stderr).toMatch(/needs AZURE_STORAGE_CONNECTION_STRING and --container/);
    expect(runs[3]!.stderr).toMatch(/needs UPSTASH_REDIS_REST_TOKEN/);
    expect(runs[4]!.stderr).toMatch(
      /--backend must be one of redis, postgres, upstash, azure-blob, dynamodb, cloudflare, got "mysql"/,
    );
  });

  it("a wrong token or URL exits non-zero and never prints the secret", async () => {
    const secret = `wrong-${crypto.randomUUID()}`;
    const wrong = { ...upstashEnv, UPSTASH_REDIS_REST_TOKEN: secret };
    const redisUrl = `redis://default:${secret}@127.0.0.1:6379`;
    const runs = [
      cli(["status", "--name", "x"], { env: wrong }),
      cli(["exec", "--name", "x", "--", "true"], { env: wrong }),
      cli(["lead", "--name", "x", "--", "true"], { env: wrong }),
      cli(["status", "--name", "x"], { env: { ...upstashEnv, UPSTASH_REDIS_REST_URL: redisUrl } }),
    ];
    expect(await Promise.all(runs.map((r) => r.status))).toEqual([2, 2, 2, 2]);
    for (const r of runs.slice(0, 3)) expect(r.stderr).toMatch(/authentication failed \(HTTP 401\)/);
    expect(runs[3]!.stderr).toMatch(/http\(s\) URL.*REST URL/);
    for (const r of runs) {
      expect(r.stdout + r.stderr).not.toContain(secret);
      expect(r.stdout).not.toContain("leasehold:");
    }
  });

  it('a token with " and \\ in an unexpected reply is redacted on stderr in every form', async () => {
    const odd = `tok"en\\cli${crypto.randomUUID().slice(0, 8)}`;
    const quoting = createHttpServer((req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ result: { echo: `${req.headers.authorization}`, odd } }));
    });
    await new Promise<void>((r) => quoting.listen(0, "127.0.0.1", r));
    try {
      const url = `http://127.0.0.1:${(quoting.address() as AddressInfo).port}`;
      const run = cli(["status", "--name", unique("odd")], {
        env: { ...bare, UPSTASH_REDIS_REST_URL: url, UPSTASH_REDIS_REST_TOKEN: odd },
      });
      expect(await run.status).toBe(69);
      expect(run.stderr).toMatch(/unexpected reply: .*\[redacted\]/);
      for (const form of [odd, JSON.stringify(odd).slice(1, -1), encodeURIComponent(odd)]) {
        expect(run.stderr).not.toContain(form);
      }
    } finally {
      quoting.close();
    }
  });

  it("an unreachable backend exits 69", async () => {
    const r = cli(["status", "--name", "x"], {
      env: { ...upstashEnv, UPSTASH_REDIS_REST_URL: "http://127.0.0.1:9" },
    });
    expect(await r.status).toBe(69);
    expect(r.stderr).toMatch(/request failed/);
    expect(r.stderr).not.toContain(ctx.token);
  });
});

describe("an unreachable backend is not a taken lock", () => {
  const deadEnv = async () => ({
    ...upstashEnv,
    UPSTASH_REDIS_REST_URL: `http://127.0.0.1:${await closedPort()}`,
  });

  it("exec --wait --timeout on a refused connection exits 69 and says why, even with --quiet", async () => {
    const run = cli(["exec", "--name", unique("dead"), "--quiet", "--timeout", "500", "--", "true"], {
      env: await deadEnv(),
    });
    expect(await run.status).toBe(69);
    expect(run.stderr).toMatch(/could not reach the backend within 500 ms: .*request failed/);
    expect(run.stderr).not.toMatch(/still taken/);
  });

  it("exec --wait --timeout on a server that never answers exits 69: no answer", async () => {
    const sockets: Socket[] = [];
    const server = createServer((s) => sockets.push(s));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const run = cli(["exec", "--name", unique("silent"), "--timeout", "500", "--", "true"], {
        env: { ...upstashEnv, UPSTASH_REDIS_REST_URL: url },
      });
      expect(await run.status).toBe(69);
      expect(run.stderr).toMatch(/could not reach the backend within 500 ms: .*no answer/);
    } finally {
      for (const s of sockets) s.destroy();
      server.close();
    }
  });

  it("exec --wait and lead report failures while they wait, at most one line per 10 s", async () => {
    const env = await deadEnv();
    const waiting = cli(["exec", "--name", unique("dead-wait"), "--wait", "--", "true"], { env });
    const leading = cli(["lead", "--name", unique("dead-lead"), "--", "true"], { env });
    const line = /the backend failed: .*request failed.*; retrying/;
    // The first report comes with the first failure (however late a loaded machine starts the
    // process); then the retries, about one a second, stay quiet for 10 s.
    const end = performance.now() + 20_000;
    while (![waiting, leading].every((run) => line.test(run.stderr)) && performance.now() < end)
      await sleep(50);
    await sleep(3_000);
    for (const run of [waiting, leading]) {
      expect(run.child.exitCode).toBeNull();
      expect(run.stderr.match(new RegExp(line.source, "g"))).toHaveLength(1);
    }
  });

  it("--timeout 0 takes a free lock", async () => {
    const run = cli(["exec", "--name", unique("zero"), "--timeout", "0", "--", "sh", "-c", "echo ran"]);
    expect(await run.status).toBe(0);
    expect(run.stdout).toBe("ran\n");
  });
});
