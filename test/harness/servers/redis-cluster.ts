// A 3-primary Redis Cluster on loopback for the redis backend's cluster clients: three
// redis-servers with --cluster-enabled, slots split in three with CLUSTER ADDSLOTSRANGE, joined
// with CLUSTER MEET; ready when every node reports cluster_state:ok. No replicas (lean: the
// tests need the slot routing, not failover).
import { type RedisServer, startRedisOnFreePort } from "./redis.ts";
import { connectResp, RedisReplyError, type Reply } from "./resp.ts";

/** A running cluster. */
export interface RedisCluster {
  /** The nodes' TCP ports on 127.0.0.1. */
  readonly ports: number[];
  /** Stops every node. Idempotent. */
  stop(): Promise<void>;
}

async function command(port: number, args: string[]): Promise<Reply> {
  const conn = await connectResp(port);
  try {
    const reply = await conn.send(args);
    if (reply instanceof RedisReplyError) throw new Error(`${args.join(" ")}: ${reply.message}`);
    return reply;
  } finally {
    conn.close();
  }
}

/** Starts three primaries holding slots 0-5460, 5461-10922 and 10923-16383. */
export async function startRedisCluster(): Promise<RedisCluster> {
  const nodes: RedisServer[] = [];
  const stop = async () => {
    await Promise.all(nodes.map((n) => n.stop()));
  };
  try {
    const started = await Promise.allSettled(
      [0, 1, 2].map(() =>
        startRedisOnFreePort(async (more) => [
          "--cluster-enabled",
          "yes",
          "--cluster-port",
          String(await more()),
          "--cluster-node-timeout",
          "5000",
        ]),
      ),
    );
    for (const r of started) if (r.status === "fulfilled") nodes.push(r.value);
    const failed = started.find((r) => r.status === "rejected");
    if (failed) throw (failed as PromiseRejectedResult).reason;
    const ports = nodes.map((n) => n.port);
    const ranges = [
      [0, 5460],
      [5461, 10922],
      [10923, 16383],
    ] as const;
    for (const [i, port] of ports.entries()) {
      const [from, to] = ranges[i]!;
      await command(port, ["CLUSTER", "ADDSLOTSRANGE", String(from), String(to)]);
    }
    // Bus ports: each node's own (CLUSTER MEET ip port cluster-bus-port).
    const buses = await Promise.all(
      ports.map(async (port) => String(await command(port, ["CONFIG", "GET", "cluster-port"]))),
    );
    for (let i = 1; i < ports.length; i++) {
      const bus = /,?(\d+)$/.exec(buses[i]!)?.[1];
      await command(ports[0]!, ["CLUSTER", "MEET", "127.0.0.1", String(ports[i]), bus!]);
    }
    const t0 = Date.now();
    const deadline = t0 + 20_000;
    for (;;) {
      const infos = await Promise.all(ports.map((p) => command(p, ["CLUSTER", "INFO"])));
      if (infos.every((info) => String(info).includes("cluster_state:ok"))) break;
      if (Date.now() > deadline)
        throw new Error("the Redis cluster did not reach cluster_state:ok within 20 s");
      await new Promise((r) => setTimeout(r, 50));
    }
    return { ports, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
