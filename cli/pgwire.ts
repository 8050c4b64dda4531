// The CLI's own PostgreSQL client (the frontend/backend protocol 3.0 over node:net / node:tls):
// startup, SCRAM-SHA-256, md5 or cleartext password authentication, TLS as `sslmode` asks, and
// single statements through the extended query protocol with text parameters and text results,
// in the shape the postgres backend accepts (`query(text, params)` resolving the rows), so the
// package needs no PostgreSQL driver (docs/DESIGN.md §11).
import { Buffer } from "node:buffer";
import { createHash, createHmac, pbkdf2Sync, randomBytes } from "node:crypto";
import { type Socket, connect as tcp } from "node:net";
import { connect as tls } from "node:tls";
import { decodedPart, serverName, tlsRefusal } from "./tls.ts";

/** Where a `postgres://` URL points, how to log in, and how to use TLS. */
export interface PostgresTarget {
  host: string;
  port: number;
  user: string;
  password?: string;
  database: string;
  sslmode: "disable" | "prefer" | "require" | "verify-ca" | "verify-full";
  /** How long connecting, TLS and the login may take together, in ms (`connect_timeout`; 10 s). */
  connectTimeout: number;
  /** `application_name` (default `leasehold`). */
  applicationName: string;
  /**
   * The authentication methods the server may ask for (`require_auth`, as libpq spells it). Without
   * it: SCRAM-SHA-256 always, none (trust) when the URL has no password, md5 and cleartext only over
   * TLS with verify-full, so an impostor never gets the password or a hash to crack, nor is taken
   * at its word without one (docs/DESIGN.md §11).
   */
  requireAuth?: AuthMethod[];
}

type AuthMethod = "password" | "md5" | "scram-sha-256" | "none";
const AUTH_METHODS: readonly AuthMethod[] = ["password", "md5", "scram-sha-256", "none"];

const SSLMODES = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"];
const PARAMETERS = ["sslmode", "connect_timeout", "application_name", "require_auth"];

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
    if (!PARAMETERS.includes(key))
      throw new Error(
        `has the parameter ${key}, which leasehold does not support (only ${PARAMETERS.join(", ")})`,
      );
  }
  const mode = url.searchParams.get("sslmode") ?? "prefer";
  if (!SSLMODES.includes(mode)) throw new Error(`sslmode must be one of ${SSLMODES.join(", ")}`);
  const timeout = url.searchParams.get("connect_timeout") ?? "10";
  // libpq's 0 waits forever: leasehold never waits in silence.
  if (!/^\d+$/.test(timeout) || Number(timeout) < 1 || Number(timeout) > 3600)
    throw new Error(
      `connect_timeout must be a whole number of seconds from 1 to 3600, got ${JSON.stringify(timeout)}`,
    );
  const user = decodedPart(url.username, "its user name");
  const target: PostgresTarget = {
    host: url.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: url.port === "" ? 5432 : Number(url.port),
    user,
    database: decodedPart(url.pathname.replace(/^\//, ""), "its database name") || user,
    // allow (TLS only if plain is refused) is read as prefer (TLS when offered), which is stricter.
    sslmode: (mode === "allow" ? "prefer" : mode) as PostgresTarget["sslmode"],
    connectTimeout: Number(timeout) * 1000,
    applicationName: url.searchParams.get("application_name") ?? "leasehold",
  };
  const required = url.searchParams.get("require_auth");
  if (required !== null) {
    const methods = required.split(",");
    if (!methods.every((m) => (AUTH_METHODS as string[]).includes(m)))
      throw new Error(
        `require_auth must list some of ${AUTH_METHODS.join(", ")}, got ${JSON.stringify(required)}`,
      );
    target.requireAuth = methods as AuthMethod[];
  }
  if (url.password !== "") target.password = decodedPart(url.password, "its password");
  // The protocol ends each of these at a NUL: what follows would be read as another parameter.
  for (const [what, value] of [
    ["user name", target.user],
    ["database name", target.database],
    ["password", target.password],
    ["application_name", target.applicationName],
  ] as const)
    if (value?.includes("\0"))
      throw new Error(`has a NUL (%00) in its ${what}, which PostgreSQL cannot take`);
  return target;
}

/**
 * An error the server sent: its SQLSTATE is `code`, as pg's errors have it; `fatal` when the
 * server ends the connection after it (severity FATAL or PANIC).
 */
export class PostgresError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly fatal = false,
  ) {
    super(message);
  }
}

/**
 * How long a statement may take, from its send to its ReadyForQuery, before the connection is
 * dropped: one deadline, which no traffic (a NoticeResponse, a trickle of bytes) extends.
 */
const ANSWER_WITHIN = 10_000;

/** PostgreSQL's default is 4 096; 600 000 (OWASP's advice for PBKDF2-SHA-256) is about 0.3 s here. */
const MAX_SCRAM_ITERATIONS = 600_000;

/**
 * A refusal no retry can fix (the server's certificate, TLS required but not offered, a login
 * leasehold will not or cannot do): SQLSTATE 28000, invalid authorization, so the backend reports it
 * as refused credentials (`ERR_BACKEND_AUTH`, not retried; the CLI exits 2).
 */
const refused = (message: string) => new PostgresError(message, "28000");

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
    if (end < 0) break; // a field without its NUL: the rest is not read
    fields.set(String.fromCharCode(body[at]!), body.toString("utf8", at + 1, end));
    at = end + 1;
  }
  const severity = fields.get("V") ?? fields.get("S");
  return new PostgresError(
    fields.get("M") ?? "the server refused",
    fields.get("C") ?? "XX000",
    severity === "FATAL" || severity === "PANIC",
  );
}

/**
 * One connection to `t`, made on the first statement and made again after it broke; statements
 * run one at a time. `end()` closes it.
 */
export function postgresClient(t: PostgresTarget) {
  let conn: Promise<Connection> | undefined;
  let chain: Promise<unknown> = Promise.resolve();
  let ended = false;
  /** The socket of a connection being made, which end() destroys rather than waits for. */
  const opening = { socket: undefined as Socket | undefined };

  const connection = () => {
    conn ??= open(t, opening).catch((error) => {
      conn = undefined;
      throw error;
    });
    return conn;
  };

  return {
    query(text: string, params: string[]): Promise<Record<string, string | null>[]> {
      if (ended) return Promise.reject(new Error("the connection is closed"));
      const run = chain.then(async () => {
        // Queued before end(): it must not open a connection that nobody would close.
        const closed = () => {
          if (ended) throw new Error("the connection is closed (end() was called before this statement ran)");
        };
        closed();
        let c = await connection();
        if (c.broken()) {
          // It broke while idle (the server restarted, a reset): a new one, not a failed statement.
          conn = undefined;
          closed();
          c = await connection();
        }
        closed();
        try {
          return await c.statement(text, params);
        } catch (error) {
          if (!(error instanceof PostgresError)) {
            // Broken (its socket is already destroyed): the next statement reconnects.
            c.close();
            conn = undefined;
          }
          throw error;
        }
      });
      chain = run.catch(() => {});
      return run;
    },
    async end(): Promise<void> {
      ended = true;
      // A connection still being made is dropped, not waited for (its server may never answer).
      opening.socket?.destroy();
      const c = await conn?.catch(() => undefined);
      c?.close();
    },
  };
}

interface Connection {
  statement(text: string, params: string[]): Promise<Record<string, string | null>[]>;
  /** Whether the connection closed or failed since it was made. */
  broken(): boolean;
  close(): void;
}

/**
 * Resolves with `value` of the socket's `event`; rejects on its error (as `failed` words it), end
 * or close. Its listeners are removed once it settles.
 */
function until<T>(
  socket: Socket,
  where: string,
  event: string,
  value: (first: unknown) => T,
  failed = (e: Error): Error => new Error(`${where}: ${e.message}`),
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const handlers: Record<string, (first: unknown) => void> = {
      [event]: (first) => settle(() => resolve(value(first))),
      error: (e) => settle(() => reject(failed(e as Error))),
      end: () => settle(() => reject(new Error(`connection to ${where} closed`))),
      close: () => settle(() => reject(new Error(`connection to ${where} closed`))),
    };
    const settle = (then: () => void) => {
      for (const [name, handler] of Object.entries(handlers)) socket.off(name, handler);
      then();
    };
    for (const [name, handler] of Object.entries(handlers)) socket.on(name, handler);
  });
}

/**
 * Connects, negotiates TLS and logs in, all within `t.connectTimeout` (the socket is destroyed
 * then); `opening.socket` is the socket in use until it is done.
 */
async function open(t: PostgresTarget, opening: { socket: Socket | undefined }): Promise<Connection> {
  const where = `${t.host}:${t.port}`;
  const raw = tcp({ host: t.host, port: t.port });
  // Its errors reach whoever waits (until) or, under TLS, the TLS socket: never an uncaught one.
  raw.on("error", () => {});
  let socket: Socket = raw;
  opening.socket = socket;
  let late = false;
  const deadline = setTimeout(() => {
    late = true;
    socket.destroy();
    raw.destroy();
  }, t.connectTimeout);
  try {
    await until(raw, where, "connect", () => undefined);
    let tlsOn = false;
    if (t.sslmode !== "disable") {
      // SSLRequest: the server answers one byte, S (TLS follows) or N (no TLS here).
      socket.write(Buffer.concat([int32(8), int32(80877103)]));
      const reply = await until(socket, where, "data", (b) => b as Buffer);
      const answer = String.fromCharCode(reply[0]!);
      // Bytes after the answer, before TLS, could only be injected by someone on the path (as
      // libpq since CVE-2021-23222, refused).
      if (reply.length > 1)
        throw refused(`${where} sent data after its answer to the SSLRequest, before TLS: refused`);
      if (answer === "S") {
        const secure = tls({
          socket,
          host: t.host, // the name verify-full checks the certificate against
          ...serverName(t.host),
          // require: encrypted, certificate not checked (as libpq without a root certificate);
          // verify-ca: the chain; verify-full: the chain and the host name.
          rejectUnauthorized: t.sslmode === "verify-ca" || t.sslmode === "verify-full",
          ...(t.sslmode === "verify-ca" ? { checkServerIdentity: () => undefined } : {}),
        });
        socket = secure;
        opening.socket = secure;
        // A certificate it cannot verify is configuration (NODE_EXTRA_CA_CERTS, the host name).
        await until(
          secure,
          where,
          "secureConnect",
          () => undefined,
          (e) =>
            !late && tlsRefusal(e)
              ? refused(`${where}: TLS: ${e.message}`)
              : new Error(`${where}: TLS: ${e.message}`),
        );
        tlsOn = true;
      } else if (answer !== "N") {
        throw new Error(`${where} answered the SSLRequest with ${JSON.stringify(answer)}: not PostgreSQL?`);
      } else if (t.sslmode !== "prefer") {
        throw refused(`${where} does not accept TLS, and sslmode=${t.sslmode} requires it`);
      }
    }
    const c = session(t, socket, where);
    await c.login(tlsOn);
    return c.connection;
  } catch (error) {
    socket.destroy();
    raw.destroy();
    if (error instanceof PostgresError) throw error;
    // The deadline's own error is the one to report, whichever wait it ended.
    throw late ? new Error(`no answer from ${where} within ${t.connectTimeout} ms (connect_timeout)`) : error;
  } finally {
    clearTimeout(deadline);
    opening.socket = undefined;
  }
}

/** The protocol on a connected (and maybe encrypted) socket: the login, then statements. */
function session(t: PostgresTarget, socket: Socket, where: string) {
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
  socket.on("error", (e) => fail(new Error(`${where}: ${e.message}`)));
  socket.on("close", () => fail(new Error(`connection to ${where} closed`)));
  socket.on("data", (chunk: Buffer) => {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
    while (buffer.length >= 5) {
      const length = buffer.readInt32BE(1);
      if (length < 4) return fail(new Error(`${where} sent a message of length ${length}: not PostgreSQL?`));
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

  const connection: Connection = {
    async statement(text, params) {
      const deadline = setTimeout(
        () => fail(new Error(`no answer from ${where} within ${ANSWER_WITHIN} ms`)),
        ANSWER_WITHIN,
      );
      try {
        return await exchange(text, params);
      } catch (error) {
        // A message it cannot read (a truncated DataRow): the stream is lost, so is the connection.
        if (!(error instanceof PostgresError)) fail(error as Error);
        throw error;
      } finally {
        clearTimeout(deadline);
      }
    },
    broken: () => broken !== undefined,
    close() {
      try {
        socket.end(message("X"));
      } catch {}
      socket.destroy();
    },
  };

  /** `read()`, or an error naming the message it could not read (the caller then drops the connection). */
  const malformed = <T>(what: string, read: () => T): T => {
    try {
      return read();
    } catch {
      throw new Error(`${where} sent a malformed ${what}: not PostgreSQL?`);
    }
  };

  /** Sends one statement (Parse, Bind, Describe, Execute, Sync) and reads its answer. */
  async function exchange(text: string, params: string[]): Promise<Record<string, string | null>[]> {
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
      // A FATAL error (the server shutting down, the session terminated) is what to report when
      // the close that follows it ends the wait, not the close.
      const m = await next().catch((closed: Error) => {
        throw error?.fatal ? error : closed;
      });
      if (m.type === "T") columns = malformed("RowDescription", () => rowDescription(m.body));
      else if (m.type === "D") rows.push(malformed("DataRow", () => dataRow(m.body, columns)));
      else if (m.type === "E") error ??= errorOf(m.body);
      else if (m.type === "Z") break;
    }
    if (error) throw error;
    return rows;
  }

  return {
    connection,
    async login(tlsOn: boolean) {
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
            t.applicationName,
          ].map(cstring),
          Buffer.from([0]),
        ),
      );
      await login(t, tlsOn, next, send);
    },
  };
}

/**
 * The methods allowed without `require_auth`: every one to a verified server (TLS with
 * verify-full: verify-ca checks the chain against the system's public CAs but not the name, so
 * any public certificate passes it); otherwise SCRAM-SHA-256, and no authentication only when the
 * URL has no password (a server that waives a configured password may be an impostor).
 */
function allowed(t: PostgresTarget, tlsOn: boolean): AuthMethod[] {
  if (t.requireAuth) return t.requireAuth;
  if (tlsOn && t.sslmode === "verify-full") return [...AUTH_METHODS];
  return t.password === undefined ? ["scram-sha-256", "none"] : ["scram-sha-256"];
}

/**
 * Authentication: SCRAM-SHA-256, md5 or cleartext, as the server asks and `allowed` permits; then
 * ReadyForQuery. Once SCRAM has begun only its next step is accepted (SASLContinue, then
 * SASLFinal with the server's signature verified, then AuthenticationOk): a server that skips a
 * step, or switches to a password, is refused.
 */
async function login(
  t: PostgresTarget,
  tlsOn: boolean,
  next: () => Promise<Incoming>,
  send: (b: Buffer) => void,
) {
  const methods = allowed(t, tlsOn);
  const permit = (method: AuthMethod, what: string) => {
    if (!methods.includes(method))
      throw refused(
        `the server asks for ${what}, which leasehold sends only ` +
          (t.requireAuth
            ? `when require_auth lists ${method} (it is ${t.requireAuth.join(",")})`
            : `over TLS with sslmode=verify-full, or with require_auth=${method} in DATABASE_URL`),
      );
  };
  const password = () => {
    if (t.password === undefined)
      throw new PostgresError("the server asks for a password and DATABASE_URL has none", "28P01");
    return t.password;
  };
  // start → (password sent | sasl → sasl-continued → verified) → ok → ReadyForQuery.
  let step: "start" | "password" | "sasl" | "sasl-continued" | "verified" | "ok" = "start";
  let scram: { nonce: string; first: string; server?: Buffer } | undefined;
  const out = (what: string) => refused(`the server sent ${what} out of order during the login (at ${step})`);
  for (;;) {
    const m = await next();
    if (m.type === "E") throw errorOf(m.body);
    if (m.type === "Z") {
      if (step !== "ok") throw out("ReadyForQuery");
      return;
    }
    if (m.type !== "R") {
      if (step === "ok") continue; // BackendKeyData and the like
      throw out(`a message of type ${JSON.stringify(m.type)}`);
    }
    if (m.body.length < 4) throw out("a truncated authentication request");
    const code = m.body.readInt32BE(0);
    if (code === 0) {
      if (step === "start") permit("none", "no authentication");
      else if (step !== "password" && step !== "verified") throw out("AuthenticationOk");
      step = "ok";
    } else if (code === 3 || code === 5) {
      if (step !== "start") throw out(`a password request (code ${code})`);
      if (code === 3) {
        permit("password", "the password in clear text");
        send(message("p", cstring(password())));
      } else {
        permit("md5", "an md5 password hash");
        const inner = createHash("md5")
          .update(password() + t.user)
          .digest("hex");
        const outer = createHash("md5")
          .update(Buffer.concat([Buffer.from(inner), m.body.subarray(4, 8)]))
          .digest("hex");
        send(message("p", cstring(`md5${outer}`)));
      }
      step = "password";
    } else if (code === 10) {
      if (step !== "start") throw out("a new SASL request");
      permit("scram-sha-256", "SCRAM-SHA-256");
      const mechanisms = m.body.toString("utf8", 4).split("\0");
      if (!mechanisms.includes("SCRAM-SHA-256"))
        throw refused(
          `the server offers ${mechanisms.filter(Boolean).join(", ")}; leasehold speaks SCRAM-SHA-256`,
        );
      const nonce = randomBytes(18).toString("base64");
      scram = { nonce, first: `n=,r=${nonce}` };
      const data = Buffer.from(`n,,${scram.first}`);
      send(message("p", cstring("SCRAM-SHA-256"), int32(data.length), data));
      step = "sasl";
    } else if (code === 11) {
      if (step !== "sasl" || !scram) throw out("SASLContinue");
      const serverFirst = m.body.toString("utf8", 4);
      const { nonce, salt, iterations } = serverFirstMessage(serverFirst, scram.nonce);
      const salted = pbkdf2Sync(saslprep(password()), salt, iterations, 32, "sha256");
      const hmac = (key: Buffer, text: string) => createHmac("sha256", key).update(text).digest();
      const clientKey = hmac(salted, "Client Key");
      const storedKey = createHash("sha256").update(clientKey).digest();
      const withoutProof = `c=biws,r=${nonce}`;
      const auth = `${scram.first},${serverFirst},${withoutProof}`;
      const signature = hmac(storedKey, auth);
      const proof = Buffer.from(clientKey.map((b, i) => b ^ signature[i]!));
      scram.server = hmac(hmac(salted, "Server Key"), auth);
      send(message("p", Buffer.from(`${withoutProof},p=${proof.toString("base64")}`)));
      step = "sasl-continued";
    } else if (code === 12) {
      if (step !== "sasl-continued" || !scram?.server) throw out("SASLFinal");
      const v = m.body.toString("utf8", 4).match(/(?:^|,)v=([^,]+)/)?.[1];
      if (v !== scram.server.toString("base64"))
        throw refused("SCRAM: the server's signature does not match (it does not know the password)");
      step = "verified";
    } else throw refused(`the server asks for an authentication leasehold does not speak (code ${code})`);
  }
}

/** The column names of a RowDescription; throws when the message is cut short. */
/**
 * SCRAM's server-first message (RFC 5802 §7): `r=` the client's nonce and the server's, `s=` a
 * salt, `i=` an iteration count, in that order. A mandatory extension (`m=`), which this client
 * cannot know, fails the login, as the RFC requires; so do an empty salt and a count that is not
 * a whole number of at least 1. Any count from 1 is accepted, as libpq does (an administrator may
 * set `scram_iterations` that low), up to `MAX_SCRAM_ITERATIONS`.
 */
function serverFirstMessage(text: string, clientNonce: string) {
  const invalid = (what: string) => refused(`SCRAM: the server's first message is invalid (${what})`);
  if (text.startsWith("m=")) throw invalid("a mandatory extension, m=, which leasehold does not speak");
  const [r, s, i] = text.split(",");
  if (!r?.startsWith("r=") || !s?.startsWith("s=") || !i?.startsWith("i="))
    throw invalid("expected r=, s= and i=");
  const nonce = r.slice(2);
  if (!nonce.startsWith(clientNonce) || nonce === clientNonce)
    throw invalid("its nonce does not extend the client's");
  const salt = s.slice(2);
  if (!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(salt) || salt === "")
    throw invalid("the salt is empty or not base64");
  const count = i.slice(2);
  if (!/^[1-9]\d{0,9}$/.test(count))
    throw invalid(`the iteration count ${JSON.stringify(count.slice(0, 20))}`);
  const iterations = Number(count);
  if (iterations > MAX_SCRAM_ITERATIONS)
    throw refused(
      `SCRAM: the server asks for ${iterations} iterations; leasehold does at most ${MAX_SCRAM_ITERATIONS}`,
    );
  return { nonce, salt: Buffer.from(salt, "base64"), iterations };
}

/** Whether code point `c` is in one of the inclusive ranges of `table` (pairs: first, last). */
const within = (table: readonly number[], c: number) => {
  for (let i = 0; i < table.length; i += 2) if (c >= table[i]! && c <= table[i + 1]!) return true;
  return false;
};
/** RFC 3454 C.1.2, non-ASCII spaces: mapped to a space. */
const NON_ASCII_SPACE = [
  0xa0, 0xa0, 0x1680, 0x1680, 0x2000, 0x200b, 0x202f, 0x202f, 0x205f, 0x205f, 0x3000, 0x3000,
];
/** RFC 3454 B.1, commonly mapped to nothing. */
const MAPPED_TO_NOTHING = [
  0xad, 0xad, 0x34f, 0x34f, 0x1806, 0x1806, 0x180b, 0x180d, 0x200b, 0x200d, 0x2060, 0x2060, 0xfe00, 0xfe0f,
  0xfeff, 0xfeff,
];
/** RFC 4013's prohibited output: RFC 3454 C.1.2, C.2.1, C.2.2 and C.3 to C.9, ranges merged. */
const PROHIBITED = [
  0x0,
  0x1f,
  0x7f,
  0xa0,
  0x340,
  0x341,
  0x6dd,
  0x6dd,
  0x70f,
  0x70f,
  0x1680,
  0x1680,
  0x180e,
  0x180e,
  0x2000,
  0x200f,
  0x2028,
  0x202f,
  0x205f,
  0x2063,
  0x206a,
  0x206f,
  0x2ff0,
  0x2ffb,
  0x3000,
  0x3000,
  0xd800,
  0xf8ff,
  0xfdd0,
  0xfdef,
  0xfeff,
  0xfeff,
  0xfff9,
  0xffff,
  0x1d173,
  0x1d17a,
  0xe0001,
  0xe0001,
  0xe0020,
  0xe007f,
  0xf0000,
  0x10ffff,
  // C.4: the last two code points of each plane.
  ...Array.from({ length: 15 }, (_, p) => [(p + 1) * 0x10000 + 0xfffe, (p + 1) * 0x10000 + 0xffff]).flat(),
];
/**
 * Not assigned (RFC 3454 A.1 is Unicode 3.2's list; this is the running engine's Unicode, which
 * differs only for characters assigned since 2002).
 */
const UNASSIGNED = /\p{Cn}/u;
/**
 * Right-to-left (RFC 3454 D.1, bidi classes R and AL) and left-to-right (D.2, L) characters.
 * JavaScript has no Bidi_Class property: these go by script and category, which agree with D.1
 * and D.2 for letters, what a password holds.
 */
const RTL = /^[\p{Script=Hebrew}\p{Script=Arabic}\p{Script=Syriac}\p{Script=Thaana}\u200F]$/u;
const LTR = /^[\p{L}\p{Mc}]$/u;

/**
 * SASLprep (RFC 4013) of a SCRAM password, as libpq and PostgreSQL apply it, so a password set
 * with non-ASCII characters (a non-breaking space, a ligature) logs in as it does with psql. As
 * libpq: an ASCII password is used as it is, and one that SASLprep prohibits (a control or
 * unassigned character, mixed directions, nothing left) is used as raw bytes; the checks apply to
 * the mapped password, before NFKC, as libpq's do.
 */
export function saslprep(password: string): string {
  if (Buffer.byteLength(password) === password.length) return password; // ASCII
  const chars: string[] = [];
  for (const c of password) {
    const code = c.codePointAt(0)!;
    if (within(NON_ASCII_SPACE, code)) chars.push(" ");
    else if (!within(MAPPED_TO_NOTHING, code)) chars.push(c);
  }
  if (chars.length === 0) return password;
  if (chars.some((c) => within(PROHIBITED, c.codePointAt(0)!) || UNASSIGNED.test(c))) return password;
  if (chars.some((c) => RTL.test(c))) {
    const ltr = chars.some((c) => LTR.test(c) && !RTL.test(c));
    if (ltr || !RTL.test(chars[0]!) || !RTL.test(chars.at(-1)!)) return password;
  }
  return chars.join("").normalize("NFKC");
}

function rowDescription(body: Buffer): string[] {
  const names: string[] = [];
  let at = 2;
  for (let i = body.readInt16BE(0); i > 0; i--) {
    const end = body.indexOf(0, at);
    if (end < 0 || end + 1 + 18 > body.length) throw new RangeError("truncated");
    names.push(body.toString("utf8", at, end));
    at = end + 1 + 18;
  }
  return names;
}

/** A DataRow's values by column name; throws when the message is cut short. */
function dataRow(body: Buffer, columns: string[]): Record<string, string | null> {
  const row: Record<string, string | null> = {};
  let at = 2;
  for (let i = 0, n = body.readInt16BE(0); i < n; i++) {
    const length = body.readInt32BE(at);
    at += 4;
    if (length > 0 && at + length > body.length) throw new RangeError("truncated");
    row[columns[i] ?? String(i)] = length < 0 ? null : body.toString("utf8", at, at + length);
    if (length > 0) at += length;
  }
  return row;
}
