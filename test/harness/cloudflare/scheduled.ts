// The Worker of the Workers scheduled test (test/backends/cloudflare/scheduled.test.ts): the recipe
// of docs/backends/cloudflare.md ("Run once per fire"), runOnce keyed by the cron event's
// scheduledTime with a standby, on the Durable Object backend (STORE "durable-object", the
// LeaseholdLock bound as LOCKS) or on Upstash (STORE "upstash": UPSTASH_URL, UPSTASH_TOKEN). The
// job only writes what the test counts to the RESULTS KV namespace: `run:<time>:<owner>` (its
// token) when it starts, `result:<time>:<owner>` (runOnce's answer) after it, and sleeps JOB_MS.
// Built from the sources by esbuild, as worker.ts is.
import { type DurableObjectNamespaceLike, durableObject } from "../../../src/backends/cloudflare/index.ts";
import { upstash } from "../../../src/backends/upstash/index.ts";
import { createMutex, runOnce } from "../../../src/index.ts";

export { LeaseholdLock } from "../../../src/backends/cloudflare/index.ts";

/** The part of the Workers ScheduledController the handler reads. */
interface ScheduledController {
  readonly scheduledTime: number;
  readonly cron: string;
}

/** The part of a KV namespace binding the job writes to. */
interface KVLike {
  put(key: string, value: string): Promise<void>;
}

interface Env {
  LOCKS: DurableObjectNamespaceLike;
  RESULTS: KVLike;
  STORE: "durable-object" | "upstash";
  UPSTASH_URL: string;
  UPSTASH_TOKEN: string;
  JOB_MS: string;
}

export default {
  async scheduled(controller: ScheduledController, env: Env): Promise<void> {
    const backend =
      env.STORE === "upstash"
        ? upstash({ url: env.UPSTASH_URL, token: env.UPSTASH_TOKEN })
        : durableObject(env.LOCKS);
    // The owner names this event, for the test to tell the runs apart (the recipe needs none).
    const owner = `event-${crypto.randomUUID()}`;
    const mutex = createMutex(backend, { name: `report-${env.STORE}`, owner });
    const time = controller.scheduledTime;
    const result = await runOnce(
      mutex,
      time,
      async (_signal, lease) => {
        await env.RESULTS.put(`run:${time}:${owner}`, String(lease.token));
        await new Promise((resolve) => setTimeout(resolve, Number(env.JOB_MS)));
      },
      { standby: true },
    );
    await env.RESULTS.put(`result:${time}:${owner}`, JSON.stringify(result));
  },
};
