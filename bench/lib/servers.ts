// The real servers the suite runs against, started the way the tests start them
// (test/harness/servers/*): redis-server behind the Upstash bridge, Azurite, and workerd with the
// LeaseholdLock Durable Object and its route; plus a counting HTTP proxy for Azurite's round trips.
import { spawn } from "node:child_process";
import { Agent, createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import {
  AZURITE_ACCOUNT,
  AZURITE_KEY,
  type AzuriteServer,
  startAzurite,
} from "../../test/harness/servers/azurite.ts";
import { type PostgresServer, startPostgres } from "../../test/harness/servers/postgres.ts";
import { type RedisServer, startRedisOnFreePort } from "../../test/harness/servers/redis.ts";
import { startBridge, type UpstashBridge } from "../../test/harness/servers/upstash-bridge.ts";

export interface Servers {
  redis: RedisServer;
  bridge: UpstashBridge;
  azurite: AzuriteServer;
  /** PostgreSQL, for item 7 (bench/clients.ts); redis.port is the redis-server's TCP port. */
  postgres: PostgresServer;
  azure: { accountUrl: string; accountName: string; accountKey: string; container: string };
  /** workerd (Miniflare, in a child process) with the LeaseholdLock object; `url` is its lockHandler route. */
  workerd: { url: string; token: string; origin: string };
  /** Stops everything this started. Idempotent. */
  stop(): Promise<void>;
}

export async function startServers(): Promise<Servers> {
  const stops: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const s of stops.splice(0).reverse()) await s().catch(() => {});
  };
  try {
    const redis = await startRedisOnFreePort();
    stops.push(() => redis.stop());
    const bridge = await startBridge({ redis: redis.socket });
    stops.push(() => bridge.stop());
    const azurite = await startAzurite();
    stops.push(() => azurite.stop());
    const workerd = await startWorkerdChild(stops);
    const postgres = await startPostgres();
    stops.push(() => postgres.stop());
    return {
      workerd,
      redis,
      bridge,
      azurite,
      postgres,
      azure: {
        accountUrl: azurite.accountUrl,
        accountName: AZURITE_ACCOUNT,
        accountKey: AZURITE_KEY,
        container: "bench",
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Starts bench/lib/workerd-child.ts; resolves its coordinates; `stops` gets its stop. */
function startWorkerdChild(stops: (() => Promise<void>)[]): Promise<Servers["workerd"]> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", new URL("./workerd-child.ts", import.meta.url).pathname],
    {
      stdio: ["pipe", "pipe", "inherit"],
    },
  );
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  stops.push(async () => {
    child.stdin!.end();
    await exited;
  });
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (d) => {
      out += d;
      const line = out.split("\n").find((l) => l.startsWith("{"));
      if (line) resolve(JSON.parse(line) as Servers["workerd"]);
    });
    child.once("exit", (code) =>
      reject(new Error(`bench: workerd child exited with ${code}: no coordinates`)),
    );
  });
}

/** A plain HTTP proxy in front of `port` that counts requests and sequential round trips. */
export interface CountingProxy {
  /** Base URL of the proxy: `http://127.0.0.1:<port>`. */
  readonly origin: string;
  /**
   * requests: how many arrived; rounds: how many arrived while none was in flight (parallel
   * requests of one round overlap and count once); methods: per `METHOD ?comp` label.
   */
  stats(): { requests: number; rounds: number; kinds: Record<string, number> };
  reset(): void;
  stop(): Promise<void>;
}

export async function countingProxy(port: number): Promise<CountingProxy> {
  let requests = 0;
  let rounds = 0;
  let inflight = 0;
  let kinds: Record<string, number> = {};
  const agent = new Agent({ keepAlive: true });
  const server = createServer((req, res) => {
    requests++;
    if (inflight++ === 0) rounds++;
    const comp = new URL(req.url ?? "/", "http://x").searchParams.get("comp");
    const kind = `${req.method}${comp ? ` ?comp=${comp}` : ""}${req.headers["x-ms-lease-action"] ? ` ${req.headers["x-ms-lease-action"]}` : ""}`;
    kinds[kind] = (kinds[kind] ?? 0) + 1;
    const upstream = request(
      { host: "127.0.0.1", port, method: req.method, path: req.url, headers: req.headers, agent },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
        up.on("end", () => inflight--);
      },
    );
    upstream.on("error", () => {
      inflight--;
      res.destroy();
    });
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port: own } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${own}`,
    stats: () => ({ requests, rounds, kinds: { ...kinds } }),
    reset: () => {
      requests = 0;
      rounds = 0;
      kinds = {};
    },
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
        agent.destroy();
      }),
  };
}
