// The Workers scheduled test (issue 26): a Worker whose scheduled() runs its job with
// runOnce(mutex, controller.scheduledTime, job, { standby: true }) (test/harness/cloudflare/scheduled.ts,
// the recipe of docs/backends/cloudflare.md), in a real workerd through Miniflare, fired as cron
// events with `worker.scheduled({ scheduledTime, cron })`: two overlapping events of one
// scheduledTime (a 200 ms job, fired together), and two skewed ones (the second seconds after the
// first completed). Exactly one run per scheduledTime; the other event answers done, naming the
// runner. On the Durable Object backend (LeaseholdLock in the same Worker) and on Upstash (the
// shared bridge, reached from inside workerd).
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { registerSecret } from "../../harness/secrets.ts";
import { bundleWorker, COMPATIBILITY_DATE } from "../../harness/servers/workerd-locks.ts";

const upstashContext = inject("upstash");
const JOB_MS = 200;
const CRON = "*/5 * * * *";

type Store = "durable-object" | "upstash";
type Result =
  | { ran: true; token: number }
  | { ran: false; reason: string; by?: { owner: string; token: number } };

/** What the test reads of the KV namespace and the Worker (Miniflare's types need workers-types). */
interface Kv {
  list(o: { prefix: string }): Promise<{ keys: { name: string }[] }>;
  get(key: string): Promise<string | null>;
}
interface Scheduled {
  scheduled(o: { scheduledTime: Date; cron: string }): Promise<{ outcome: string }>;
}

let mf: Miniflare;

beforeAll(async () => {
  registerSecret(upstashContext.token);
  const script = await bundleWorker("scheduled.ts");
  // One Worker per store, the same script: its env says which.
  const worker = (store: Store) => ({
    name: store,
    modules: true,
    script,
    compatibilityDate: COMPATIBILITY_DATE,
    durableObjects: { LOCKS: "LeaseholdLock" },
    kvNamespaces: ["RESULTS"],
    bindings: {
      STORE: store,
      UPSTASH_URL: upstashContext.url,
      UPSTASH_TOKEN: upstashContext.token,
      JOB_MS: String(JOB_MS),
    },
  });
  mf = new Miniflare({ workers: [worker("durable-object"), worker("upstash")] });
  await mf.ready;
}, 60_000);

afterAll(() => mf?.dispose());

/** The runs (owner → token) and runOnce's answers (owner → result) of the events of `time`. */
async function outcome(store: Store, time: number) {
  const kv = (await mf.getKVNamespace("RESULTS", store)) as unknown as Kv;
  const runs = new Map<string, number>();
  const results = new Map<string, Result>();
  for (const { name } of (await kv.list({ prefix: `run:${time}:` })).keys)
    runs.set(name.split(":")[2]!, Number(await kv.get(name)));
  for (const { name } of (await kv.list({ prefix: `result:${time}:` })).keys)
    results.set(name.split(":")[2]!, JSON.parse((await kv.get(name))!) as Result);
  return { runs, results };
}

/** Fires one cron event of `time` at the Worker of `store`, as the Workers runtime does. */
async function fire(store: Store, time: number): Promise<void> {
  const worker = (await mf.getWorker(store)) as unknown as Scheduled;
  const r = await worker.scheduled({ scheduledTime: new Date(time), cron: CRON });
  expect(r.outcome).toBe("ok");
}

/** Exactly one run for `time`; the other event answered done, naming the runner and its token. */
async function expectOnce(store: Store, time: number): Promise<number> {
  const { runs, results } = await outcome(store, time);
  expect(runs.size).toBe(1);
  const [runner, token] = [...runs][0]!;
  expect(results.size).toBe(2);
  expect(results.get(runner)).toEqual({ ran: true, token });
  const others = [...results].filter(([owner]) => owner !== runner).map(([, r]) => r);
  expect(others).toEqual([{ ran: false, reason: "done", by: { owner: runner, token } }]);
  return token;
}

describe.each<Store>(["durable-object", "upstash"])("a scheduled Worker on %s", (store) => {
  // Distinct scheduled times per store and test (each Worker's mutex name is its own anyway).
  const base = Date.UTC(2026, 10, 24, 23, 0) + (store === "upstash" ? 3_600_000 : 0);

  it("two overlapping cron events of one scheduledTime: one runs the job, the other waits as standby and answers done", async () => {
    const time = base;
    const start = performance.now();
    await Promise.all([fire(store, time), fire(store, time)]);
    expect(performance.now() - start).toBeGreaterThanOrEqual(JOB_MS);
    await expectOnce(store, time);
  }, 60_000);

  it("two skewed cron events of one scheduledTime, the second seconds after the first completed: it answers done without running", async () => {
    const time = base + 5 * 60_000;
    await fire(store, time);
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    await fire(store, time);
    const token = await expectOnce(store, time);
    // The next scheduledTime is a fire of its own, with a greater token.
    const next = time + 5 * 60_000;
    await fire(store, next);
    const { runs } = await outcome(store, next);
    expect(runs.size).toBe(1);
    expect([...runs.values()][0]).toBeGreaterThan(token);
  }, 60_000);
});
