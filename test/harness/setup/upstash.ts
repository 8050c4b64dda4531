// Global setup: one real redis-server (installed with apt-get when missing) and one Upstash-REST
// bridge in front of it (in a process of its own), shared by every test file and stopped after
// the run. Tests read the connection with `inject("upstash")`. Tests that count requests or flush scripts start their
// own bridge (and, when they flush scripts, their own redis-server) so parallel files cannot
// disturb them; `redisSocket` lets them reuse this redis-server when that is enough.
// The same redis-server also listens on a loopback TCP port for the redis backend's clients
// (ioredis, node-redis, Bun), which `inject("redis")` gives, with an ACL user and password.
import type { TestProject } from "vitest/node";
import { inOwnProcess } from "../servers/own-process.ts";
import { startRedisOnFreePort } from "../servers/redis.ts";
import { connectResp, RedisReplyError } from "../servers/resp.ts";

/** What `inject("upstash")` returns. */
export interface UpstashContext {
  /** The shared bridge's base URL, `http://127.0.0.1:<port>`. */
  url: string;
  /** The bearer token the shared bridge accepts. */
  token: string;
  /** The shared bridge's read-only token (a Redis user with read commands and EVAL_RO only). */
  readOnlyToken: string;
  /** The shared redis-server's unix socket, for `startBridge({ redis: redisSocket })`. */
  redisSocket: string;
  /** The redis-server version, such as "7.0.15". */
  redisVersion: string;
}

/** What `inject("redis")` returns: the shared redis-server over TCP, for the redis backend. */
export interface RedisContext {
  host: string;
  port: number;
  /** An ACL user with every right, and its password (register it as a secret). */
  username: string;
  password: string;
  /** `redis://user:password@127.0.0.1:port`. */
  url: string;
}

declare module "vitest" {
  export interface ProvidedContext {
    upstash: UpstashContext;
    redis: RedisContext;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const redis = await startRedisOnFreePort();
  const username = "leasehold-tcp";
  const password = `pw-${crypto.randomUUID()}`;
  let bridge: Awaited<ReturnType<typeof inOwnProcess<"bridge">>>;
  try {
    const conn = await connectResp(redis.socket);
    try {
      const reply = await conn.send(["ACL", "SETUSER", username, "on", `>${password}`, "~*", "&*", "+@all"]);
      if (reply instanceof RedisReplyError) throw reply;
    } finally {
      conn.close();
    }
    bridge = await inOwnProcess("bridge", redis.socket);
  } catch (error) {
    await redis.stop();
    throw error;
  }
  project.provide("upstash", {
    url: bridge.url,
    token: bridge.token,
    readOnlyToken: bridge.readOnlyToken,
    redisSocket: redis.socket,
    redisVersion: redis.version,
  });
  const host = "127.0.0.1";
  project.provide("redis", {
    host,
    port: redis.port,
    username,
    password,
    url: `redis://${username}:${password}@${host}:${redis.port}`,
  });
  return async () => {
    await bridge.stop();
    await redis.stop();
  };
}
