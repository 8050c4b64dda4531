// The CLI's own Redis client (RESP2 over node:net / node:tls): AUTH, SELECT and the EVALSHA/EVAL
// of the redis backend, in the shape of Bun's RedisClient (`send(command, args)`), so the package
// needs no Redis library (docs/DESIGN.md §11). The reply parser is shared with the tests' bridge.
import { Buffer } from "node:buffer";
import { type Socket, connect as tcp } from "node:net";
import { connect as tls } from "node:tls";
import { decodedPart, serverName, tlsRefusal } from "./tls.ts";

/** An error reply from Redis (`-ERR ...`), kept as a value so it can sit inside an EXEC array. */
export class RedisReplyError extends Error {
  override name = "RedisReplyError";
}

/** A status reply (`+OK`), distinct from a bulk string because base64 encoding treats OK specially. */
export class Status {
  constructor(readonly text: string) {}
}

export type Reply = Status | RedisReplyError | number | Buffer | null | Reply[];

/** Encodes one command as a RESP array of bulk strings. */
export function encodeCommand(args: readonly (string | Buffer)[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const a of args) {
    const b = typeof a === "string" ? Buffer.from(a, "utf8") : a;
    parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from("\r\n"));
  }
  return Buffer.concat(parts);
}

export const incomplete = Symbol("incomplete");

/** A length, a count or an integer reply: a whole number, or the reply is not RESP. */
function count(line: string): number {
  if (!/^-?\d{1,18}$/.test(line))
    throw new Error(`RESP: expected a whole number, got ${JSON.stringify(line.slice(0, 40))}`);
  return Number(line);
}

/** Parses one reply at `pos`; returns the reply and the next position, or `incomplete`. */
export function parse(buf: Buffer, pos: number): { value: Reply; end: number } | typeof incomplete {
  const eol = buf.indexOf("\r\n", pos);
  if (eol < 0) return incomplete;
  const type = String.fromCharCode(buf[pos]!);
  const line = buf.toString("utf8", pos + 1, eol);
  const next = eol + 2;
  switch (type) {
    case "+":
      return { value: new Status(line), end: next };
    case "-":
      return { value: new RedisReplyError(line), end: next };
    case ":":
      return { value: count(line), end: next };
    case "$": {
      const len = count(line);
      if (len < 0) return { value: null, end: next };
      if (buf.length < next + len + 2) return incomplete;
      return { value: buf.subarray(next, next + len), end: next + len + 2 };
    }
    case "*": {
      const n = count(line);
      if (n < 0) return { value: null, end: next };
      const items: Reply[] = [];
      let at = next;
      for (let i = 0; i < n; i++) {
        const item = parse(buf, at);
        if (item === incomplete) return incomplete;
        items.push(item.value);
        at = item.end;
      }
      return { value: items, end: at };
    }
    default:
      throw new Error(`RESP: unexpected reply type ${JSON.stringify(type)}`);
  }
}

/**
 * A socket's "data" handler: parses the replies as they arrive, in order, and hands each to
 * `reply`; a reply that cannot be parsed goes to `fail` (the connection must then be dropped).
 */
export function replyReader(reply: (r: Reply) => void, fail: (e: Error) => void): (chunk: Buffer) => void {
  let buffer: Buffer = Buffer.alloc(0);
  return (chunk) => {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
    let pos = 0;
    try {
      while (pos < buffer.length) {
        const r = parse(buffer, pos);
        if (r === incomplete) break;
        pos = r.end;
        reply(r.value);
      }
    } catch (error) {
      fail(error as Error);
      return;
    }
    buffer = buffer.subarray(pos);
  };
}

/** Where a `redis://` or `rediss://` URL points, and how to log in. */
export interface RedisTarget {
  host: string;
  port: number;
  tls: boolean;
  username?: string;
  password?: string;
  db: number;
}

/** Reads a `REDIS_URL`: `redis[s]://[user[:password]@]host[:port][/db]`; an Error says what is wrong. */
export function parseRedisUrl(text: string): RedisTarget {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error("must be a URL such as redis://user:password@host:6379/0");
  }
  if (url.protocol !== "redis:" && url.protocol !== "rediss:")
    throw new Error(`must start with redis:// or rediss:// (TLS), got ${url.protocol}//`);
  if (url.hostname === "") throw new Error("has no host");
  // Some clients read ?db=2 or TLS options here: ignoring them could put hosts on different databases.
  for (const key of url.searchParams.keys())
    throw new Error(
      `has the parameter ${key}, which leasehold does not read (none are: the database goes in the path, /2; TLS is rediss://)`,
    );
  const path = url.pathname.replace(/^\//, "");
  if (!/^\d{0,5}$/.test(path)) throw new Error("must end with a database number (/0, /1, ...) or nothing");
  const target: RedisTarget = {
    host: url.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: url.port === "" ? 6379 : Number(url.port),
    tls: url.protocol === "rediss:",
    db: path === "" ? 0 : Number(path),
  };
  if (url.username !== "") target.username = decodedPart(url.username, "its user name");
  if (url.password !== "") target.password = decodedPart(url.password, "its password");
  return target;
}

/** A reply as the redis backend reads Bun's: strings, numbers, null, arrays; an error reply throws. */
function plain(reply: Reply): unknown {
  if (reply instanceof RedisReplyError) return reply;
  if (reply instanceof Status) return reply.text;
  if (Buffer.isBuffer(reply)) return reply.toString("utf8");
  if (Array.isArray(reply)) return reply.map(plain);
  return reply;
}

/**
 * How long a command may wait for its reply, from its send, before the connection is dropped (and
 * made again): one deadline, which no traffic (a trickle of a reply's bytes) extends.
 */
const ANSWER_WITHIN = 10_000;

/** How long connecting, the TLS handshake and AUTH/SELECT may take together (one deadline). */
const CONNECT_WITHIN = 10_000;

/**
 * A refused AUTH or SELECT: the URL is wrong (a password the server does not expect, a database it
 * does not have), which no retry fixes. A reply error, so the backend does not retry it; the CLI
 * reads its name and exits 2 (cli/main.ts).
 */
export class RedisLoginRefused extends RedisReplyError {
  static readonly NAME = "RedisLoginRefused";
  override name = RedisLoginRefused.NAME;
}

/**
 * One connection to `t`, made on the first command and made again after it broke: its AUTH and
 * SELECT are answered before any command is sent on it, and a refused one drops it (the command
 * is never sent). `close()` ends it.
 */
export function redisClient(t: RedisTarget) {
  type Pending = { resolve: (r: Reply) => void; reject: (e: Error) => void };
  type Conn = { socket: Socket; pending: Pending[]; fail: (e: Error) => void };
  const where = `${t.host}:${t.port}`;
  let current: Conn | undefined;
  let closed = false;

  function open(): { conn: Conn; ready: Promise<void> } {
    const socket = t.tls
      ? tls({ host: t.host, port: t.port, ...serverName(t.host) })
      : tcp({ host: t.host, port: t.port });
    let connected: Pending | undefined;
    const fail = (error: Error) => {
      if (current === conn) current = undefined;
      connected?.reject(error);
      for (const p of conn.pending.splice(0)) p.reject(error);
      socket.destroy();
    };
    const conn: Conn = { socket, pending: [], fail };
    socket.setNoDelay(true);
    socket.on(
      "data",
      replyReader((r) => {
        const p = conn.pending.shift();
        if (p) p.resolve(r);
        else fail(new Error(`${where} sent a reply to no command: not Redis?`));
      }, fail),
    );
    let secured = !t.tls;
    socket.once("secureConnect", () => {
      secured = true;
    });
    socket.on("error", (error) => {
      // A certificate it cannot trust, or no TLS there: configuration. "TLS ..." has the shape of
      // an error reply (CODE message), which the redis backend does not retry.
      if (!secured && tlsRefusal(error))
        fail(new RedisLoginRefused(`TLS ${where}: ${error.message} (REDIS_URL is rediss://)`));
      else fail(new Error(`${where}: ${error.message}`));
    });
    socket.on("close", () => fail(new Error(`connection to ${where} closed`)));
    current = conn;
    const login: string[][] = [];
    if (t.password !== undefined)
      login.push(t.username === undefined ? ["AUTH", t.password] : ["AUTH", t.username, t.password]);
    if (t.db !== 0) login.push(["SELECT", String(t.db)]);
    // Connecting, TLS and the login: one deadline, so a server that trickles bytes cannot hold it.
    const steps = ["connecting", ...(t.tls ? ["TLS"] : []), ...login.map(([command]) => command!)];
    const deadline = setTimeout(
      () => fail(new Error(`no answer from ${where} within ${CONNECT_WITHIN} ms (${steps.join(", ")})`)),
      CONNECT_WITHIN,
    );
    const ready = new Promise<Reply>((resolve, reject) => {
      connected = { resolve, reject };
      socket.once(t.tls ? "secureConnect" : "connect", () => resolve(null));
    })
      .then(() => Promise.all(login.map((args) => request(conn, args, false))))
      .then((replies) => {
        const no = replies.find((r) => r instanceof RedisReplyError);
        if (no) {
          fail(new Error("login refused"));
          throw new RedisLoginRefused(`${no.message} (REDIS_URL's ${login[replies.indexOf(no)]![0]})`);
        }
      })
      .finally(() => {
        clearTimeout(deadline);
        connected = undefined;
      });
    ready.catch(() => {}); // the commands waiting for it throw its error
    return { conn, ready };
  }

  /** Sends a command; its reply must come within ANSWER_WITHIN of the send (`bounded`). */
  function request(conn: Conn, args: string[], bounded = true): Promise<Reply> {
    return new Promise<Reply>((resolve, reject) => {
      const deadline = bounded
        ? setTimeout(
            () => conn.fail(new Error(`no answer from ${where} within ${ANSWER_WITHIN} ms`)),
            ANSWER_WITHIN,
          )
        : undefined;
      const done = () => clearTimeout(deadline);
      conn.pending.push({
        resolve: (r) => {
          done();
          resolve(r);
        },
        reject: (e) => {
          done();
          reject(e);
        },
      });
      conn.socket.write(encodeCommand(args));
    });
  }

  let opened: ReturnType<typeof open> | undefined;
  return {
    async send(command: string, args: string[]): Promise<unknown> {
      if (closed) throw new Error("the connection is closed");
      if (opened === undefined || current !== opened.conn) opened = open();
      const { conn, ready } = opened;
      await ready;
      if (current !== conn) throw new Error(`connection to ${where} closed`);
      const value = plain(await request(conn, [command, ...args]));
      if (value instanceof RedisReplyError) throw value;
      return value;
    },
    close(): void {
      closed = true;
      current?.socket.destroy();
    },
  };
}
