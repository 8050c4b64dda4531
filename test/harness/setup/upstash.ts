// Global setup: one real redis-server (installed with apt-get when missing) and one Upstash-REST
// bridge in front of it, shared by every test file and stopped after the run. Tests read the
// connection with `inject("upstash")`. Tests that count requests or flush scripts start their
// own bridge (and, when they flush scripts, their own redis-server) so parallel files cannot
// disturb them; `redisSocket` lets them reuse this redis-server when that is enough.
import type { TestProject } from "vitest/node";
import { startRedis } from "../servers/redis.ts";
import { startBridge } from "../servers/upstash-bridge.ts";

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

declare module "vitest" {
  export interface ProvidedContext {
    upstash: UpstashContext;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const redis = await startRedis();
  let bridge: Awaited<ReturnType<typeof startBridge>>;
  try {
    bridge = await startBridge({ redis: redis.socket });
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
  return async () => {
    await bridge.stop();
    await redis.stop();
  };
}
