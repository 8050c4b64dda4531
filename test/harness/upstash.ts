// The upstash backend's keys in Redis, for tests that read them back with the official client, and
// independent databases (a redis-server behind a bridge each) for the quorum's members.

import { startedAll } from "./servers/children.ts";
import { type RedisServer, startRedis } from "./servers/redis.ts";
import { connectResp } from "./servers/resp.ts";
import { startBridge, type UpstashBridge } from "./servers/upstash-bridge.ts";

/** The key of lock `name`: the hash tag keeps a lock's keys in one cluster slot. */
export const lockKey = (name: string): string => `leasehold:{${name}}`;
/** The key of lock `name`'s fence counter. */
export const fenceKey = (name: string): string => `leasehold:{${name}}:fence`;

/** An independent Upstash-like database: its own redis-server behind its own bridge. */
export interface UpstashDatabase {
  url: string;
  token: string;
  redis: RedisServer;
  bridge: UpstashBridge;
  /** FLUSHALL: the database forgets every lock and counter, as after a failover that lost writes. */
  wipe(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts `count` independent databases (for a quorum's members); stop them with their `stop`.
 * When one fails to start, the others are stopped and it rejects with the first failure.
 */
export async function startDatabases(count: number): Promise<UpstashDatabase[]> {
  return startedAll(
    Array.from({ length: count }, async (): Promise<UpstashDatabase> => {
      const redis = await startRedis();
      const bridge = await startBridge({ redis: redis.socket }).catch(async (error: unknown) => {
        await redis.stop();
        throw error;
      });
      return {
        url: bridge.url,
        token: bridge.token,
        redis,
        bridge,
        async wipe() {
          const c = await connectResp(redis.socket);
          try {
            await c.send(["FLUSHALL"]);
          } finally {
            c.close();
          }
        },
        async stop() {
          await bridge.stop();
          await redis.stop();
        },
      };
    }),
  );
}
