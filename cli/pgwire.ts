// The CLI's own PostgreSQL client (the frontend/backend protocol 3.0 over node:net / node:tls):
// startup, SCRAM-SHA-256, md5 or cleartext password authentication, TLS as `sslmode` asks, and
// single statements through the extended query protocol with text parameters and text results,
// in the shape the postgres backend accepts (`query(text, params)` resolving the rows), so the
// package needs no PostgreSQL driver (docs/DESIGN.md §11).
import { Buffer } from "node:buffer";
import { createHash, createHmac, pbkdf2Sync, randomBytes } from "node:crypto";
import { type Socket, connect as tcp } from "node:net";
import { connect as tls } from "node:tls";

/** Where a `postgres://` URL points, how to log in, and how to use TLS. */
export interface PostgresTarget {
  host: string;
  port: number;
  user: string;
  password?: string;
  database: string;
  sslmode: "disable" | "prefer" | "require" | "verify-ca" | "verify-full";
}

const SSLMODES = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"];

/** Reads a `DATABASE_URL`: `postgres[ql]://user[:password]@host[:port][/db][?sslmode=...]`. */
export function parsePostgresUrl(text: string): PostgresTarget {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error("must be a URL such as postgres://user:password@host:5432/db");
  }
  if (url.protocol !== "postgres:" && url.protocol !== "postgresql:")
    throw new Error(`must start with postgres:// or postgresql://, got ${url.protocol}//`);
  if (url.hostname === "") throw new Error("has no host (unix sockets are not supported)");
  if (url.username === "") throw new Error("has no user name (postgres://user:password@host/db)");
  for (const key of url.searchParams.keys()) {
    if (!["sslmode", "application_name", "connect_timeout"].includes(key))
      throw new Error(`has the parameter ${key}, which leasehold does not support (only sslmode)`);
  }
  const mode = url.searchParams.get("sslmode") ?? "prefer";
  if (!SSLMODES.includes(mode)) throw new Error(`sslmode must be one of ${SSLMODES.join(", ")}`);
  const user = decodeURIComponent(url.username);
  const target: PostgresTarget = {
    host: url.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: url.port === "" ? 5432 : Number(url.port),
    user,
    database: decodeURIComponent(url.pathname.replace(/^\//, "")) || user,
    sslmode: (mode === "allow" ? "prefer" : mode) as PostgresTarget["sslmode"],
  };
  if (url.password !== "") target.password = decodeURIComponent(url.password);
  return target;
}

/** An error the server sent: its SQLSTATE is `code`, as pg's errors have it. */
export class PostgresError extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

/** How long a statement (or the login) may wait for its answer before the connection is dropped. */
const ANSWER_WITHIN = 10_000;

const cstring = (s: string) => Buffer.from(`${s}\0`, "utf8");
const int32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
};
const int16 = (n: number) => {
  const b = Buffer.alloc(2);
  b.writeInt16BE(n);
  return b;
};
/** One frontend message: its type byte (none for the startup), its length, its body. */
const message = (type: string, ...parts: Buffer[]) => {
  const body = Buffer.concat(parts);
  return Buffer.concat([type === "" ? Buffer.alloc(0) : Buffer.from(type), int32(body.length + 4), body]);
};

/** A message from the server: its type and body. */
interface Incoming {
  type: string;
  body: Buffer;
}

/** The fields of an ErrorResponse as an Error (M: message, C: SQLSTATE). */
function errorOf(body: Buffer): PostgresError {
  const fields = new Map<string, string>();
  for (let at = 0; at < body.length && body[at] !== 0; ) {
    const end = body.indexOf(0, at + 1);
    fields.set(String.fromCharCode(body[at]!), body.toString("utf8", at + 1, end));
    at = end + 1;
  }
  return new PostgresError(fields.get("M") ?? "the server refused", fields.get("C") ?? "XX000");
}

/**
 * One connection to `t`, made on the first statement and made again after it broke; statements
 * run one at a time. `end()` closes it.
 */
export function postgresClient(t: PostgresTarget) {
  let conn: Promise<Connection> | undefined;
  let chain: Promise<unknown> = Promise.resolve();
  let ended = false;

  const connection = () => {
    conn ??= open(t).catch((error) => {
      conn = undefined;
      throw error;
    });
    return conn;
  };

  return {
    query(text: string, params: string[]): Promise<Record<string, string | null>[]> {
      if (ended) return Promise.reject(new Error("the connection is closed"));
      const run = chain.then(async () => {
        const c = await connection();
        try {
          return await c.statement(text, params);
        } catch (error) {
          if (!(error instanceof PostgresError)) conn = undefined; // broken: the next one reconnects
          throw error;
        }
      });
      chain = run.catch(() => {});
      return run;
    },
    async end(): Promise<void> {
      ended = true;
      const c = await conn?.catch(() => undefined);
      c?.close();
    },
  };
}

interface Connection {
  statement(text: string, params: string[]): Promise<Record<string, string | null>[]>;
  close(): void;
}

/** Connects, negotiates TLS and logs in. */
async function open(t: PostgresTarget): Promise<Connection> {
  const where = `${t.host}:${t.port}`;
  let socket: Socket = tcp({ host: t.host, port: t.port });
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", (e) => reject(new Error(`${where}: ${e.message}`)));
  });
  if (t.sslmode !== "disable") {
    // SSLRequest: the server answers one byte, S (TLS follows) or N (no TLS here).
    socket.write(Buffer.concat([int32(8), int32(80877103)]));
    const answer = await new Promise<string>((resolve, reject) => {
      socket.once("data", (b: Buffer) => resolve(String.fromCharCode(b[0]!)));
      socket.once("error", (e) => reject(new Error(`${where}: ${e.message}`)));
    });
    if (answer === "S") {
      const secure = tls({
        socket,
        host: t.host, // the name verify-full checks the certificate against
        ...(/^[\d.:]+$/.test(t.host) ? {} : { servername: t.host }),
        // require: encrypted, certificate not checked (as libpq without a root certificate);
        // verify-ca: the chain; verify-full: the chain and the host name.
        rejectUnauthorized: t.sslmode === "verify-ca" || t.sslmode === "verify-full",
        ...(t.sslmode === "verify-ca" ? { checkServerIdentity: () => undefined } : {}),
      });
      await new Promise<void>((resolve, reject) => {
        secure.once("secureConnect", resolve);
        secure.once("error", (e) => reject(new Error(`${where}: TLS: ${e.message}`)));
      });
      socket = secure;
    } else if (t.sslmode !== "prefer") {
      socket.destroy();
      throw new Error(`${where} does not accept TLS, and sslmode=${t.sslmode} requires it`);
    }
  }

  // Incoming messages, in order, to whoever waits for the next one.
  const queue: Incoming[] = [];
  let waiter: { resolve: (m: Incoming) => void; reject: (e: Error) => void } | undefined;
  let broken: Error | undefined;
  let buffer: Buffer = Buffer.alloc(0);
  const fail = (error: Error) => {
    broken ??= error;
    waiter?.reject(broken);
    waiter = undefined;
    socket.destroy();
  };
  socket.removeAllListeners("error");
  socket.on("error", (e) => fail(new Error(`${where}: ${e.message}`)));
  socket.on("close", () => fail(new Error(`connection to ${where} closed`)));
  socket.setTimeout(ANSWER_WITHIN, () => {
    if (waiter) fail(new Error(`no answer from ${where} within ${ANSWER_WITHIN} ms`));
  });
  socket.on("data", (chunk: Buffer) => {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
    while (buffer.length >= 5) {
      const length = buffer.readInt32BE(1);
      if (buffer.length < length + 1) break;
      queue.push({ type: String.fromCharCode(buffer[0]!), body: buffer.subarray(5, length + 1) });
      buffer = buffer.subarray(length + 1);
    }
    if (waiter && queue.length > 0) {
      const w = waiter;
      waiter = undefined;
      w.resolve(queue.shift()!);
    }
  });
  /** The next message that is not a notice or a parameter report. */
  const next = async (): Promise<Incoming> => {
    for (;;) {
      const m =
        queue.shift() ??
        (await new Promise<Incoming>((resolve, reject) => {
          if (broken) reject(broken);
          else waiter = { resolve, reject };
        }));
      if (m.type !== "N" && m.type !== "S" && m.type !== "K") return m;
    }
  };
  const send = (b: Buffer) => {
    if (broken) throw broken;
    socket.write(b);
  };

  try {
    send(
      message(
        "",
        int32(196608),
        ...[
          "user",
          t.user,
          "database",
          t.database,
          "client_encoding",
          "UTF8",
          "application_name",
          "leasehold",
        ].map(cstring),
        Buffer.from([0]),
      ),
    );
    await login(t, next, send);
  } catch (error) {
    socket.destroy();
    throw error;
  }

  return {
    async statement(text, params) {
      send(
        Buffer.concat([
          message("P", cstring(""), cstring(text), int16(0)),
          message(
            "B",
            cstring(""),
            cstring(""),
            int16(0),
            int16(params.length),
            ...params.flatMap((p) => {
              const b = Buffer.from(p, "utf8");
              return [int32(b.length), b];
            }),
            int16(0),
          ),
          message("D", Buffer.from("P"), cstring("")),
          message("E", cstring(""), int32(0)),
          message("S"),
        ]),
      );
      let columns: string[] = [];
      const rows: Record<string, string | null>[] = [];
      let error: PostgresError | undefined;
      for (;;) {
        const m = await next();
        if (m.type === "T") columns = rowDescription(m.body);
        else if (m.type === "D") rows.push(dataRow(m.body, columns));
        else if (m.type === "E") error ??= errorOf(m.body);
        else if (m.type === "Z") break;
      }
      if (error) throw error;
      return rows;
    },
    close() {
      try {
        socket.end(message("X"));
      } catch {}
      socket.destroy();
    },
  };
}

/** Authentication: SCRAM-SHA-256, md5 or cleartext, as the server asks; then ReadyForQuery. */
async function login(t: PostgresTarget, next: () => Promise<Incoming>, send: (b: Buffer) => void) {
  const password = () => {
    if (t.password === undefined)
      throw new PostgresError("the server asks for a password and DATABASE_URL has none", "28P01");
    return t.password;
  };
  let scram: { nonce: string; first: string; server?: Buffer } | undefined;
  for (;;) {
    const m = await next();
    if (m.type === "E") throw errorOf(m.body);
    if (m.type === "Z") return;
    if (m.type !== "R") continue;
    const code = m.body.readInt32BE(0);
    if (code === 0) continue;
    if (code === 3) send(message("p", cstring(password())));
    else if (code === 5) {
      const inner = createHash("md5")
        .update(password() + t.user)
        .digest("hex");
      const outer = createHash("md5")
        .update(Buffer.concat([Buffer.from(inner), m.body.subarray(4, 8)]))
        .digest("hex");
      send(message("p", cstring(`md5${outer}`)));
    } else if (code === 10) {
      const mechanisms = m.body.toString("utf8", 4).split("\0");
      if (!mechanisms.includes("SCRAM-SHA-256"))
        throw new Error(
          `the server offers ${mechanisms.filter(Boolean).join(", ")}; leasehold speaks SCRAM-SHA-256`,
        );
      const nonce = randomBytes(18).toString("base64");
      scram = { nonce, first: `n=,r=${nonce}` };
      const data = Buffer.from(`n,,${scram.first}`);
      send(message("p", cstring("SCRAM-SHA-256"), int32(data.length), data));
    } else if (code === 11 && scram) {
      const serverFirst = m.body.toString("utf8", 4);
      const attrs = new Map(serverFirst.split(",").map((kv) => [kv[0]!, kv.slice(2)] as [string, string]));
      const nonce = attrs.get("r") ?? "";
      const salt = Buffer.from(attrs.get("s") ?? "", "base64");
      const iterations = Number(attrs.get("i"));
      if (!nonce.startsWith(scram.nonce) || !(iterations > 0))
        throw new Error("SCRAM: the server's first message is invalid");
      const salted = pbkdf2Sync(password(), salt, iterations, 32, "sha256");
      const hmac = (key: Buffer, text: string) => createHmac("sha256", key).update(text).digest();
      const clientKey = hmac(salted, "Client Key");
      const storedKey = createHash("sha256").update(clientKey).digest();
      const withoutProof = `c=biws,r=${nonce}`;
      const auth = `${scram.first},${serverFirst},${withoutProof}`;
      const signature = hmac(storedKey, auth);
      const proof = Buffer.from(clientKey.map((b, i) => b ^ signature[i]!));
      scram.server = hmac(hmac(salted, "Server Key"), auth);
      send(message("p", Buffer.from(`${withoutProof},p=${proof.toString("base64")}`)));
    } else if (code === 12 && scram?.server) {
      const v = m.body.toString("utf8", 4).match(/(?:^|,)v=([^,]+)/)?.[1];
      if (v !== scram.server.toString("base64"))
        throw new Error("SCRAM: the server's signature does not match");
    } else throw new Error(`the server asks for an authentication leasehold does not speak (code ${code})`);
  }
}

function rowDescription(body: Buffer): string[] {
  const names: string[] = [];
  let at = 2;
  for (let i = body.readInt16BE(0); i > 0; i--) {
    const end = body.indexOf(0, at);
    names.push(body.toString("utf8", at, end));
    at = end + 1 + 18;
  }
  return names;
}

function dataRow(body: Buffer, columns: string[]): Record<string, string | null> {
  const row: Record<string, string | null> = {};
  let at = 2;
  for (let i = 0, n = body.readInt16BE(0); i < n; i++) {
    const length = body.readInt32BE(at);
    at += 4;
    row[columns[i] ?? String(i)] = length < 0 ? null : body.toString("utf8", at, at + length);
    if (length > 0) at += length;
  }
  return row;
}
