// Tiny loopback HTTP servers that misbehave on purpose (a proxy's 502 page, a reply cut short, a
// request that never gets an answer): faults the real bridge and redis-server cannot produce.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { listenLoopback } from "./listen.ts";

export interface FaultServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** Requests received so far. */
  readonly requests: number;
  /** Closes the server and destroys every open connection, answered or not. Idempotent. */
  stop(): Promise<void>;
}

/** Starts a server on 127.0.0.1 with a free port; `handler` gets each request with its whole body. */
export async function startFaultServer(
  handler: (req: IncomingMessage, res: ServerResponse, body: string) => void,
): Promise<FaultServer> {
  let requests = 0;
  const server = createServer((req, res) => {
    requests++;
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => handler(req, res, Buffer.concat(chunks).toString("utf8")));
  });
  const url = await listenLoopback(server);
  let stopped: Promise<void> | undefined;
  return {
    url,
    get requests() {
      return requests;
    },
    stop() {
      stopped ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return stopped;
    },
  };
}

/** A handler that answers `status` with `body` as `content-type`. */
export function answer(status: number, body: string, contentType = "application/json") {
  return (_req: IncomingMessage, res: ServerResponse): void => {
    res.writeHead(status, { "content-type": contentType, "content-length": Buffer.byteLength(body) });
    res.end(body);
  };
}
