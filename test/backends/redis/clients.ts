// The Redis clients the redis backend accepts, connected to the test servers: the shared
// redis-server over TCP (test/harness/setup/upstash.ts), the 3-node cluster
// (test/harness/setup/redis-cluster.ts) and the Upstash REST bridge. Each is made on first use
// and closed by `closeClients()`. (Bun's RedisClient runs under Bun: test/backends/bun.test.ts.)
// ioredis and node-redis in both majors users have: 5 ("ioredis", "redis") and 6 ("ioredis6",
// "redis6", npm aliases in package.json); docs/backends/redis.md names these versions.
import { Redis as UpstashRedis } from "@upstash/redis";
import { Redis as IORedis, Cluster as IORedisCluster } from "ioredis";
import { Redis as IORedis6, Cluster as IORedis6Cluster } from "ioredis6";
import { createClient, createCluster } from "redis";
import { createClient as createClient6, createCluster as createCluster6 } from "redis6";
import { inject } from "vitest";
import type { RedisClientLike } from "../../../src/backends/redis/index.ts";
import { registerSecret } from "../../harness/secrets.ts";
import { type Made as MadeClient, sharedClients } from "../../harness/shapes.ts";

const ctx = inject("redis");
registerSecret(ctx.password);
const { ports } = inject("redisCluster");
const upstash = inject("upstash");

type Made = MadeClient<RedisClientLike>;

export const SHAPES: Record<string, () => Promise<Made>> = {
  ioredis: async () => {
    const c = new IORedis({ host: ctx.host, port: ctx.port, username: ctx.username, password: ctx.password });
    return { client: c, close: () => c.quit() };
  },
  "ioredis Cluster": async () => {
    const c = new IORedisCluster(ports.map((port) => ({ host: "127.0.0.1", port })));
    return { client: c, close: () => c.quit() };
  },
  "ioredis 6": async () => {
    const c = new IORedis6({
      host: ctx.host,
      port: ctx.port,
      username: ctx.username,
      password: ctx.password,
    });
    return { client: c, close: () => c.quit() };
  },
  "ioredis 6 Cluster": async () => {
    const c = new IORedis6Cluster(ports.map((port) => ({ host: "127.0.0.1", port })));
    return { client: c, close: () => c.quit() };
  },
  "node-redis": async () => {
    const c = await createClient({ url: ctx.url }).connect();
    return { client: c, close: () => c.close() };
  },
  "node-redis cluster": async () => {
    const c = await createCluster({
      rootNodes: ports.map((port) => ({ url: `redis://127.0.0.1:${port}` })),
    }).connect();
    return { client: c, close: () => c.close() };
  },
  "node-redis 6": async () => {
    const c = await createClient6({ url: ctx.url }).connect();
    return { client: c, close: () => c.close() };
  },
  "node-redis 6 cluster": async () => {
    const c = await createCluster6({
      rootNodes: ports.map((port) => ({ url: `redis://127.0.0.1:${port}` })),
    }).connect();
    return { client: c, close: () => c.close() };
  },
  "@upstash/redis": async () => ({
    client: new UpstashRedis({ url: upstash.url, token: upstash.token }),
    close: async () => {},
  }),
};

export const { client, closeClients } = sharedClients(SHAPES);
