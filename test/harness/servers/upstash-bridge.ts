// A small Upstash-REST server in front of a real redis-server, for tests and benchmarks.
// It follows shared/PROTOCOLS.md: POST `/`, `/pipeline`, `/multi-exec`; bearer auth (401
// {"error":"Unauthorized"}); JSON numbers and booleans sent to Redis as strings; single
// commands 200 {result} or 400 {error}; pipelines 200 with one {result}|{error} per command;
// multi-exec as MULTI … EXEC on one connection (DISCARD and 400 when a command fails to
// queue); bulk → string, integer → number, nil → null (Lua false too), arrays recursively;
// `Upstash-Encoding: base64` encodes every string except the status OK. It also sends an
// `upstash-sync-token` header like the real service. It counts requests for round-trip tests.
// A second, read-only token runs its commands as a Redis ACL user with read rights only, so
// redis-server itself answers NOPERM to a write (400 {"error":"NOPERM ..."}, as Upstash answers a
// command it refuses). `failWith` fakes answers redis-server cannot give (Upstash's plan limits).
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { listenLoopback } from "./listen.ts";
import { connectResp, RedisReplyError, type Reply, type RespConnection, Status } from "./resp.ts";

/** Request counts since start or the last {@link UpstashBridge.resetStats}. */
export interface BridgeStats {
  /** Every HTTP request received, whatever its path or outcome. */
  total: number;
  /** Requests per path, such as `{ "/": 3, "/pipeline": 1 }`. */
  paths: Record<string, number>;
  /** Redis commands run (a pipeline of 3 counts 3; MULTI/EXEC themselves are not counted). */
  commands: number;
}

/** A running bridge. */
export interface UpstashBridge {
  /** Base URL, `http://127.0.0.1:<port>`, to pass as `UPSTASH_REDIS_REST_URL`. */
  readonly url: string;
  /** The bearer token it accepts. */
  readonly token: string;
  /** A second bearer token whose commands run as a Redis user with {@link BridgeOptions.readOnlyRules}. */
  readonly readOnlyToken: string;
  /** A copy of the request counts. */
  stats(): BridgeStats;
  resetStats(): void;
  /**
   * Until called with null, answers every request that carries a valid token with `status` and
   * `{"error": error}` without running it: for answers redis-server cannot produce, such as
   * Upstash's `ERR max daily request limit exceeded`.
   */
  failWith(answer: { status: number; error: string } | null): void;
  /** Closes the HTTP server (dropping open connections) and every Redis connection. Idempotent. */
  stop(): Promise<void>;
}

export interface BridgeOptions {
  /** The redis-server to forward to: a unix socket path or a TCP port on 127.0.0.1. */
  redis: string | number;
  /** The bearer token to accept. Default: a random one. */
  token?: string;
  /** The read-only bearer token to accept. Default: a random one. */
  readOnlyToken?: string;
  /**
   * The Redis ACL command rules of the read-only token's user. Default `["+@read", "+eval_ro",
   * "+evalsha_ro"]`; `["+@read"]` is a user that may not run read-only scripts either.
   */
  readOnlyRules?: string[];
}

type Json = string | number | null | Json[] | { result?: Json; error?: string };

function toJson(reply: Reply, base64: boolean): Json {
  if (reply === null || typeof reply === "number") return reply;
  if (Buffer.isBuffer(reply)) return base64 ? reply.toString("base64") : reply.toString("utf8");
  if (reply instanceof Status) {
    return base64 && reply.text !== "OK" ? Buffer.from(reply.text).toString("base64") : reply.text;
  }
  if (reply instanceof RedisReplyError) return { error: reply.message };
  return reply.map((r) => toJson(r, base64));
}

function entry(reply: Reply, base64: boolean): { result: Json } | { error: string } {
  return reply instanceof RedisReplyError ? { error: reply.message } : { result: toJson(reply, base64) };
}

class BadRequest extends Error {}

function toCommand(value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0)
    throw new BadRequest("ERR command must be a non-empty array");
  return value.map((arg) => {
    if (typeof arg === "string") return arg;
    if (typeof arg === "number" || typeof arg === "boolean") return String(arg);
    throw new BadRequest(`ERR unsupported argument type: ${arg === null ? "null" : typeof arg}`);
  });
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

/** Starts a bridge on 127.0.0.1 with a free port. */
export async function startBridge(options: BridgeOptions): Promise<UpstashBridge> {
  const token = options.token ?? `bridge-${crypto.randomUUID()}`;
  const readOnlyToken = options.readOnlyToken ?? `bridge-ro-${crypto.randomUUID()}`;
  // One ACL user per bridge, so bridges with different rules can share a redis-server.
  const readOnlyUser = [`bridge-ro-${crypto.randomUUID()}`, crypto.randomUUID()] as const;
  const idle: Record<"full" | "readOnly", RespConnection[]> = { full: [], readOnly: [] };
  const all = new Set<RespConnection>();
  let stats: BridgeStats = { total: 0, paths: {}, commands: 0 };
  let syncToken = 0;
  let closing = false;
  let failure: { status: number; error: string } | null = null;

  const admin = await connectResp(options.redis);
  try {
    const rules = options.readOnlyRules ?? ["+@read", "+eval_ro", "+evalsha_ro"];
    const ok = await admin.send([
      "ACL",
      "SETUSER",
      readOnlyUser[0],
      "reset",
      "on",
      `>${readOnlyUser[1]}`,
      "~*",
      "&*",
      ...rules,
    ]);
    if (ok instanceof RedisReplyError) throw ok;
  } finally {
    admin.close();
  }

  // Small pools: each HTTP request borrows a connection, so a blocking command or a
  // transaction never holds up another request.
  async function borrow(role: "full" | "readOnly"): Promise<RespConnection> {
    for (let c = idle[role].pop(); c; c = idle[role].pop()) if (!c.broken) return c;
    const c = await connectResp(options.redis);
    all.add(c);
    if (role === "readOnly") {
      const ok = await c.send(["AUTH", ...readOnlyUser]);
      if (ok instanceof RedisReplyError) throw ok;
    }
    return c;
  }
  function giveBack(role: "full" | "readOnly", c: RespConnection): void {
    if (closing || c.broken || idle[role].length >= 16) {
      c.close();
      all.delete(c);
    } else idle[role].push(c);
  }

  async function run(
    role: "full" | "readOnly",
    path: string,
    body: unknown,
    base64: boolean,
  ): Promise<[number, unknown]> {
    if (path === "/") {
      const command = toCommand(body);
      stats.commands++;
      const c = await borrow(role);
      try {
        const reply = await c.send(command);
        return reply instanceof RedisReplyError
          ? [400, { error: reply.message }]
          : [200, { result: toJson(reply, base64) }];
      } finally {
        giveBack(role, c);
      }
    }
    if (!Array.isArray(body) || body.length === 0)
      throw new BadRequest("ERR pipeline must be a non-empty array");
    const commands = body.map(toCommand);
    stats.commands += commands.length;
    const c = await borrow(role);
    try {
      if (path === "/pipeline") {
        const replies = await Promise.all(commands.map((cmd) => c.send(cmd)));
        return [200, replies.map((r) => entry(r, base64))];
      }
      const queued = await Promise.all([c.send(["MULTI"]), ...commands.map((cmd) => c.send(cmd))]);
      const failed = queued.find((r) => r instanceof RedisReplyError);
      if (failed) {
        await c.send(["DISCARD"]);
        return [400, { error: failed.message }];
      }
      const replies = await c.send(["EXEC"]);
      if (replies instanceof RedisReplyError) return [400, { error: replies.message }];
      if (!Array.isArray(replies)) return [400, { error: "ERR transaction aborted" }];
      return [200, replies.map((r) => entry(r, base64))];
    } finally {
      giveBack(role, c);
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? "/", "http://bridge").pathname;
    stats.total++;
    stats.paths[path] = (stats.paths[path] ?? 0) + 1;
    const reply = (status: number, payload: unknown) => {
      const text = JSON.stringify(payload);
      res.writeHead(status, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(text),
        "upstash-sync-token": String(++syncToken),
      });
      res.end(text);
    };
    const raw = await readBody(req);
    const auth = req.headers.authorization;
    const role = auth === `Bearer ${token}` ? "full" : auth === `Bearer ${readOnlyToken}` ? "readOnly" : null;
    if (!role) return reply(401, { error: "Unauthorized" });
    if (failure) return reply(failure.status, { error: failure.error });
    if (req.method !== "POST") return reply(405, { error: "ERR only POST is supported" });
    if (path !== "/" && path !== "/pipeline" && path !== "/multi-exec")
      return reply(404, { error: `ERR unknown path ${path}` });
    let body: unknown;
    try {
      body = JSON.parse(raw);
    } catch {
      return reply(400, { error: "ERR failed to parse JSON body" });
    }
    const base64 = String(req.headers["upstash-encoding"] ?? "").toLowerCase() === "base64";
    try {
      const [status, payload] = await run(role, path, body, base64);
      reply(status, payload);
    } catch (error) {
      if (error instanceof BadRequest) return reply(400, { error: error.message });
      reply(500, { error: `ERR bridge: ${(error as Error).message}` });
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  const url = await listenLoopback(server);
  let stopped: Promise<void> | undefined;
  return {
    url,
    token,
    readOnlyToken,
    failWith: (answer) => {
      failure = answer;
    },
    stats: () => ({ ...stats, paths: { ...stats.paths } }),
    resetStats: () => {
      stats = { total: 0, paths: {}, commands: 0 };
    },
    stop() {
      stopped ??= new Promise<void>((resolve) => {
        closing = true;
        server.close(() => resolve());
        server.closeAllConnections();
        for (const c of all) c.close();
        all.clear();
        idle.full.length = 0;
        idle.readOnly.length = 0;
      });
      return stopped;
    },
  };
}
