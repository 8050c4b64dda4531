// A Cloudflare scheduled Worker: the cron fires in several places, and a retry or a late
// invocation can come after the first has finished. The report must be sent once per scheduled
// time: `runOnce` keys the run by `controller.scheduledTime` (the same for every invocation of one
// cron tick), so the first invocation sends it and records it as done; any other, overlapping or
// later, finds the run in progress or its record and returns without sending.
//
// The work runs in `ctx.waitUntil`: the handler returns right away, and the invocation stays
// alive until the promise settles. That matters for the lease: its background renewal is a
// timer, and timers only run while the invocation is alive, so the lease must never outlive the
// promise handed to waitUntil. runOnce ends it (recording the run) before its promise settles.
//
//   npx wrangler secret put UPSTASH_REDIS_REST_URL
//   npx wrangler secret put UPSTASH_REDIS_REST_TOKEN
//   npx wrangler deploy
import { createMutex, type Lease, runOnce } from "leasehold";
import { upstash } from "leasehold/upstash";

export interface Env {
  UPSTASH_REDIS_REST_URL: string;
  UPSTASH_REDIS_REST_TOKEN: string;
  /** Where the report goes (wrangler.toml [vars]). */
  REPORT_URL: string;
}

// The two Workers types used here; with @cloudflare/workers-types installed, use its own.
interface ScheduledController {
  readonly cron: string;
  readonly scheduledTime: number;
}
interface ExecutionContext {
  waitUntil(promise: Promise<unknown>): void;
}

/** The job: one POST that carries the fencing token, so the receiver can drop a stale sender's. */
async function sendReport(env: Env, lease: Lease, scheduledTime: number): Promise<void> {
  const res = await fetch(env.REPORT_URL, {
    method: "POST",
    headers: { "content-type": "application/json", "x-fencing-token": String(lease.token) },
    body: JSON.stringify({ scheduledTime }),
    signal: lease.signal, // lease lost → the request is aborted
  });
  if (!res.ok) throw new Error(`report: HTTP ${res.status}`);
}

export default {
  async scheduled(controller: ScheduledController, env: Env, ctx: ExecutionContext): Promise<void> {
    // ttl: how long a crashed run blocks a retry of its tick. The lease renews itself meanwhile.
    const backend = upstash({ url: env.UPSTASH_REDIS_REST_URL, token: env.UPSTASH_REDIS_REST_TOKEN });
    const mutex = createMutex(backend, { name: "daily-report", ttl: 30_000 });
    const tick = controller.scheduledTime;
    ctx.waitUntil(
      runOnce(mutex, tick, (_signal, lease) => sendReport(env, lease, tick)).then((r) => {
        if (!r.ran) console.log(`report for ${new Date(tick).toISOString()}: ${r.reason}`, r.by ?? "");
      }),
    );
  },
};
