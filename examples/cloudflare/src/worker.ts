// A Cloudflare scheduled Worker: the cron fires in several places (and retries may overlap), but
// the report must be sent once per run. Every invocation tries the lock once; the one that gets
// it sends the report, the others return at once.
//
// The work runs in `ctx.waitUntil`: the handler returns right away, and the invocation stays
// alive until the promise settles. That matters for the lease: its background renewal is a
// timer, and timers only run while the invocation is alive, so a lease must never outlive the
// promise handed to waitUntil. Release it in that promise's `finally`.
//
//   npx wrangler secret put UPSTASH_REDIS_REST_URL
//   npx wrangler secret put UPSTASH_REDIS_REST_TOKEN
//   npx wrangler deploy
import { createMutex, type Lease } from "leasehold";
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
    // ttl: how long a crashed run blocks the next one. The lease renews itself while the work runs.
    const backend = upstash({ url: env.UPSTASH_REDIS_REST_URL, token: env.UPSTASH_REDIS_REST_TOKEN });
    const mutex = createMutex(backend, { name: "daily-report", ttl: 30_000 });
    const lease = await mutex.tryAcquire();
    if (!lease) return; // another invocation is sending it
    ctx.waitUntil(sendReport(env, lease, controller.scheduledTime).finally(() => lease.release()));
  },
};
