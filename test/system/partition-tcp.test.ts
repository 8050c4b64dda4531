// Partition over TCP (test/system/partition.test.ts for the backends over a client's own
// connection): a TCP fault proxy holds every byte of the holder's connection. Its signal must
// abort while the lock still has time left on the server (read straight from the server at the
// moment of the abort), and the other contender, connected directly, acquires only after that.
import IORedis from "ioredis";
import pg from "pg";
import { afterEach, describe, expect, inject, it } from "vitest";
import { postgres } from "../../src/backends/postgres/index.ts";
import { redis } from "../../src/backends/redis/index.ts";
import { type Backend, createMutex, type Lease } from "../../src/index.ts";
import { registerSecret } from "../harness/secrets.ts";
import { startTcpFaultProxy } from "../harness/servers/tcp-fault-proxy.ts";

const redisCtx = inject("redis");
const pgCtx = inject("postgres");
registerSecret(redisCtx.password);
registerSecret(pgCtx.password);

const cleanup: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

interface Setup {
  /** The server's port, to put the proxy in front of. */
  port: number;
  /** A backend connected to `port` (the proxy's, or the server's). */
  backend(port: number): Backend;
  /** Time left on the server for `name`'s lease, and its holder. */
  probe(name: string): Promise<{ leftMs: number; holder: string | undefined }>;
}

const setups: Record<string, () => Promise<Setup>> = {
  redis: async () => {
    const connect = (port: number) => {
      const c = new IORedis({
        host: "127.0.0.1",
        port,
        username: redisCtx.username,
        password: redisCtx.password,
      });
      c.on("error", () => {});
      cleanup.push(() => c.disconnect());
      return c;
    };
    const direct = connect(redisCtx.port);
    return {
      port: redisCtx.port,
      backend: (port) => redis(connect(port)),
      async probe(name) {
        const key = `leasehold:{${name}}`;
        const [pttl, value] = await Promise.all([direct.pttl(key), direct.get(key)]);
        return { leftMs: pttl, holder: value?.split("|")[2] };
      },
    };
  },
  postgres: async () => {
    const connect = (port: number) => {
      const pool = new pg.Pool({ connectionString: pgCtx.url.replace(`:${pgCtx.port}/`, `:${port}/`) });
      pool.on("error", () => {});
      cleanup.push(() => pool.end().catch(() => {}));
      return pool;
    };
    const direct = connect(pgCtx.port);
    await postgres(direct, { table: "partition_tcp", createTable: true }).inspect({ key: "none" });
    return {
      port: pgCtx.port,
      backend: (port) => postgres(connect(port), { table: "partition_tcp" }),
      async probe(name) {
        const { rows } = await direct.query(
          "SELECT owner, extract(epoch FROM expires_at - clock_timestamp()) * 1000 AS left FROM partition_tcp WHERE name = $1",
          [name],
        );
        return { leftMs: Number(rows[0]?.left ?? -1), holder: rows[0]?.owner };
      },
    };
  },
};

describe.each(Object.keys(setups))("%s", (label) => {
  it("the holder aborts while its lease still has time on the server; the other acquires only after", async () => {
    const s = await setups[label]!();
    const proxy = await startTcpFaultProxy(s.port);
    cleanup.push(() => proxy.stop());
    const name = `partition-tcp-${crypto.randomUUID().slice(0, 8)}`;
    const ttl = 2_000;
    const a = createMutex(s.backend(proxy.port), { name, ttl, owner: "A" });
    const b = createMutex(s.backend(s.port), { name, ttl, owner: "B", retryDelay: 50 });
    const leaseA: Lease = await a.acquire({ timeout: 5_000 });
    cleanup.push(() => leaseA.release().catch(() => {}));
    await leaseA.renew(); // a renewal went through before the partition
    const aborted = new Promise<{ at: number; probe: Awaited<ReturnType<Setup["probe"]>> }>(
      (resolve, reject) => {
        leaseA.signal.addEventListener(
          "abort",
          () => {
            const at = performance.now();
            s.probe(name).then((probe) => resolve({ at, probe }), reject);
          },
          { once: true },
        );
      },
    );
    const tPartition = performance.now();
    proxy.partition();
    const acquiredB = b.acquire({ timeout: 10_000 }).then((lease) => ({ lease, at: performance.now() }));
    const abort = await aborted;
    const got = await acquiredB;
    cleanup.push(() => got.lease.release());
    proxy.heal();
    console.log(
      `[partition-tcp ${label}] ${JSON.stringify({ ttl, abortAfterPartitionMs: Math.round(abort.at - tPartition), leftAtAbortMs: Math.round(abort.probe.leftMs), acquireAfterAbortMs: Math.round(got.at - abort.at), tokens: [leaseA.token, got.lease.token] })}`,
    );
    expect(abort.probe.leftMs).toBeGreaterThan(0);
    expect(abort.probe.holder).toBe("A"); // the lock on the server was still A's
    expect(got.at).toBeGreaterThan(abort.at);
    expect(got.lease.token).toBeGreaterThan(leaseA.token);
    expect(leaseA.signal.reason).toMatchObject({ code: "ERR_LEASE_LOST" });
  });
});
