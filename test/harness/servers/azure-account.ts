// An answering proxy in front of Azurite that plays a real storage account where Azurite cannot:
// a rule answers chosen requests itself (the 409 a Data Lake Gen2 account gives a page blob, the
// 400 BlobTypeNotSupported of premium accounts, a 411 for a PUT without Content-Length); every
// other request goes on to Azurite unchanged (same path, so SharedKey signatures still match).
// Also a FetchLike that sends exactly the headers it is given, nothing implicit.
import { createServer, request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { connect, type Socket } from "node:net";
import type { FetchLike } from "../../../src/backend.ts";
import { listenLoopback } from "./listen.ts";

/** What a rule sees of one request. */
export interface AccountRequest {
  method: string;
  /** Path and query as sent. */
  url: string;
  headers: IncomingHttpHeaders;
}

/** An answer made up by the proxy: status and Azure error code (header and XML body). */
export interface AccountAnswer {
  status: number;
  code: string;
}

export interface AccountProxy {
  /** Azurite's account URL through the proxy: `http://127.0.0.1:<port>/devstoreaccount1`. */
  accountUrl: string;
  /** Every request received, in order. */
  requests: AccountRequest[];
  stop(): Promise<void>;
}

/**
 * Starts the proxy in front of `target` (Azurite's account URL). `rule` answers a request or
 * passes it (undefined). `requireContentLength`: a PUT without Content-Length gets real Azure's
 * 411 MissingContentLengthHeader.
 */
export async function startAccountProxy(
  target: string,
  opts: { rule?: (req: AccountRequest) => AccountAnswer | undefined; requireContentLength?: boolean },
): Promise<AccountProxy> {
  const base = new URL(target);
  const requests: AccountRequest[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const info: AccountRequest = { method: req.method ?? "GET", url: req.url ?? "/", headers: req.headers };
      requests.push(info);
      const missingLength =
        opts.requireContentLength && info.method === "PUT" && req.headers["content-length"] === undefined;
      const answer = missingLength ? { status: 411, code: "MissingContentLengthHeader" } : opts.rule?.(info);
      if (answer) {
        const body = `<?xml version="1.0" encoding="utf-8"?><Error><Code>${answer.code}</Code><Message>answered by the test proxy</Message></Error>`;
        res.writeHead(answer.status, {
          "x-ms-error-code": answer.code,
          "content-type": "application/xml",
          "content-length": Buffer.byteLength(body),
        });
        res.end(info.method === "HEAD" ? undefined : body);
        return;
      }
      const body = Buffer.concat(chunks);
      const headers: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(req.headers)) {
        if (v !== undefined && k !== "host" && k !== "connection") headers[k] = v;
      }
      headers.host = base.host;
      if (info.method === "PUT") headers["content-length"] = String(body.length);
      const up = httpRequest(
        { host: base.hostname, port: base.port, method: info.method, path: info.url, headers, agent: false },
        (upRes) => {
          const parts: Buffer[] = [];
          upRes.on("data", (c: Buffer) => parts.push(c));
          upRes.on("end", () => {
            const out: Record<string, string | string[]> = {};
            for (const [k, v] of Object.entries(upRes.headers)) {
              if (v !== undefined && k !== "connection" && k !== "transfer-encoding") out[k] = v;
            }
            const payload = Buffer.concat(parts);
            if (info.method !== "HEAD") out["content-length"] = String(payload.length);
            res.writeHead(upRes.statusCode ?? 502, out);
            res.end(info.method === "HEAD" ? undefined : payload);
          });
        },
      );
      up.on("error", () => res.destroy());
      up.end(body);
    });
  });
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
  });
  const origin = await listenLoopback(server);
  return {
    accountUrl: `${origin}${base.pathname.replace(/\/+$/, "")}`,
    requests,
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
}

/**
 * A FetchLike over a raw socket (HTTP/1.1, one request per connection) that sends exactly the
 * headers it is given plus Host and `Connection: close`: no implicit Content-Length, unlike
 * `fetch` or node:http. Reads the answer to the end of the connection.
 */
export function exactHeadersFetch(): FetchLike {
  return (url, init) =>
    new Promise((resolve, reject) => {
      const u = new URL(url);
      const socket = connect(Number(u.port || 80), u.hostname);
      const lines = [
        `${init.method} ${u.pathname}${u.search} HTTP/1.1`,
        `host: ${u.host}`,
        "connection: close",
        ...Object.entries(init.headers).map(([k, v]) => `${k}: ${v}`),
      ];
      const chunks: Buffer[] = [];
      socket.on("data", (c: Buffer) => chunks.push(c));
      socket.on("error", reject);
      socket.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        const cut = text.indexOf("\r\n\r\n");
        const [statusLine = "", ...headerLines] = text.slice(0, cut).split("\r\n");
        const headers = new Map<string, string>();
        for (const line of headerLines) {
          const colon = line.indexOf(":");
          headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
        }
        const body = text.slice(cut + 4);
        resolve({
          status: Number(statusLine.split(" ")[1]),
          headers: { get: (name: string) => headers.get(name.toLowerCase()) ?? null },
          text: async () => body,
        });
      });
      socket.write(`${lines.join("\r\n")}\r\n\r\n${init.body ?? ""}`);
    });
}
