// Every store a command line reaches (cli/backend.ts): redis (leasehold's own RESP client, with
// a password and a second database), postgres (its own client too), dynamodb (dynalite) and the
// Durable Object's route (workerd), each against its real server: status, exec, exec --once, the
// backend printed, a wrong password or an unreachable host, and ambiguous configuration refused.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import {
  type AddressInfo,
  createServer as createTcpServer,
  type Socket,
  connect as tcpConnect,
} from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer as createTlsServer, TLSSocket } from "node:tls";
import IORedis from "ioredis";
import pg from "pg";
import { afterAll, afterEach, describe, expect, inject, it } from "vitest";
import type { Backend } from "../../src/backend.ts";
import { durableObject } from "../../src/backends/cloudflare/index.ts";
import { dynamodb } from "../../src/backends/dynamodb/index.ts";
import { postgres } from "../../src/backends/postgres/index.ts";
import { redis } from "../../src/backends/redis/index.ts";
import { createMutex } from "../../src/index.ts";
import { bare, cli, closedPort, sh, sleep, stopChildren, unique } from "../harness/cli.ts";
import { selfSigned } from "../harness/servers/azurite.ts";
import { startPostgres } from "../harness/servers/postgres.ts";
import { startTcpFaultProxy } from "../harness/servers/tcp-fault-proxy.ts";

afterEach(stopChildren);

const r = inject("redis");
const pgc = inject("postgres");
const dyn = inject("dynamodb");
const cf = inject("cloudflare");

const ioredis = new IORedis(`${r.url}/1`, { lazyConnect: false });
const pool = new pg.Pool({ connectionString: pgc.url, max: 2 });
const table = `cli_stores_${crypto.randomUUID().slice(0, 8)}`;
afterAll(async () => {
  ioredis.disconnect();
  await pool.query(`DROP TABLE IF EXISTS "${table}"`).catch(() => {});
  await pool.end();
});

interface Store {
  name: string;
  env: Record<string, string | undefined>;
  /** The same store through the library, to hold a lock the CLI must see. */
  backend: () => Backend;
  label: RegExp;
  args?: string[];
}

const STORES: Store[] = [
  {
    name: "redis",
    // The ACL user and its password, on database 1: the holder below uses database 1 too.
    env: { ...bare, REDIS_URL: `${r.url}/1` },
    backend: () => redis(ioredis),
    label: new RegExp(`redis at 127\\.0\\.0\\.1:${r.port}, database 1`),
  },
  {
    name: "postgres",
    env: { ...bare, DATABASE_URL: pgc.url, LEASEHOLD_POSTGRES_TABLE: table },
    backend: () => postgres(pool, { table, createTable: true }),
    label: new RegExp(
      `postgres at 127\\.0\\.0\\.1:${pgc.port}/postgres, table ${table} \\(sslmode prefer\\)`,
    ),
    args: ["--create-table"],
  },
  {
    name: "dynamodb",
    env: {
      ...bare,
      AWS_REGION: dyn.region,
      AWS_ACCESS_KEY_ID: dyn.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: dyn.credentials.secretAccessKey,
      AWS_ENDPOINT_URL_DYNAMODB: dyn.endpoint,
      LEASEHOLD_DYNAMODB_TABLE: dyn.table,
    },
    backend: () =>
      dynamodb({
        table: dyn.table,
        region: dyn.region,
        credentials: dyn.credentials,
        endpoint: dyn.endpoint,
      }),
    label: new RegExp(`dynamodb table ${dyn.table} in ${dyn.region} at http://127\\.0\\.0\\.1:\\d+`),
  },
  {
    name: "cloudflare",
    env: { ...bare, LEASEHOLD_DO_URL: cf.url, LEASEHOLD_DO_SECRET: cf.token },
    backend: () => durableObject({ url: cf.url, token: cf.token }),
    label: /cloudflare at http:\/\/127\.0\.0\.1:\d+\/leasehold/,
  },
];

describe.each(STORES)("the $name backend", (store) => {
  const run = (args: string[], script?: string) =>
    cli([...args, ...(store.args ?? []), ...(script === undefined ? [] : ["--", "sh", "-c", script])], {
      env: store.env,
    });

  it("status prints free, then the holder, and which backend; --verbose says it too", async () => {
    const name = unique(store.name);
    const free = run(["status", "--name", name, "--verbose"]);
    expect(await free.status).toBe(0);
    expect(free.stdout).toMatch(new RegExp(`^"${name}" is free on ${store.label.source}\\n$`));
    expect(free.stderr).toMatch(new RegExp(`^leasehold: using ${store.label.source}\\n$`));
    const lease = await createMutex(store.backend(), { name, ttl: 10_000, owner: "held-here" }).acquire({
      timeout: 10_000,
    });
    try {
      const held = run(["status", "--name", name, "--json"]);
      expect(await held.status).toBe(0);
      expect(JSON.parse(held.stdout)).toMatchObject({
        name,
        holder: { owner: "held-here", token: lease.token },
        backend: expect.stringMatching(store.label),
      });
      // Held elsewhere: exec makes one attempt and exits 75 without running the command.
      const taken = run(["exec", "--name", name], "echo ran");
      expect(await taken.status).toBe(75);
      expect(taken.stdout).toBe("");
    } finally {
      await lease.release();
    }
  });

  it("exec runs the command under the lock; exec --once runs a fire once", async () => {
    const name = unique(store.name);
    const ran = run(["exec", "--name", name], 'echo "token $LEASEHOLD_TOKEN"');
    expect(await ran.status).toBe(0);
    expect(ran.stdout).toMatch(/^token \d+\n$/);
    const first = run(["exec", "--once", "--fire", "f1", "--name", name], "echo once");
    expect(await first.status).toBe(0);
    expect(first.stdout).toBe("once\n");
    const again = run(["exec", "--once", "--fire", "f1", "--name", name], "echo once");
    expect(await again.status).toBe(0);
    expect(again.stdout).toBe("");
    expect(again.stderr).toMatch(/already done/);
  });

  it("lead runs the command while leading and exits 0 on SIGTERM, releasing the lock", async () => {
    const name = unique(store.name);
    const leading = run(["lead", "--name", name], "echo leading; exec sleep 60");
    await leading.printed("leading", 1, 20_000);
    leading.child.kill("SIGTERM");
    expect(await leading.status).toBe(0);
    const after = run(["status", "--name", name]);
    expect(await after.status).toBe(0);
    expect(after.stdout).toMatch(/ is free on /);
  });
});

describe("connection problems", () => {
  it("a wrong password exits 2 (redis, postgres) and is never printed", async () => {
    const wrong = `wrong-${crypto.randomUUID()}`;
    const runs = [
      cli(["status", "--name", "x"], {
        env: { ...bare, REDIS_URL: `redis://${r.username}:${wrong}@127.0.0.1:${r.port}/1` },
      }),
      cli(["status", "--name", "x"], {
        env: { ...bare, DATABASE_URL: pgc.url.replace(`:${pgc.password}@`, `:${wrong}@`) },
      }),
    ];
    expect(await Promise.all(runs.map((x) => x.status))).toEqual([2, 2]);
    expect(runs[0]!.stderr).toMatch(/WRONGPASS/);
    expect(runs[1]!.stderr).toMatch(/password authentication failed/);
    for (const x of runs) expect(x.stdout + x.stderr).not.toContain(wrong);
  });

  it("an unreachable host exits 69 (redis, postgres)", async () => {
    const [a, b] = [await closedPort(), await closedPort()];
    const runs = [
      cli(["status", "--name", "x"], { env: { ...bare, REDIS_URL: `redis://127.0.0.1:${a}` } }),
      cli(["status", "--name", "x"], {
        env: { ...bare, DATABASE_URL: `postgres://u:p@127.0.0.1:${b}/db` },
      }),
    ];
    expect(await Promise.all(runs.map((x) => x.status))).toEqual([69, 69]);
    expect(runs[0]!.stderr).toMatch(/ECONNREFUSED/);
    expect(runs[1]!.stderr).toMatch(/ECONNREFUSED/);
  });

  it("a missing lock table exits 2 naming --create-table (postgres, dynamodb)", async () => {
    const missing = `cli_missing_${crypto.randomUUID().slice(0, 8)}`;
    const dynamoEnv = STORES.find((s) => s.name === "dynamodb")!.env;
    const runs = [
      cli(["exec", "--name", "x", "--", "true"], {
        env: { ...bare, DATABASE_URL: pgc.url, LEASEHOLD_POSTGRES_TABLE: missing },
      }),
      cli(["exec", "--name", "x", "--", "true"], {
        env: { ...dynamoEnv, LEASEHOLD_DYNAMODB_TABLE: missing },
      }),
    ];
    // Configuration, not an unreachable backend (it exited 69).
    expect(await Promise.all(runs.map((x) => x.status))).toEqual([2, 2]);
    for (const x of runs) {
      expect(x.stderr).toMatch(/does not exist.*pass --create-table/);
      expect(x.stderr).not.toContain("createTable: true");
    }
  });

  it("exec --shared on a store that cannot hold shared leases exits 2 before taking anything (dynamodb)", async () => {
    const run = cli(["exec", "--shared", "--name", unique("shared-refused"), "--", "echo RAN"], {
      env: STORES.find((s) => s.name === "dynamodb")!.env,
    });
    expect(await run.status).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(/--shared: the dynamodb backend cannot hold shared leases/);
  });

  it("a bad URL is a usage error naming the variable", async () => {
    const runs = [
      cli(["status", "--name", "x"], { env: { ...bare, REDIS_URL: "http://127.0.0.1:6379" } }),
      cli(["status", "--name", "x", "--backend", "postgres"], {
        env: { ...bare, DATABASE_URL: "mysql://u:p@h/db" },
      }),
      cli(["status", "--name", "x", "--backend", "dynamodb"], { env: bare }),
      // A %-escape that is not UTF-8 in the password: said so, without the password.
      cli(["status", "--name", "x"], {
        env: { ...bare, REDIS_URL: "redis://u:s3cr%E0%A4%A@127.0.0.1:6379" },
      }),
      cli(["status", "--name", "x"], { env: { ...bare, DATABASE_URL: "postgres://u:s3cr%E0%A4%A@h/db" } }),
      // A NUL ends a startup parameter: the rest would be read as another one.
      cli(["status", "--name", "x"], { env: { ...bare, DATABASE_URL: "postgres://u%00options:p@h/db" } }),
      // redis-py reads ?db=2: ignored, it would put this host on database 0 and others on 2.
      cli(["status", "--name", "x"], { env: { ...bare, REDIS_URL: "redis://127.0.0.1:6379?db=2" } }),
    ];
    expect(await Promise.all(runs.map((x) => x.status))).toEqual([2, 2, 2, 2, 2, 2, 2]);
    expect(runs[6]!.stderr).toMatch(
      /REDIS_URL: has the parameter db, which leasehold does not read \(none are: the database goes in the path, \/2/,
    );
    expect(runs[5]!.stderr).toMatch(
      /DATABASE_URL: has a NUL \(%00\) in its user name, which PostgreSQL cannot take/,
    );
    for (const [i, variable] of [
      [3, "REDIS_URL"],
      [4, "DATABASE_URL"],
    ] as const) {
      expect(runs[i]!.stderr).toMatch(
        new RegExp(`${variable}: has a %-escape in its password that is not UTF-8 \\(escape each byte`),
      );
      expect(runs[i]!.stderr).not.toContain("s3cr");
    }
    expect(runs[0]!.stderr).toMatch(/REDIS_URL: must start with redis:\/\/ or rediss:\/\//);
    expect(runs[1]!.stderr).toMatch(/DATABASE_URL: must start with postgres:\/\//);
    expect(runs[2]!.stderr).toMatch(/needs --table \(or LEASEHOLD_DYNAMODB_TABLE\)/);
  });
});

describe("ambiguous configuration", () => {
  it("two stores' variables and no --backend exits 2 naming both; --backend chooses", async () => {
    const env = { ...bare, REDIS_URL: r.url, DATABASE_URL: pgc.url };
    const refused = cli(["status", "--name", "x"], { env });
    expect(await refused.status).toBe(2);
    expect(refused.stderr).toMatch(
      /more than one backend is configured \(REDIS_URL: redis; DATABASE_URL: postgres\): choose one with --backend redis\|postgres/,
    );
    expect(refused.stderr).not.toContain(r.password);
    const chosen = cli(["status", "--name", unique("chosen"), "--backend", "redis"], { env });
    expect(await chosen.status).toBe(0);
    expect(chosen.stdout).toMatch(/is free on redis at .*, database 0\n$/);
  });
});

describe("leasehold's Redis client", () => {
  it("rediss:// speaks TLS, trusting NODE_EXTRA_CA_CERTS, and refuses a certificate it cannot verify", async () => {
    // A TLS terminator with a throwaway self-signed certificate in front of the shared redis-server.
    const dir = mkdtempSync(join(tmpdir(), "cli-tls-"));
    const pems = selfSigned(dir);
    if (pems === null) throw new Error("openssl is needed to make a test certificate");
    const { key, cert } = pems;
    const server = createTlsServer({ key: readFileSync(key), cert: readFileSync(cert) }, (socket) => {
      const upstream = tcpConnect({ host: "127.0.0.1", port: r.port });
      socket.pipe(upstream).pipe(socket);
      socket.on("error", () => upstream.destroy());
      upstream.on("error", () => socket.destroy());
    });
    await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
    try {
      const port = (server.address() as { port: number }).port;
      const env = { ...bare, REDIS_URL: `rediss://${r.username}:${r.password}@127.0.0.1:${port}/1` };
      const trusted = cli(["status", "--name", unique("tls")], {
        env: { ...env, NODE_EXTRA_CA_CERTS: cert },
      });
      const untrusted = cli(["status", "--name", unique("tls")], { env });
      // Configuration, not an outage: --wait does not retry it until --timeout.
      const waiting = cli(["exec", "--wait", "--timeout", "30000", "--name", unique("tls"), "--", "true"], {
        env,
      });
      const start = performance.now();
      expect(await trusted.status, trusted.stderr).toBe(0);
      expect(trusted.stdout).toMatch(
        new RegExp(`is free on redis at 127\\.0\\.0\\.1:${port}, database 1 \\(TLS\\)\\n$`),
      );
      expect(await untrusted.status).toBe(2);
      expect(untrusted.stderr).toMatch(/TLS 127\.0\.0\.1:\d+: self[- ]signed certificate/);
      expect(await waiting.status, waiting.stderr).toBe(2);
      expect(performance.now() - start).toBeLessThan(20_000);
    } finally {
      server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("leasehold's clients after a broken connection", () => {
  it.each([
    {
      store: "redis",
      port: r.port,
      env: (port: number) => ({ REDIS_URL: `redis://${r.username}:${r.password}@127.0.0.1:${port}/1` }),
      holder: () => redis(ioredis),
    },
    {
      store: "postgres",
      port: pgc.port,
      env: (port: number) => ({
        DATABASE_URL: `postgres://${pgc.user}:${pgc.password}@127.0.0.1:${port}/postgres?sslmode=disable`,
        LEASEHOLD_POSTGRES_TABLE: table,
      }),
      holder: () => postgres(pool, { table, createTable: true }),
    },
  ])("$store: makes a new one, so exec --wait takes the lock once it is free", async (c) => {
    const proxy = await startTcpFaultProxy(c.port);
    const name = unique("reconnect");
    const lease = await createMutex(c.holder(), { name, ttl: 20_000 }).acquire({ timeout: 10_000 });
    try {
      const waiting = sh(
        ["exec", "--create-table", "--name", name, "--wait", "--timeout", "25000", "--retry-delay", "300"],
        "echo ran",
        { env: { ...bare, ...c.env(proxy.port) } },
      );
      // Every connection it makes is reset at its first byte for a while (it keeps trying)...
      proxy.setFaults({ seed: 1, delay: 0, reset: 1, partition: 0, delayMs: [0, 0], partitionMs: [0, 0] });
      const end = performance.now() + 15_000;
      while (proxy.counts().reset < 2 && performance.now() < end) await sleep(50);
      expect(proxy.counts().reset).toBeGreaterThanOrEqual(2);
      proxy.setFaults(undefined);
      // ...then the lock is freed: the next attempt, on a new connection, takes it.
      await lease.release();
      expect(await waiting.status, waiting.stderr).toBe(0);
      expect(waiting.stdout).toBe("ran\n");
    } finally {
      await lease.release();
      await proxy.stop();
    }
  });
});

describe("leasehold's PostgreSQL client", () => {
  it("sslmode: TLS when the server offers it (verify-full checks the certificate), refused when required and not offered", async () => {
    // A proxy that answers PostgreSQL's SSLRequest with S, speaks TLS with a throwaway
    // certificate, and passes the plain protocol on to the shared server.
    const dir = mkdtempSync(join(tmpdir(), "cli-pgtls-"));
    const pems = selfSigned(dir);
    if (pems === null) throw new Error("openssl is needed to make a test certificate");
    const sockets: Socket[] = [];
    let tlsSessions = 0;
    const proxy = createTcpServer((socket) => {
      sockets.push(socket);
      socket.once("data", (first: Buffer) => {
        if (first.length !== 8 || first.readInt32BE(4) !== 80877103) {
          socket.destroy();
          return;
        }
        socket.write("S");
        const secure = new TLSSocket(socket, {
          isServer: true,
          key: readFileSync(pems.key),
          cert: readFileSync(pems.cert),
        });
        secure.once("secure", () => tlsSessions++);
        const upstream = tcpConnect({ host: "127.0.0.1", port: pgc.port });
        sockets.push(upstream);
        secure.pipe(upstream).pipe(secure);
        secure.on("error", () => upstream.destroy());
        upstream.on("error", () => secure.destroy());
      });
    });
    await new Promise<void>((ok) => proxy.listen(0, "127.0.0.1", ok));
    try {
      const port = (proxy.address() as AddressInfo).port;
      const url = (mode: string, p = port) =>
        `postgres://${pgc.user}:${pgc.password}@127.0.0.1:${p}/postgres?sslmode=${mode}`;
      const env = (mode: string, p?: number) => ({
        ...bare,
        DATABASE_URL: url(mode, p),
        LEASEHOLD_POSTGRES_TABLE: table,
        NODE_EXTRA_CA_CERTS: pems.cert,
      });
      const runs = [
        cli(["status", "--create-table", "--name", unique("tls")], { env: env("verify-full") }),
        cli(["status", "--create-table", "--name", unique("tls")], { env: env("require") }),
        cli(["status", "--create-table", "--name", unique("tls")], {
          env: { ...env("verify-full"), NODE_EXTRA_CA_CERTS: undefined },
        }),
        // The shared server offers no TLS: plain with prefer, refused with require.
        cli(["status", "--create-table", "--name", unique("tls")], { env: env("prefer", pgc.port) }),
        cli(["status", "--create-table", "--name", unique("tls")], { env: env("require", pgc.port) }),
      ];
      const statuses = await Promise.all(runs.map((x) => x.status));
      // An untrusted certificate and TLS required but not offered are configuration: 2, not retried.
      expect(statuses, runs.map((x) => x.stderr).join("\n")).toEqual([0, 0, 2, 0, 2]);
      expect(tlsSessions).toBe(2);
      expect(runs[0]!.stdout).toMatch(/is free on postgres at .*\(sslmode verify-full\)\n$/);
      expect(runs[2]!.stderr).toMatch(/TLS: self[- ]signed certificate/);
      expect(runs[4]!.stderr).toMatch(/does not accept TLS, and sslmode=require requires it/);
      for (const x of runs) expect(x.stdout + x.stderr).not.toContain(pgc.password);
    } finally {
      for (const s of sockets) s.destroy();
      proxy.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("leasehold's PostgreSQL client: md5 and cleartext passwords", () => {
  it.each(["md5", "password"] as const)("logs in where pg_hba asks for %s", async (auth) => {
    const server = await startPostgres({ auth });
    try {
      if (auth === "md5") {
        // Stored as md5 (not SCRAM, which the server would then use instead), so md5 is spoken.
        const c = new pg.Client({ connectionString: server.url });
        await c.connect();
        await c.query("SET password_encryption = 'md5'");
        await c.query(`ALTER ROLE postgres PASSWORD '${server.password}'`);
        await c.end();
      }
      // Without TLS, a password (or its md5) is sent only when require_auth asks for it.
      const env = {
        ...bare,
        DATABASE_URL: `${server.url}?sslmode=disable&require_auth=${auth}`,
        LEASEHOLD_POSTGRES_TABLE: "cli_auth",
      };
      const refused = cli(["status", "--name", "x"], {
        env: { ...env, DATABASE_URL: `${server.url}?sslmode=disable` },
      });
      const ok = cli(["exec", "--create-table", "--name", unique(auth), "--", "sh", "-c", "echo ran"], {
        env,
      });
      const wrong = cli(["status", "--name", "x"], {
        env: { ...env, DATABASE_URL: env.DATABASE_URL.replace(server.password, "wrong-password") },
      });
      expect(await ok.status, ok.stderr).toBe(0);
      expect(ok.stdout).toBe("ran\n");
      expect(await wrong.status).toBe(2);
      expect(wrong.stderr).toMatch(/password authentication failed/);
      expect(await refused.status).toBe(2);
      expect(refused.stderr).toMatch(new RegExp(`or with require_auth=${auth} in DATABASE_URL`));
    } finally {
      await server.stop();
    }
  });
});

describe("a server that stops answering", () => {
  it("redis and postgres: the connection is dropped after 10 s without an answer, and exec exits 69", async () => {
    const proxies = [await startTcpFaultProxy(r.port), await startTcpFaultProxy(pgc.port)];
    try {
      // Connected, then nothing passes either way (a partition): the client's own bound ends
      // the wait. exec with a 60 s ttl, whose attempt's own bound is far longer (status gives
      // up after 3 s: test/cli/bounds.test.ts).
      const envs = [
        { ...bare, REDIS_URL: `redis://${r.username}:${r.password}@127.0.0.1:${proxies[0]!.port}/1` },
        {
          ...bare,
          DATABASE_URL: `postgres://${pgc.user}:${pgc.password}@127.0.0.1:${proxies[1]!.port}/postgres?sslmode=disable`,
          LEASEHOLD_POSTGRES_TABLE: table,
        },
      ];
      for (const p of proxies) p.partition();
      const start = performance.now();
      const runs = envs.map((env) =>
        cli(["exec", "--name", unique("silent"), "--ttl", "60000", "--", "true"], { env }),
      );
      expect(await Promise.all(runs.map((x) => x.status))).toEqual([69, 69]);
      expect(performance.now() - start).toBeLessThan(25_000);
      for (const x of runs) expect(x.stderr).toMatch(/no answer from 127\.0\.0\.1:\d+ within 10000 ms/);
    } finally {
      for (const p of proxies) {
        p.heal();
        await p.stop();
      }
    }
  });
});
