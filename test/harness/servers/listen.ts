// Test servers listen on loopback only, on a port the OS picks.
import type { Server } from "node:net";

/** Starts `server` on 127.0.0.1 and a free port; resolves `http://127.0.0.1:<port>`. */
export function listenLoopback(server: Server): Promise<string> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      const address = server.address();
      resolve(`http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`);
    });
  });
}

/**
 * A TCP port on 127.0.0.1 that was free a moment ago, for servers that take a port number
 * (redis-server, postgres) rather than choosing one themselves.
 */
export async function freePort(): Promise<number> {
  const { createServer } = await import("node:net");
  const server = createServer();
  const url = await listenLoopback(server);
  await new Promise((r) => server.close(r));
  return Number(new URL(url).port);
}
