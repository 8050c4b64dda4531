// leasehold's own PostgreSQL and Redis clients (cli/pgwire.ts, cli/resp.ts) against servers that
// misbehave: a server that closes, never answers or trickles traffic, an impostor that skips
// SCRAM's proof or asks for the password in clear, garbled replies. Those are FAKE servers
// (node:net, in this file): only a broken or hostile server shows these behaviours. A refused
// Redis login, SASLprep and connections the server ends run against the real redis-server and
// PostgreSQL server the harness starts.
import { Buffer } from "node:buffer";
import { createHash, createHmac, pbkdf2Sync, randomBytes } from "node:crypto";
import { type AddressInfo, createServer, type Server, type Socket } from "node:net";
import IORedis from "ioredis";
import pg from "pg";
import { afterAll, afterEach, describe, expect, inject, it } from "vitest";
import { PostgresError, parsePostgresUrl, postgresClient, saslprep } from "../../cli/pgwire.ts";
import { parseRedisUrl, redisClient } from "../../cli/resp.ts";
import { bare, cli, sleep, stopChildren, unique } from "../harness/cli.ts";

afterEach(stopChildren);

const servers: Server[] = [];
const sockets: Socket[] = [];
const timers: NodeJS.Timeout[] = [];
afterAll(() => {
  for (const t of timers) clearInterval(t);
  for (const s of sockets) s.destroy();
  for (const s of servers) s.close();
});

/** A fake server on a loopback port: `onSocket` plays the server's part. */
async function fake(onSocket: (socket: Socket) => void): Promise<number> {
  const server = createServer((socket) => {
    sockets.push(socket);
    socket.on("error", () => {});
    onSocket(socket);
  });
  servers.push(server);
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  return (server.address() as AddressInfo).port;
}

const int32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
};
const pgMessage = (type: string, body: Buffer) =>
  Buffer.concat([Buffer.from(type), int32(body.length + 4), body]);
const auth = (code: number, data = "") => pgMessage("R", Buffer.concat([int32(code), Buffer.from(data)]));
const ready = pgMessage("Z", Buffer.from("I"));

/**
 * A fake PostgreSQL server: answers the SSLRequest with N, then calls `step` with each message the
 * client sends after its startup message (`p` messages: the password, SCRAM's), `n` counting
 * from 0, and writes what it returns; `startup` is written after the startup message.
 */
function fakePostgres(
  startup: Buffer,
  step: (body: Buffer, n: number, socket: Socket) => Buffer | undefined,
) {
  const received: Buffer[] = [];
  const sockets: Socket[] = [];
  const port = fake((socket) => {
    sockets.push(socket);
    let buffer = Buffer.alloc(0);
    let phase = 0; // 0: SSLRequest or startup, 1: startup read, messages follow
    socket.on("data", (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        if (phase === 0) {
          if (buffer.length < 8) return;
          const length = buffer.readInt32BE(0);
          if (buffer.length < length) return;
          const ssl = length === 8 && buffer.readInt32BE(4) === 80877103;
          buffer = buffer.subarray(length);
          if (ssl) socket.write("N");
          else {
            phase = 1;
            socket.write(startup);
          }
          continue;
        }
        if (buffer.length < 5) return;
        const length = buffer.readInt32BE(1);
        if (buffer.length < length + 1) return;
        const body = buffer.subarray(5, length + 1);
        buffer = buffer.subarray(length + 1);
        received.push(body);
        const answer = step(body, received.length - 1, socket);
        if (answer) socket.write(answer);
      }
    });
  });
  return { port, received, sockets };
}

const pgEnv = (port: number, query = "") => ({
  ...bare,
  DATABASE_URL: `postgres://leasehold:s3cret-password@127.0.0.1:${port}/db${query}`,
});

describe("leasehold's PostgreSQL client: a server that closes or never answers", () => {
  it("with the default sslmode, status and exec exit 69 within the bound and run nothing", async () => {
    // Accepts, then closes at once: the SSLRequest's answer never comes. This exited 0 having done
    // nothing (the wait was never settled and the event loop emptied).
    const closing = await fake((socket) => socket.destroy());
    // Accepts and never answers: this waited forever.
    const silent = await fake(() => {});
    const start = performance.now();
    const runs = [
      cli(["status", "--name", "x"], { env: pgEnv(closing) }),
      cli(["exec", "--name", unique("pg"), "--", "echo", "RAN"], { env: pgEnv(closing) }),
      cli(["status", "--name", "x"], { env: pgEnv(silent) }),
      cli(["exec", "--name", unique("pg"), "--", "echo", "RAN"], { env: pgEnv(silent) }),
      // exec: status gives up after its own 3 s bound (max(ttl/5, 1 s)), before connect_timeout.
      cli(["exec", "--name", unique("pg"), "--", "echo", "RAN"], {
        env: pgEnv(silent, "?connect_timeout=2"),
      }),
    ];
    const fast = await runs[4]!.status;
    expect(fast, runs[4]!.stderr).toBe(69);
    expect(performance.now() - start).toBeLessThan(9_000); // connect_timeout=2, not the default 10 s
    expect(runs[4]!.stderr).toMatch(/no answer from 127\.0\.0\.1:\d+ within 2000 ms \(connect_timeout\)/);
    const statuses = await Promise.all(runs.map((x) => x.status));
    expect(statuses, runs.map((x) => x.stderr).join("\n")).toEqual([69, 69, 69, 69, 69]);
    expect(performance.now() - start).toBeLessThan(25_000);
    for (const x of runs) expect(x.stdout).toBe("");
    // A close, or a reset when the SSLRequest reached the closing socket first.
    for (const x of runs.slice(0, 2))
      expect(x.stderr).toMatch(/connection to 127\.0\.0\.1:\d+ closed|127\.0\.0\.1:\d+: read ECONNRESET/);
    expect(runs[2]!.stderr).toMatch(/\[postgres\] inspect got no answer within 3000 ms/);
    expect(runs[3]!.stderr).toMatch(/no answer from 127\.0\.0\.1:\d+ within 10000 ms \(connect_timeout\)/);
  }, 40_000);

  it("exec --wait against a server that closes at once gives up at --timeout with 69", async () => {
    const closing = await fake((socket) => socket.destroy());
    const run = cli(["exec", "--wait", "--timeout", "3000", "--name", unique("pg"), "--", "echo", "RAN"], {
      env: pgEnv(closing),
    });
    expect(await run.status, run.stderr).toBe(69);
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(/could not reach the backend within 3000 ms/);
  });

  it("connect_timeout must be a whole number of seconds (0, waiting forever, is refused)", async () => {
    const run = cli(["status", "--name", "x"], { env: pgEnv(5432, "?connect_timeout=0") });
    expect(await run.status).toBe(2);
    expect(run.stderr).toMatch(
      /DATABASE_URL: connect_timeout must be a whole number of seconds from 1 to 3600/,
    );
  });
});

const PASSWORD = "s3cret-password";

/** SCRAM's server-first message for the client-first `body` (a SASLInitialResponse). */
function serverFirst(body: Buffer, iterations = 4096): string {
  const clientFirst = body.toString("utf8", body.indexOf(0) + 1 + 4); // mechanism\0, int32 length
  const nonce = /r=([^,]+)/.exec(clientFirst)![1]!;
  return `r=${nonce}${randomBytes(9).toString("base64")},s=${randomBytes(16).toString("base64")},i=${iterations}`;
}

describe("leasehold's PostgreSQL client: a server that does not know the password (an impostor)", () => {
  it("refuses AuthenticationOk before the SCRAM signature, a switch to a cleartext password, and absurd iteration counts", async () => {
    const sasl = auth(10, "SCRAM-SHA-256\0\0");
    // R10 → R11 → R0: skips SASLFinal, whose signature proves the server knows the password.
    const skips = fakePostgres(sasl, (body, n) =>
      n === 0 ? auth(11, serverFirst(body)) : Buffer.concat([auth(0), ready]),
    );
    // R10 → R11 → R3: asks for the password in clear once SCRAM began.
    const switches = fakePostgres(sasl, (body, n) => (n === 0 ? auth(11, serverFirst(body)) : auth(3)));
    // R10 → R11 with a billion iterations: pbkdf2 would block for minutes.
    const slow = fakePostgres(sasl, (body) => auth(11, serverFirst(body, 1_000_000_000)));
    // R10 → R0 at once.
    const early = fakePostgres(sasl, () => Buffer.concat([auth(0), ready]));
    const fakes = [skips, switches, slow, early];
    const start = performance.now();
    const runs = await Promise.all(
      fakes.map(async (f) => cli(["status", "--name", "x"], { env: pgEnv(await f.port) })),
    );
    const statuses = await Promise.all(runs.map((x) => x.status));
    // Exit 2 (configuration: not retried), at once.
    expect(statuses, runs.map((x) => x.stderr).join("\n")).toEqual([2, 2, 2, 2]);
    expect(performance.now() - start).toBeLessThan(8_000);
    expect(runs[0]!.stderr).toMatch(
      /sent AuthenticationOk out of order during the login \(at sasl-continued\)/,
    );
    expect(runs[1]!.stderr).toMatch(/sent a password request \(code 3\) out of order/);
    expect(runs[2]!.stderr).toMatch(/asks for 1000000000 iterations; leasehold does at most 600000/);
    expect(runs[3]!.stderr).toMatch(/sent AuthenticationOk out of order during the login \(at sasl\)/);
    // The password itself never reached a server (only SCRAM's proof did).
    for (const f of fakes)
      for (const body of f.received) expect(body.toString("latin1")).not.toContain(PASSWORD);
  });

  it("sends a cleartext password or md5 hash only over verified TLS or with require_auth", async () => {
    const asks = (code: number) =>
      fakePostgres(auth(code, code === 5 ? "salt" : ""), () =>
        pgMessage("E", Buffer.from("SFATAL\0C28P01\0Mno\0\0")),
      );
    const fakes = [asks(3), asks(5), asks(3)];
    const runs = await Promise.all(
      fakes.map(async (f, i) =>
        cli(["status", "--name", "x"], { env: pgEnv(await f.port, i === 2 ? "?require_auth=password" : "") }),
      ),
    );
    expect(await Promise.all(runs.map((x) => x.status))).toEqual([2, 2, 2]);
    expect(runs[0]!.stderr).toMatch(
      /asks for the password in clear text, which leasehold sends only over TLS with sslmode=verify-full, or with require_auth=password/,
    );
    expect(runs[1]!.stderr).toMatch(
      /asks for an md5 password hash, which leasehold sends only .*require_auth=md5/,
    );
    expect(fakes[0]!.received).toEqual([]);
    expect(fakes[1]!.received).toEqual([]);
    // Opted in: sent (and this fake refuses it).
    expect(runs[2]!.stderr).toMatch(/no \(SQLSTATE 28P01\)/);
    expect(fakes[2]!.received.map((b) => b.toString())).toEqual([`${PASSWORD}\0`]);
  });

  it("with a password in the URL, a server that asks for no authentication is refused unless verify-full or require_auth=none", async () => {
    // A fake that answers the startup with AuthenticationOk at once (trust): an impostor needs no
    // password for that. Its query answers are never reached when the login is refused.
    const trusting = () => fakePostgres(Buffer.concat([auth(0), ready]), () => undefined);
    const fakes = [trusting(), trusting()];
    const runs = await Promise.all(
      fakes.map(async (f, i) =>
        cli(["status", "--name", "x"], { env: pgEnv(await f.port, i === 1 ? "?require_auth=none" : "") }),
      ),
    );
    expect(await runs[0]!.status).toBe(2);
    expect(runs[0]!.stderr).toMatch(
      /asks for no authentication, which leasehold sends only over TLS with sslmode=verify-full/,
    );
    // Opted in: accepted (the fake then answers nothing to the statement, so this ends in 69 or 1,
    // never in 2 for the login).
    expect(await runs[1]!.status).not.toBe(2);
  });

  it("a SASLFinal whose signature does not match is refused with 2 (SCRAM's proof itself is right)", async () => {
    let proofOk = false;
    let first = "";
    let clientFirstBare = "";
    const f = fakePostgres(auth(10, "SCRAM-SHA-256\0\0"), (body, n) => {
      if (n === 0) {
        clientFirstBare = body.toString("utf8", body.indexOf(0) + 1 + 4).slice(3);
        first = serverFirst(body);
        return auth(11, first);
      }
      // Check the client's proof as PostgreSQL does, then sign with the wrong key.
      const final = body.toString("utf8");
      const withoutProof = final.slice(0, final.indexOf(",p="));
      const salted = pbkdf2Sync(
        PASSWORD,
        Buffer.from(/s=([^,]+)/.exec(first)![1]!, "base64"),
        4096,
        32,
        "sha256",
      );
      const clientKey = createHmac("sha256", salted).update("Client Key").digest();
      const stored = createHash("sha256").update(clientKey).digest();
      const signature = createHmac("sha256", stored)
        .update(`${clientFirstBare},${first},${withoutProof}`)
        .digest();
      const proof = Buffer.from(final.slice(final.indexOf(",p=") + 3), "base64");
      proofOk = Buffer.compare(Buffer.from(proof.map((b, i) => b ^ signature[i]!)), clientKey) === 0;
      return Buffer.concat([auth(12, `v=${randomBytes(32).toString("base64")}`), auth(0), ready]);
    });
    const run = cli(["status", "--name", "x"], { env: pgEnv(await f.port) });
    expect(await run.status).toBe(2);
    expect(proofOk).toBe(true);
    expect(run.stderr).toMatch(/SCRAM: the server's signature does not match/);
  });

  it("an ErrorResponse field without its NUL ends the login with the error (it looped forever)", async () => {
    const f = fakePostgres(pgMessage("E", Buffer.from("SFATAL\0C28000\0Mtruncated")), () => undefined);
    const run = cli(["status", "--name", "x"], { env: pgEnv(await f.port) });
    expect(await run.status).toBe(2);
    expect(run.stderr).toMatch(/the server refused \(SQLSTATE 28000\)/);
  });
});

const r = inject("redis");

describe("leasehold's Redis client", () => {
  const db0 = new IORedis(r.url);
  afterAll(() => db0.disconnect());

  it("a refused SELECT (a database the server does not have) exits 2 and sends no command", async () => {
    const name = unique("db99");
    // The scripts in the server's cache first (EVALSHA then succeeds at once, as on a busy server).
    const warm = cli(["exec", "--name", unique("warm"), "--", "true"], {
      env: { ...bare, REDIS_URL: r.url },
    });
    expect(await warm.status, warm.stderr).toBe(0);
    // The command was pipelined behind SELECT: it ran on database 0 and left the lock there.
    const run = cli(["exec", "--name", name, "--", "echo", "RAN"], {
      env: { ...bare, REDIS_URL: `${r.url}/99` },
    });
    expect(await run.status, run.stderr).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(/DB index is out of range \(REDIS_URL's SELECT\)/);
    expect(await db0.keys(`*${name}*`)).toEqual([]);
  });

  it("a garbled length ($abc) is a protocol error at once, not a wait", async () => {
    // A fake server (a real one never sends this).
    const port = await fake((socket) => socket.on("data", () => socket.write("$abc\r\n")));
    const start = performance.now();
    const run = cli(["status", "--name", "x"], { env: { ...bare, REDIS_URL: `redis://127.0.0.1:${port}` } });
    expect(await run.status).toBe(69);
    expect(performance.now() - start).toBeLessThan(8_000);
    expect(run.stderr).toMatch(/RESP: expected a whole number, got "abc"/);
  });
});

const pgc = inject("postgres");

describe("leasehold's PostgreSQL client: a connection the server ends", () => {
  it("during a statement: the server's FATAL error is reported (57P01, retryable), and the next statement reconnects", async () => {
    const client = postgresClient(parsePostgresUrl(`${pgc.url}?sslmode=disable`));
    try {
      // The session terminates itself: PostgreSQL sends FATAL 57P01, then closes.
      const { error } = await rejection(client.query("SELECT pg_terminate_backend(pg_backend_pid())", []));
      expect(error).toBeInstanceOf(PostgresError);
      expect((error as PostgresError).code).toBe("57P01");
      expect(error.message).toMatch(/terminating connection due to administrator command/);
      expect(await client.query("SELECT 3 AS three", [])).toEqual([{ three: "3" }]);
    } finally {
      await client.end();
    }
  });

  it("while idle: it is replaced before the next statement, which succeeds (it failed once first)", async () => {
    const app = unique("idle");
    const client = postgresClient(parsePostgresUrl(`${pgc.url}?sslmode=disable&application_name=${app}`));
    const admin = new pg.Client({ connectionString: pgc.url });
    await admin.connect();
    try {
      expect(await client.query("SELECT 1 AS one", [])).toEqual([{ one: "1" }]);
      // The server ends it (a restart, an idle timeout, an administrator): found by application_name.
      const ended = await admin.query(
        "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = $1",
        [app],
      );
      expect(ended.rows).toEqual([{ ok: true }]);
      await sleep(500); // the close reaches the client while it is idle
      expect(await client.query("SELECT 2 AS two", [])).toEqual([{ two: "2" }]);
    } finally {
      await admin.end();
      await client.end();
    }
  });
});

/** How long `p` took to reject, and its error (it must reject). */
async function rejection(p: Promise<unknown>): Promise<{ error: Error; ms: number }> {
  const start = performance.now();
  try {
    await p;
  } catch (error) {
    return { error: error as Error, ms: performance.now() - start };
  }
  throw new Error("expected a rejection");
}

/** Writes `piece` to `socket` every 2 s until the socket closes. */
function trickle(socket: Socket, piece: string | Buffer) {
  const timer = setInterval(() => {
    if (socket.destroyed) clearInterval(timer);
    else socket.write(piece);
  }, 2_000);
  timers.push(timer);
}

/** A PostgreSQL URL without a password: the fakes below log in with no authentication (trust). */
const trustUrl = (port: number, query = "") =>
  parsePostgresUrl(`postgres://leasehold@127.0.0.1:${port}/db?sslmode=disable${query}`);

describe("leasehold's own clients: one deadline per statement or command, from its send", () => {
  it("a server that trickles traffic but never answers fails the statement after 10 s (retryable), in both clients", async () => {
    // FAKE servers: a real one answers. PostgreSQL: logged in, then a NoticeResponse every 2 s for
    // the statement. Redis: the first bytes of a reply, then one byte every 2 s. The deadline was an
    // idle timer that each of these reset, so the CLI waited forever.
    const notice = pgMessage("N", Buffer.from("SNOTICE\0C00000\0Mstill working\0\0"));
    const pgFake = fakePostgres(Buffer.concat([auth(0), ready]), (_body, n, socket) => {
      if (n === 0) trickle(socket, notice);
      return undefined;
    });
    const pgNotices = postgresClient(trustUrl(await pgFake.port));
    const redisPort = await fake((socket) =>
      socket.once("data", () => {
        socket.write("$1000\r\n");
        trickle(socket, "x");
      }),
    );
    const redis = redisClient(parseRedisUrl(`redis://127.0.0.1:${redisPort}`));
    try {
      const [pgResult, redisResult] = await Promise.all([
        rejection(pgNotices.query("SELECT 1", [])),
        rejection(redis.send("PING", [])),
      ]);
      for (const { error, ms } of [pgResult, redisResult]) {
        expect(error.message).toMatch(/^no answer from 127\.0\.0\.1:\d+ within 10000 ms$/);
        expect(ms).toBeGreaterThan(9_500);
        expect(ms).toBeLessThan(18_000);
      }
      // Not a server's refusal: the backend retries it (a new connection).
      expect(pgResult.error).not.toBeInstanceOf(PostgresError);
    } finally {
      await pgNotices.end();
      redis.close();
    }
  }, 40_000);
});

describe("leasehold's Redis client: one deadline over connecting, TLS and AUTH/SELECT", () => {
  it("a TLS handshake or an AUTH reply that trickles bytes fails the connection after 10 s", async () => {
    // FAKE servers. TLS: a record header that announces 16 KiB, then one byte every 2 s (the
    // handshake never completes). AUTH: the first byte of a status reply, then one every 2 s.
    const tlsPort = await fake((socket) =>
      socket.once("data", () => {
        socket.write(Buffer.from([0x16, 0x03, 0x03, 0x40, 0x00]));
        trickle(socket, Buffer.from([0x02]));
      }),
    );
    const authPort = await fake((socket) =>
      socket.once("data", () => {
        socket.write("+");
        trickle(socket, "O");
      }),
    );
    const clients = [
      redisClient(parseRedisUrl(`rediss://127.0.0.1:${tlsPort}`)),
      redisClient(parseRedisUrl(`redis://:pw@127.0.0.1:${authPort}/2`)),
    ];
    try {
      const results = await Promise.all(clients.map((c) => rejection(c.send("PING", []))));
      expect(results[0]!.error.message).toMatch(
        /^no answer from 127\.0\.0\.1:\d+ within 10000 ms \(connecting, TLS\)$/,
      );
      expect(results[1]!.error.message).toMatch(
        /^no answer from 127\.0\.0\.1:\d+ within 10000 ms \(connecting, AUTH, SELECT\)$/,
      );
      for (const { ms } of results) {
        expect(ms).toBeGreaterThan(9_500);
        expect(ms).toBeLessThan(18_000);
      }
    } finally {
      for (const c of clients) c.close();
    }
  }, 40_000);
});

describe("leasehold's PostgreSQL client: end() and a message it cannot read", () => {
  it("a statement queued before end() rejects and opens no connection", async () => {
    // FAKE server (trust, then ReadyForQuery for each Sync; the second statement gets no answer):
    // it counts the connections the client opens.
    let statements = 0;
    const f = fakePostgres(Buffer.concat([auth(0), ready]), (body) =>
      body.length === 0 && ++statements === 1 ? ready : undefined,
    );
    const port = await f.port;
    // Queued and end() at once: neither statement may connect.
    const idle = postgresClient(trustUrl(port));
    const early = [idle.query("SELECT 1", []), idle.query("SELECT 2", [])];
    await idle.end();
    for (const q of early) await expect(q).rejects.toThrow(/end\(\) was called before this statement ran/);
    await sleep(300);
    expect(f.sockets.length).toBe(0);
    // One in flight on an open connection, one queued behind it: end() fails the first (its
    // connection closed) and the second never opens another.
    const busy = postgresClient(trustUrl(port));
    expect(await busy.query("SELECT 1", [])).toEqual([]);
    const inFlight = busy.query("SELECT 2", []);
    const queued = busy.query("SELECT 3", []);
    await sleep(300);
    await busy.end();
    await expect(inFlight).rejects.toThrow(/closed/);
    await expect(queued).rejects.toThrow(/end\(\) was called before this statement ran/);
    await sleep(300);
    expect(f.sockets.length).toBe(1);
  });

  it("a truncated DataRow fails the statement and closes the connection's socket", async () => {
    // FAKE server: a row of two columns whose first value claims 100 bytes and has 3.
    const row = Buffer.concat([Buffer.from([0, 2]), int32(100), Buffer.from("abc")]);
    const description = Buffer.concat([
      Buffer.from([0, 2]),
      ...["a", "b"].map((n) => Buffer.concat([Buffer.from(`${n}\0`), Buffer.alloc(18)])),
    ]);
    const f = fakePostgres(Buffer.concat([auth(0), ready]), (body) =>
      body.length === 0
        ? Buffer.concat([
            pgMessage("T", description),
            pgMessage("D", row),
            pgMessage("C", Buffer.from("SELECT 1\0")),
            ready,
          ])
        : undefined,
    );
    const client = postgresClient(trustUrl(await f.port));
    try {
      await expect(client.query("SELECT a, b", [])).rejects.toThrow(
        /^127\.0\.0\.1:\d+ sent a malformed DataRow: not PostgreSQL\?$/,
      );
      expect(f.sockets.length).toBe(1);
      // The server sees the connection closed (it stayed open, forgotten, before).
      await Promise.race([
        new Promise<void>((ok) => (f.sockets[0]!.destroyed ? ok() : f.sockets[0]!.once("close", ok))),
        sleep(5_000).then(() => {
          throw new Error("the client's socket stayed open");
        }),
      ]);
    } finally {
      await client.end();
    }
  });
});

/**
 * A FAKE PostgreSQL server that speaks SCRAM-SHA-256 correctly for `password` (it checks the
 * client's proof and signs with the right key) but sends `first(clientNonce)` as its server-first
 * message; then answers each statement with ReadyForQuery. `proofOk` says whether the proof was right.
 */
function scramFake(password: string, first: (clientNonce: string) => string) {
  let serverFirstText = "";
  let clientFirstBare = "";
  const state = { proofOk: false };
  const f = fakePostgres(auth(10, "SCRAM-SHA-256\0\0"), (body, n) => {
    if (n === 0) {
      clientFirstBare = body.toString("utf8", body.indexOf(0) + 1 + 4).slice(3);
      serverFirstText = first(/r=([^,]+)/.exec(clientFirstBare)![1]!);
      return auth(11, serverFirstText);
    }
    if (n > 1) return body.length === 0 ? ready : undefined;
    const final = body.toString("utf8");
    const withoutProof = final.slice(0, final.indexOf(",p="));
    const salted = pbkdf2Sync(
      password,
      Buffer.from(/s=([^,]+)/.exec(serverFirstText)![1]!, "base64"),
      Number(/i=(\d+)/.exec(serverFirstText)![1]),
      32,
      "sha256",
    );
    const hmac = (key: Buffer, text: string) => createHmac("sha256", key).update(text).digest();
    const message = `${clientFirstBare},${serverFirstText},${withoutProof}`;
    const clientKey = hmac(salted, "Client Key");
    const signature = hmac(createHash("sha256").update(clientKey).digest(), message);
    const proof = Buffer.from(final.slice(final.indexOf(",p=") + 3), "base64");
    state.proofOk = Buffer.compare(Buffer.from(proof.map((b, i) => b ^ signature[i]!)), clientKey) === 0;
    if (!state.proofOk) return pgMessage("E", Buffer.from("SFATAL\0C28P01\0Mwrong proof\0\0"));
    const verifier = hmac(hmac(salted, "Server Key"), message).toString("base64");
    return Buffer.concat([auth(12, `v=${verifier}`), auth(0), ready]);
  });
  return { ...f, state };
}

describe("leasehold's PostgreSQL client: SCRAM's server-first message", () => {
  const salt = randomBytes(16).toString("base64");
  const extend = (nonce: string) => `r=${nonce}${randomBytes(9).toString("base64")}`;

  it("refuses a mandatory extension (m=), an empty or missing salt, and an iteration count below 1 or not a number", async () => {
    const invalid: [string, (nonce: string) => string, RegExp][] = [
      ["m=", (n) => `m=channel-magic,${extend(n)},s=${salt},i=4096`, /a mandatory extension, m=/],
      ["empty salt", (n) => `${extend(n)},s=,i=4096`, /the salt is empty or not base64/],
      ["no salt", (n) => `${extend(n)},i=4096`, /expected r=, s= and i=/],
      ["i=0", (n) => `${extend(n)},s=${salt},i=0`, /the iteration count "0"/],
      ["i=abc", (n) => `${extend(n)},s=${salt},i=abc`, /the iteration count "abc"/],
      ["i=1.5", (n) => `${extend(n)},s=${salt},i=1.5`, /the iteration count "1\.5"/],
    ];
    const fakes = invalid.map(([, first]) => scramFake(PASSWORD, first));
    const clients = await Promise.all(
      fakes.map(async (f) =>
        postgresClient(
          parsePostgresUrl(
            `postgres://leasehold:${PASSWORD}@127.0.0.1:${await f.port}/db?sslmode=disable&connect_timeout=3`,
          ),
        ),
      ),
    );
    try {
      const results = await Promise.all(clients.map((c) => rejection(c.query("SELECT 1", []))));
      results.forEach(({ error }, i) => {
        const [what, , message] = invalid[i]!;
        expect(error, what).toBeInstanceOf(PostgresError); // refused: exit 2, not retried
        expect((error as PostgresError).code, what).toBe("28000");
        expect(error.message, what).toMatch(/^SCRAM: the server's first message is invalid \(/);
        expect(error.message, what).toMatch(message);
      });
      // Refused before the proof: the client sent only its first message.
      for (const f of fakes) expect(f.received.length).toBe(1);
    } finally {
      for (const c of clients) await c.end();
    }
  });

  it("accepts any iteration count from 1, as libpq does (scram_iterations may be set that low)", async () => {
    const f = scramFake(PASSWORD, (n) => `${extend(n)},s=${salt},i=1`);
    const client = postgresClient(
      parsePostgresUrl(`postgres://leasehold:${PASSWORD}@127.0.0.1:${await f.port}/db?sslmode=disable`),
    );
    try {
      expect(await client.query("SELECT 1", [])).toEqual([]);
      expect(f.state.proofOk).toBe(true);
    } finally {
      await client.end();
    }
  });
});

describe("leasehold's PostgreSQL client: SASLprep of the password, as libpq and the server apply it", () => {
  it("logs in to PostgreSQL with passwords SASLprep maps, normalizes or leaves as they are", async () => {
    const admin = new pg.Client({ connectionString: pgc.url });
    await admin.connect();
    // The server stores each password's SCRAM secret after its own SASLprep.
    const passwords = {
      // A non-breaking space (mapped to a space), a soft hyphen (mapped to nothing), a ligature
      // (NFKC: "fi"): the server stores "pass fi-word".
      mapped: "pass\u00a0\ufb01-\u00adword",
      // A left-to-right mark is prohibited: SASLprep fails and the raw bytes are used (the
      // ligature stays).
      prohibited: "\ufb01\u200eword",
      // Hebrew with a presentation form, right to left throughout: normalized.
      rtl: "\ufb2e\u05d1\u05d2",
      // Hebrew and Latin mixed: prohibited, raw.
      mixed: "\ufb2e\u05d1x\u05d2",
      ascii: "plain-ascii\u0001",
    };
    const roles = Object.keys(passwords).map((k) => unique(`prep_${k}`).replaceAll("-", "_"));
    try {
      for (const [i, pw] of Object.values(passwords).entries())
        await admin.query(`CREATE ROLE ${roles[i]} LOGIN PASSWORD ${admin.escapeLiteral(pw)}`);
      for (const [i, pw] of Object.values(passwords).entries()) {
        const client = postgresClient({
          ...parsePostgresUrl(`${pgc.url}?sslmode=disable`),
          user: roles[i]!,
          database: "postgres",
          password: pw,
        });
        try {
          expect(await client.query("SELECT current_user AS me", []), Object.keys(passwords)[i]).toEqual([
            { me: roles[i] },
          ]);
        } finally {
          await client.end();
        }
      }
      // What the server derived from each (the raw password where SASLprep fails).
      expect(Object.values(passwords).map(saslprep)).toEqual([
        "pass fi-word",
        passwords.prohibited,
        "\u05d0\u05b7\u05d1\u05d2",
        passwords.mixed,
        passwords.ascii,
      ]);
    } finally {
      for (const role of roles) await admin.query(`DROP ROLE IF EXISTS ${role}`);
      await admin.end();
    }
  });
});

describe("leasehold's PostgreSQL client: the SSLRequest's answer", () => {
  it("refuses bytes that follow the answer before TLS (only someone on the path sends them)", async () => {
    // FAKE server: "N" and, in the same packet, an AuthenticationOk and a ReadyForQuery, as an
    // attacker would inject them (CVE-2021-23222); libpq refuses this too.
    const port = await fake((socket) =>
      socket.once("data", () => socket.write(Buffer.concat([Buffer.from("N"), auth(0), ready]))),
    );
    const client = postgresClient(
      parsePostgresUrl(`postgres://leasehold:${PASSWORD}@127.0.0.1:${port}/db?connect_timeout=3`),
    );
    try {
      const { error } = await rejection(client.query("SELECT 1", []));
      expect(error).toBeInstanceOf(PostgresError);
      expect(error.message).toMatch(
        /^127\.0\.0\.1:\d+ sent data after its answer to the SSLRequest, before TLS: refused$/,
      );
    } finally {
      await client.end();
    }
  });
});
