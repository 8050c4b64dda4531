// A fault-injecting HTTP proxy (node:http) for tests: it sits between the library and the Upstash
// bridge or Azurite and, per request or per client, delays, hangs, resets, answers 5xx with an
// HTML or XML page, truncates the body, or black-holes one client while the others pass.
//
// Clients are told apart by port: `client(id)` opens a dedicated loopback port for `id` and
// returns the target URL rewritten to it (same path, so Azure's SharedKey signature, which
// covers the path but not the host, still matches). Faults come from a rule function or from a
// seeded random mode; every fault injected is counted by kind. `stop()` closes every server and
// destroys every socket, hung ones included.
import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import type { Socket } from "node:net";
import { listenLoopback } from "./listen.ts";

/** What the proxy can do to one request. */
export type Fault =
  /** Wait `ms`, then forward (the request reaches the server late, even if the client gave up). */
  | { kind: "delay"; ms: number }
  /** Forward at once, wait `ms` after the server answered, then relay the answer. */
  | { kind: "delayResponse"; ms: number }
  /** Never answer. `forward: true`: the server gets and applies the request; the answer is dropped. */
  | { kind: "hang"; forward?: boolean }
  /** Reset the client's connection (TCP RST). `forward: true`: after the server applied it. */
  | { kind: "reset"; forward?: boolean }
  /** Answer `status` with a proxy-style HTML or XML error page. `forward: true`: after the server applied it. */
  | { kind: "status"; status: 500 | 502 | 503; format: "html" | "xml"; forward?: boolean }
  /**
   * Forward, then send only the first `fraction` of the server's body. `declared: true` keeps
   * the original Content-Length and closes the connection early (the client's read fails);
   * `false` declares the shortened length (the client gets a well-framed but truncated body).
   */
  | { kind: "truncate"; fraction: number; declared: boolean }
  /** Black-hole this client for `ms` from now: this and its later requests are never answered nor forwarded. */
  | { kind: "partition"; ms: number };

export type FaultKind = Fault["kind"];

/** What a rule sees about one request. */
export interface ProxyRequest {
  /** The client id given to {@link FaultProxy.client}. */
  client: string;
  /** 0-based index of this request among all requests the proxy received. */
  seq: number;
  /** 0-based index among this client's requests. */
  clientSeq: number;
  method: string;
  /** Path and query as sent. */
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** Decides the fault for a request; `undefined` (or nothing) passes it through. */
export type FaultRule = (req: ProxyRequest) => Fault | undefined | null;

/** Probabilities (0–1, per request) of each fault kind in random mode; the rest pass. */
export interface RandomFaults {
  seed: number;
  delay?: number;
  delayResponse?: number;
  hang?: number;
  reset?: number;
  status?: number;
  truncate?: number;
  partition?: number;
  /** Range of delays in ms. Default [5, 300]. */
  delayMs?: readonly [number, number];
  /** Range of partition lengths in ms. Default [200, 2_000]. */
  partitionMs?: readonly [number, number];
  /** Only these clients get faults. Default: all. */
  clients?: readonly string[];
}

export interface FaultProxy {
  /** The URL of the dedicated port for `id` (created on first call), with the target's path. */
  client(id: string): Promise<string>;
  /** Replaces the rule (random mode included). `undefined`: pass everything. */
  setRule(rule: FaultRule | RandomFaults | undefined): void;
  /** Black-holes client `id` for `ms` (default: until {@link heal}). */
  partition(id: string, ms?: number): void;
  /** Ends the partition of `id` (or of every client). Requests already black-holed stay unanswered. */
  heal(id?: string): void;
  /** Whether `id` is black-holed now. */
  isPartitioned(id: string): boolean;
  /** Faults injected so far, by kind (a black-holed request counts as `blackholed`). */
  counts(): Record<FaultKind | "blackholed" | "passed", number>;
  /** Requests received, by client. */
  requests(): Record<string, number>;
  /** Closes every server and destroys every socket, hung ones too. Idempotent. */
  stop(): Promise<void>;
}

/** mulberry32: a small seeded PRNG returning floats in [0, 1). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/**
 * A rule drawing faults at random with the given probabilities, reproducible from `seed`. Every
 * kind with a probability above 0 comes at least once early: each 16th request that draws no
 * fault gets a kind not drawn yet, so a run that the machine's load slows to a few hundred
 * requests still meets every kind (a 2 % kind went unmet in a loaded run).
 */
export function randomRule(o: RandomFaults): FaultRule {
  const rnd = seededRandom(o.seed);
  const between = (r: readonly [number, number]) => Math.round(r[0] + rnd() * (r[1] - r[0]));
  const delayMs = o.delayMs ?? [5, 300];
  const partitionMs = o.partitionMs ?? [200, 2_000];
  const order: [FaultKind, number][] = [
    ["partition", o.partition ?? 0],
    ["hang", o.hang ?? 0],
    ["reset", o.reset ?? 0],
    ["status", o.status ?? 0],
    ["truncate", o.truncate ?? 0],
    ["delay", o.delay ?? 0],
    ["delayResponse", o.delayResponse ?? 0],
  ];
  const unmet = order.filter(([, p]) => p > 0).map(([kind]) => kind);
  let quiet = 0;
  return (req) => {
    if (o.clients && !o.clients.includes(req.client)) return undefined;
    let x = rnd();
    let kind: FaultKind | undefined;
    for (const [k, p] of order) {
      if (x < p) {
        kind = k;
        break;
      }
      x -= p;
    }
    if (kind === undefined && unmet.length > 0 && ++quiet % 16 === 0) kind = unmet[0];
    if (kind === undefined) return undefined;
    if (unmet.includes(kind)) unmet.splice(unmet.indexOf(kind), 1);
    const forward = rnd() < 0.5;
    switch (kind) {
      case "partition":
        return { kind, ms: between(partitionMs) };
      case "hang":
        return { kind, forward };
      case "reset":
        return { kind, forward };
      case "status":
        return {
          kind,
          status: ([500, 502, 503] as const)[Math.floor(rnd() * 3)]!,
          format: rnd() < 0.5 ? "html" : "xml",
          forward,
        };
      case "truncate":
        return { kind, fraction: rnd() * 0.9, declared: rnd() < 0.5 };
      case "delay":
      case "delayResponse":
        return { kind, ms: between(delayMs) };
    }
  };
}

const HOP = new Set([
  "host",
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
]);

function pageFor(status: number, format: "html" | "xml"): { body: string; type: string } {
  const reason =
    status === 500 ? "Internal Server Error" : status === 502 ? "Bad Gateway" : "Service Unavailable";
  return format === "html"
    ? {
        type: "text/html; charset=utf-8",
        body: `<!DOCTYPE html>\n<html><head><title>${status} ${reason}</title></head><body><center><h1>${status} ${reason}</h1></center><hr><center>nginx</center></body></html>\n`,
      }
    : {
        type: "application/xml",
        body: `<?xml version="1.0" encoding="utf-8"?><Error><Code>${reason.replace(/ /g, "")}</Code><Message>The server is unavailable (injected by the fault proxy).</Message></Error>`,
      };
}

/**
 * Starts a proxy in front of `target` (such as `http://127.0.0.1:6379` or Azurite's
 * `http://127.0.0.1:10000/devstoreaccount1`). No port is opened until {@link FaultProxy.client}.
 */
export function startFaultProxy(target: string, rule?: FaultRule | RandomFaults): FaultProxy {
  const base = new URL(target);
  const basePath = base.pathname.replace(/\/+$/, "");
  const servers = new Map<string, { server: Server; url: Promise<string> }>();
  const sockets = new Set<Socket>();
  const timers = new Set<ReturnType<typeof setTimeout>>();
  const partitions = new Map<string, number>(); // client → end (performance.now()), Infinity: until healed
  const counts: Record<string, number> = {};
  const perClient: Record<string, number> = {};
  let seq = 0;
  let current: FaultRule | undefined;
  let stopped = false;

  const count = (kind: string) => {
    counts[kind] = (counts[kind] ?? 0) + 1;
  };
  const later = (ms: number, fn: () => void) => {
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    timers.add(t);
  };
  const setRule = (r: FaultRule | RandomFaults | undefined) => {
    current = typeof r === "object" ? randomRule(r) : r;
  };
  setRule(rule);
  const partitioned = (id: string) => {
    const end = partitions.get(id);
    if (end === undefined) return false;
    if (performance.now() < end) return true;
    partitions.delete(id);
    return false;
  };

  /** Forwards to the target; resolves the whole answer, or null when the target failed. */
  const forward = (
    req: IncomingMessage,
    body: Buffer,
  ): Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer } | null> =>
    new Promise((resolve) => {
      const headers: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && !HOP.has(k)) headers[k] = v;
      headers.host = base.host;
      if (body.length > 0 || req.method === "PUT" || req.method === "POST") {
        headers["content-length"] = String(body.length);
      }
      const up = httpRequest(
        {
          host: base.hostname,
          port: base.port,
          method: req.method,
          path: req.url,
          headers,
          agent: false,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () =>
            resolve({ status: res.statusCode ?? 502, headers: res.headers, body: Buffer.concat(chunks) }),
          );
          res.on("error", () => resolve(null));
        },
      );
      up.on("socket", (s) => {
        sockets.add(s);
        s.once("close", () => sockets.delete(s));
      });
      up.on("error", () => resolve(null));
      up.end(body);
    });

  const relay = (
    req: IncomingMessage,
    res: ServerResponse,
    answer: { status: number; headers: IncomingHttpHeaders; body: Buffer },
    truncate?: { fraction: number; declared: boolean },
  ) => {
    if (res.destroyed || res.writableEnded) return;
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(answer.headers)) if (v !== undefined && !HOP.has(k)) headers[k] = v;
    const isHead = req.method === "HEAD";
    let body = answer.body;
    if (truncate) body = body.subarray(0, Math.floor(body.length * truncate.fraction));
    if (!isHead) {
      headers["content-length"] = String(truncate?.declared ? answer.body.length : body.length);
    }
    headers.connection = "close";
    res.writeHead(answer.status, headers);
    if (isHead) {
      res.end();
    } else if (truncate?.declared) {
      // Announce the whole body, send part of it, and close: the client's read fails.
      res.write(body, () => res.destroy());
    } else {
      res.end(body);
    }
  };

  const reset = (res: ServerResponse) => {
    const s = res.socket as (Socket & { resetAndDestroy?: () => void }) | null;
    if (s?.resetAndDestroy) s.resetAndDestroy();
    else s?.destroy();
  };

  const handle = (id: string, req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("error", () => {});
    req.on("end", () => {
      if (stopped) return reset(res);
      const body = Buffer.concat(chunks);
      const info: ProxyRequest = {
        client: id,
        seq: seq++,
        clientSeq: perClient[id] ?? 0,
        method: req.method ?? "GET",
        url: req.url ?? "/",
        headers: req.headers,
        body: body.toString("utf8"),
      };
      perClient[id] = info.clientSeq + 1;
      if (partitioned(id)) {
        count("blackholed");
        return; // never answered, never forwarded; stop() destroys the socket
      }
      const fault = current?.(info) ?? undefined;
      if (!fault) {
        count("passed");
        void forward(req, body).then((a) => (a ? relay(req, res, a) : reset(res)));
        return;
      }
      count(fault.kind);
      switch (fault.kind) {
        case "partition":
          partitions.set(id, performance.now() + fault.ms);
          return;
        case "delay":
          return later(fault.ms, () => {
            void forward(req, body).then((a) => (a ? relay(req, res, a) : reset(res)));
          });
        case "delayResponse":
          void forward(req, body).then((a) => later(fault.ms, () => (a ? relay(req, res, a) : reset(res))));
          return;
        case "hang":
          if (fault.forward) void forward(req, body);
          return;
        case "reset":
          if (fault.forward) void forward(req, body).then(() => reset(res));
          else reset(res);
          return;
        case "status": {
          const page = pageFor(fault.status, fault.format);
          const send = () =>
            relay(req, res, {
              status: fault.status,
              headers: { "content-type": page.type },
              body: Buffer.from(page.body),
            });
          if (fault.forward) void forward(req, body).then(send);
          else send();
          return;
        }
        case "truncate":
          void forward(req, body).then((a) => (a ? relay(req, res, a, fault) : reset(res)));
          return;
      }
    });
  };

  const listen = (id: string): Promise<string> => {
    const server = createServer((req, res) => handle(id, req, res));
    server.keepAliveTimeout = 1_000;
    server.on("connection", (s: Socket) => {
      sockets.add(s);
      s.on("error", () => {});
      s.once("close", () => sockets.delete(s));
    });
    const url = listenLoopback(server).then((origin) => `${origin}${basePath}`);
    servers.set(id, { server, url });
    return url;
  };

  let stopping: Promise<void> | undefined;
  return {
    client(id) {
      if (stopped) return Promise.reject(new Error("fault proxy is stopped"));
      return servers.get(id)?.url ?? listen(id);
    },
    setRule,
    partition(id, ms = Number.POSITIVE_INFINITY) {
      partitions.set(id, performance.now() + ms);
    },
    heal(id) {
      if (id === undefined) partitions.clear();
      else partitions.delete(id);
    },
    isPartitioned: partitioned,
    counts() {
      const out = {
        delay: 0,
        delayResponse: 0,
        hang: 0,
        reset: 0,
        status: 0,
        truncate: 0,
        partition: 0,
        blackholed: 0,
        passed: 0,
      };
      return Object.assign(out, counts);
    },
    requests: () => ({ ...perClient }),
    stop() {
      stopping ??= (async () => {
        stopped = true;
        for (const t of timers) clearTimeout(t);
        timers.clear();
        const closing = [...servers.values()].map(
          ({ server }) => new Promise<void>((resolve) => server.close(() => resolve())),
        );
        for (const { server } of servers.values()) server.closeAllConnections();
        for (const s of sockets) s.destroy();
        sockets.clear();
        await Promise.all(closing);
      })();
      return stopping;
    },
  };
}
