// fromEnv: the upstash backend configured from the environment (Workers' env, process.env, Deno.env).
import type { Backend } from "../../backend.ts";
import { check } from "../../options.ts";
import { type UpstashEnv, type UpstashOptions, upstash } from "./index.ts";

/**
 * Creates an Upstash Redis backend from `UPSTASH_REDIS_REST_URL` and `UPSTASH_REDIS_REST_TOKEN`
 * (or Vercel's `KV_REST_API_URL` and `KV_REST_API_TOKEN`).
 *
 * @param env Where to read the variables: Workers' `env` binding, or any record. Default:
 *   `process.env` (Node, Bun) or `Deno.env` (Deno, needs `--allow-env`).
 * @param options The other {@link UpstashOptions}: `fetch`, `prefix` and `onFenceHealed`.
 * @returns The backend, as {@link upstash} makes it.
 * @throws {TypeError} When a variable is missing or invalid.
 *
 * @example In a Cloudflare Worker
 * ```ts
 * import { createMutex } from "leasehold";
 * import { fromEnv } from "leasehold/upstash";
 *
 * interface Env {
 *   UPSTASH_REDIS_REST_URL: string;
 *   UPSTASH_REDIS_REST_TOKEN: string;
 * }
 * declare function doWork(signal: AbortSignal): Promise<void>; // your job
 *
 * export default {
 *   async scheduled(_controller: ScheduledController, env: Env, ctx: ExecutionContext) {
 *     const lease = await createMutex(fromEnv(env), { name: "cron" }).tryAcquire();
 *     if (lease) ctx.waitUntil(doWork(lease.signal).finally(() => lease.release()));
 *   },
 * };
 * ```
 */
export function fromEnv(env?: UpstashEnv, options?: Omit<UpstashOptions, "url" | "token">): Backend {
  const read = env ? (name: string) => (env as Record<string, unknown>)[name] : readGlobalEnv;
  const url = read("UPSTASH_REDIS_REST_URL") || read("KV_REST_API_URL");
  const token = read("UPSTASH_REDIS_REST_TOKEN") || read("KV_REST_API_TOKEN");
  check(typeof url === "string" && url !== "", "[upstash]", "UPSTASH_REDIS_REST_URL is not set");
  check(typeof token === "string" && token !== "", "[upstash]", "UPSTASH_REDIS_REST_TOKEN is not set");
  return upstash({ ...options, url: url as string, token: token as string });
}

function readGlobalEnv(name: string): unknown {
  const g = globalThis as {
    process?: { env?: Record<string, string | undefined> };
    Deno?: { env?: { get(name: string): string | undefined } };
  };
  if (g.Deno?.env) return g.Deno.env.get(name);
  return g.process?.env?.[name];
}
