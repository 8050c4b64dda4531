// The workerd runner's driver: bundles worker.ts with esbuild the way wrangler does (the library
// from package.json "exports" → dist/, target es2022 so `await using` is lowered: Miniflare's
// module parser rejects it) and runs it in workerd through Miniflare, which allows the loopback
// fetches to the test servers. Used by test/package/runtimes.test.ts.
import { build } from "esbuild";
import { Miniflare } from "miniflare";

/** A recent date, with `fetch(…, { cache: "no-store" })` and other current behaviour. */
export const COMPATIBILITY_DATE = "2025-09-01";

/** The worker as one ES module, ready for Miniflare's `script`. */
export async function bundleWorker(): Promise<string> {
  const out = await build({
    entryPoints: [new URL("./worker.ts", import.meta.url).pathname],
    bundle: true,
    write: false,
    format: "esm",
    target: "es2022",
    platform: "neutral",
    conditions: ["workerd", "worker", "browser"],
    // tsup's split chunks are imported for effect by dist/ entries; "sideEffects": false drops them.
    logOverride: { "ignored-bare-import": "silent" },
    logLevel: "error",
  });
  const code = out.outputFiles[0]!.text;
  if (/\bawait\s+using\s+[\w$]+\s*=/.test(code))
    throw new Error("esbuild left `await using` in the worker bundle");
  if (/from\s*["']node:/.test(code)) throw new Error("the worker bundle imports a node: module");
  return code;
}

/**
 * A date before 2024-11-11, when workerd's fetch throws on the `cache` field: the library must
 * fall back to requests without it.
 */
export const OLD_COMPATIBILITY_DATE = "2024-06-01";

/** Starts the worker in workerd with these bindings (strings, as `wrangler secret put` gives). */
export async function startWorker(
  bindings: Record<string, string>,
  compatibilityDate = COMPATIBILITY_DATE,
): Promise<Miniflare> {
  const mf = new Miniflare({
    modules: true,
    script: await bundleWorker(),
    compatibilityDate,
    bindings,
  });
  await mf.ready;
  return mf;
}

/** What a scheduled event reports (miniflare's own type needs @cloudflare/workers-types). */
export interface ScheduledResult {
  outcome: string;
  noRetry: boolean;
}

/** Fires the worker's `scheduled` handler once, as a cron trigger would; resolves when it is done. */
export async function scheduled(
  mf: Miniflare,
  cron: string,
  scheduledTime = new Date(),
): Promise<ScheduledResult> {
  const worker = (await mf.getWorker()) as unknown as {
    scheduled(options: { cron: string; scheduledTime: Date }): Promise<ScheduledResult>;
  };
  return worker.scheduled({ cron, scheduledTime });
}
