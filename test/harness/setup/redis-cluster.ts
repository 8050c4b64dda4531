// Global setup: a 3-primary Redis Cluster (test/harness/servers/redis-cluster.ts) for the redis
// backend's cluster clients (ioredis Cluster, node-redis createCluster); `inject("redisCluster")`.
import type { TestProject } from "vitest/node";
import { startRedisCluster } from "../servers/redis-cluster.ts";

/** What `inject("redisCluster")` returns. */
export interface RedisClusterContext {
  /** The nodes' TCP ports on 127.0.0.1. */
  ports: number[];
}

declare module "vitest" {
  export interface ProvidedContext {
    redisCluster: RedisClusterContext;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const cluster = await startRedisCluster();
  project.provide("redisCluster", { ports: cluster.ports });
  return () => cluster.stop();
}
