// The workerd runner: a Cloudflare-style Worker, bundled by esbuild (target es2022 lowers
// `await using`; the library comes from package.json "exports" → dist/, as wrangler would bundle
// it) and run by Miniflare (run-workerd.ts). It has two faces:
// - `scheduled`: the cron pattern. Every trigger tries the lock once with
//   `await using lease = await mutex.tryAcquire()`; only the one that got it runs the job, which
//   holds the lease for SMOKE_JOB_MS so that overlapping triggers meet it. Each trigger appends
//   what it did ("ran …" or "skipped") to a Redis list through the Upstash bridge.
// - `fetch`: `/smoke` runs the shared smoke suite inside workerd; `/timers` reports how many
//   timers are pending in this isolate; `/leak` is the negative control: a lease left unreleased,
//   which `/timers` must then see.
import * as core from "leasehold";
import { azureBlob } from "leasehold/azure-blob";
import { durableObject } from "leasehold/cloudflare";
import { dynamodb } from "leasehold/dynamodb";
import { memory } from "leasehold/memory";
import { quorum } from "leasehold/quorum";
import { fromEnv, upstash } from "leasehold/upstash";
import { restCommand, smoke, smokeEnv } from "./suite.ts";

type Env = Record<string, string>;
interface ScheduledController {
  readonly cron: string;
  readonly scheduledTime: number;
}
interface ExecutionContext {
  waitUntil(promise: Promise<unknown>): void;
}

// Timer accounting for the whole isolate: a timer is pending from setTimeout/setInterval until it
// fires (timeouts) or is cleared. The library reads the global setTimeout when it starts a timer,
// so replacing it here, before any handler runs, sees every timer a lease starts.
const pending = new Set<unknown>();
const g = globalThis as unknown as Record<string, (...args: unknown[]) => unknown>;
const realSetTimeout = g.setTimeout!;
const realClearTimeout = g.clearTimeout!;
const realSetInterval = g.setInterval!;
const realClearInterval = g.clearInterval!;
g.setTimeout = (fn, ms, ...args) => {
  const id = realSetTimeout(() => {
    pending.delete(id);
    (fn as (...a: unknown[]) => void)(...args);
  }, ms);
  pending.add(id);
  return id;
};
g.clearTimeout = (id) => {
  pending.delete(id);
  return realClearTimeout(id);
};
g.setInterval = (...args) => {
  const id = realSetInterval(...args);
  pending.add(id);
  return id;
};
g.clearInterval = (id) => {
  pending.delete(id);
  return realClearInterval(id);
};

function redis(env: Env, command: (string | number)[]): Promise<unknown> {
  return restCommand(env.UPSTASH_REDIS_REST_URL!, env.UPSTASH_REDIS_REST_TOKEN!, command);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const id = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(id);
      resolve();
    });
  });
}

export default {
  async scheduled(controller: ScheduledController, env: Env, _ctx: ExecutionContext): Promise<void> {
    const log = `smoke:${env.SMOKE_ID}:cron-log`;
    const mutex = core.createMutex(fromEnv(env, { prefix: "smoke:" }), {
      name: `smoke-${env.SMOKE_ID}-cron`,
      ttl: 10_000,
    });
    // One attempt: a trigger that finds the job running returns at once. The job is awaited while
    // the lease is held, so this invocation lives until it is done: no ctx.waitUntil needed.
    await using lease = await mutex.tryAcquire();
    if (!lease) {
      await redis(env, ["RPUSH", log, `skipped ${controller.cron}`]);
      return;
    }
    await redis(env, ["RPUSH", log, `ran ${controller.cron} token=${lease.token}`]);
    await sleep(Number(env.SMOKE_JOB_MS), lease.signal);
    if (lease.signal.aborted) throw new Error("the job lost its lease");
  },

  async fetch(request: Request, env: Env): Promise<Response> {
    const { pathname } = new URL(request.url);
    if (pathname === "/smoke") {
      try {
        const lib = { ...core, memory, upstash, azureBlob, quorum, durableObject, dynamodb };
        const result = await smoke(
          lib,
          smokeEnv((name) => env[name]),
        );
        return Response.json({ ...result, suite: "lowered by esbuild", pending: pending.size });
      } catch (error) {
        return new Response((error as Error).stack ?? String(error), { status: 500 });
      }
    }
    if (pathname === "/timers") return Response.json({ pending: pending.size });
    if (pathname === "/cache-probe") {
      // Whether this compatibility date's fetch accepts `cache: "no-store"` (no request leaves).
      try {
        await fetch("http://127.0.0.1:9/", { cache: "no-store", signal: AbortSignal.abort() });
        return new Response("accepted");
      } catch (error) {
        return new Response(String((error as Error).message));
      }
    }
    if (pathname === "/leak") {
      // Never released (and it cannot be later: workerd forbids touching one request's I/O from
      // another), so its renewal and deadline timers stay pending after this handler returns.
      const lease = await core.createMutex(memory(), { name: "leak", ttl: 60_000 }).acquire();
      return Response.json({ token: lease.token });
    }
    return new Response("not found", { status: 404 });
  },
};
