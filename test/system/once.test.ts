// runOnce on real servers, in one process (docs/DESIGN.md §17): four instances, each with its own
// client, fire the same tick up to 400 ms apart with a 100 ms job, tick after tick: exactly one
// run per tick, the others answer done (with the runner) or running. And a runner that goes
// silent mid-job (no renewal: as if killed) leaves its fire to a standby, which runs it once with
// a greater token; the silent runner, when it wakes, is told its lease was lost and records
// nothing. The multi-process version on every backend (SIGKILL, 0-3 s apart) is once-fleet.test.ts.
import IORedis from "ioredis";
import pg from "pg";
import { afterAll, describe, expect, inject, it } from "vitest";
import type { Backend } from "../../src/backend.ts";
import { memory } from "../../src/backends/memory/index.ts";
import { postgres } from "../../src/backends/postgres/index.ts";
import { redis } from "../../src/backends/redis/index.ts";
import { upstash } from "../../src/backends/upstash/index.ts";
import { createMutex, LeaseLostError, runOnce } from "../../src/index.ts";
import { registerSecret } from "../harness/secrets.ts";

const redisCtx = inject("redis");
const pgCtx = inject("postgres");
const upstashCtx = inject("upstash");
registerSecret(redisCtx.password);
registerSecret(pgCtx.password);

const closers: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  await Promise.all(closers.map((close) => close()));
});

/** Four instances' backends: each its own client (memory: one store, as one process's). */
const fleets: [string, () => Backend[]][] = [
  [
    "memory",
    () => {
      const store = memory();
      return [store, store, store, store];
    },
  ],
  [
    "upstash",
    () => Array.from({ length: 4 }, () => upstash({ url: upstashCtx.url, token: upstashCtx.token })),
  ],
  [
    "redis (ioredis)",
    () =>
      Array.from({ length: 4 }, () => {
        const c = new IORedis({
          host: redisCtx.host,
          port: redisCtx.port,
          username: redisCtx.username,
          password: redisCtx.password,
        });
        closers.push(() => c.quit());
        return redis(c);
      }),
  ],
  [
    "postgres (pg Pool)",
    () =>
      Array.from({ length: 4 }, () => {
        const pool = new pg.Pool({ connectionString: pgCtx.url, max: 4 });
        closers.push(() => pool.end());
        return postgres(pool, { createTable: true });
      }),
  ],
];

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(fleets)("%s", (_label, fleet) => {
  it("four instances firing each tick up to 400 ms apart run it exactly once", {
    timeout: 60_000,
  }, async () => {
    const backends = fleet();
    const name = `once-${crypto.randomUUID().slice(0, 8)}`;
    // A ttl well above the job's 100 ms: a loaded machine's late grant must not cost the lease.
    const mutexes = backends.map((b, i) => createMutex(b, { name, ttl: 10_000, owner: `instance-${i}` }));
    const base = Date.UTC(2026, 10, 24);
    for (let tick = 0; tick < 12; tick++) {
      const fire = base + tick * 60_000;
      const runs: number[] = [];
      const results = await Promise.all(
        mutexes.map(async (mutex) => {
          await sleep(Math.random() * 400);
          return runOnce(mutex, fire, async (_signal, lease) => {
            await sleep(100);
            runs.push(lease.token);
            return mutex.owner;
          });
        }),
      );
      expect(runs).toHaveLength(1);
      const ran = results.filter((r) => r.ran);
      expect(ran).toHaveLength(1);
      for (const r of results) {
        if (r.ran) continue;
        expect(["done", "running"]).toContain(r.reason);
        if (r.reason === "done")
          expect(r.by).toEqual({ owner: ran[0]!.ran && ran[0]!.value, token: runs[0] });
      }
      // A late instance finds it done.
      expect(await runOnce(mutexes[3]!, new Date(fire), () => "again")).toMatchObject({
        ran: false,
        reason: "done",
      });
    }
  });

  it("a silent runner's fire is run once by a standby, with a greater token", {
    timeout: 60_000,
  }, async () => {
    const backends = fleet();
    const name = `once-${crypto.randomUUID().slice(0, 8)}`;
    // Connected first (a pool's first connection may take longer than the 600 ms ttl when loaded).
    for (const b of backends) await b.inspect({ key: name });
    // No renewal: the runner's lease expires mid-job, as a killed process's would.
    const runner = createMutex(backends[0]!, { name, ttl: 600, owner: "runner", renew: false });
    const standby = createMutex(backends[1]!, { name, ttl: 600, owner: "standby", retryDelay: 50 });
    let wake = () => {};
    let runnerToken = 0;
    const silent = runOnce(runner, "job-1", async (_signal, lease) => {
      runnerToken = lease.token;
      await new Promise<void>((resolve) => (wake = resolve));
    });
    const lost = silent.catch((error: unknown) => error);
    // The runner's job starts once its acquire is answered (later on a loaded machine).
    for (let waited = 0; runnerToken === 0 && waited < 10_000; waited += 20) await sleep(20);
    expect(runnerToken).toBeGreaterThan(0);
    const taken = await runOnce(standby, "job-1", (_signal, lease) => lease.token, {
      standby: true,
      timeout: 10_000,
    });
    expect(taken.ran && taken.value).toBeGreaterThan(runnerToken);
    wake();
    expect(await lost).toBeInstanceOf(LeaseLostError);
    const late = await runOnce(createMutex(backends[2]!, { name, owner: "late" }), "job-1", () => 0);
    expect(late).toEqual({
      ran: false,
      reason: "done",
      by: { owner: "standby", token: taken.ran ? taken.token : -1 },
    });
  });
});
