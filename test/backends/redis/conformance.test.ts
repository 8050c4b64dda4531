// The backend conformance suite against the redis backend, once per client shape it accepts:
// ioredis (Redis, Cluster), node-redis (client, cluster) and @upstash/redis, on the real
// redis-server (standalone: the shared one; cluster: three nodes). Bun's RedisClient: under Bun,
// test/backends/bun.test.ts.
import { afterAll, describe, it } from "vitest";
import { redis } from "../../../src/backends/redis/index.ts";
import { testBackend } from "../../../src/testing/index.ts";
import { client, closeClients, SHAPES } from "./clients.ts";

afterAll(closeClients);

// Every check on a lock name of its own: they run concurrently (vitest's 5 at once), as they mostly
// wait on timers.
for (const label of Object.keys(SHAPES)) {
  describe.concurrent(label, () => {
    testBackend(
      { describe, it },
      {
        backend: async () => redis(await client(label)),
        // 1.5 s, so a stop margin of 300 ms: five checks share this worker's event loop, and with
        // 500 ms (100 ms) a loaded run saw a renewal timer 193 ms late beside a 100-contender
        // burst, which a lease rightly takes for a stalled event loop.
        ttl: 1_500,
        cycles: 200,
        prefix: `conformance-redis-${label.replace(/\W+/g, "-")}`,
      },
    );
  });
}
