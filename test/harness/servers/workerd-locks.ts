// A real workerd (through Miniflare) running test/harness/cloudflare/worker.ts: the LeaseholdLock
// Durable Object, bound as LOCKS (and ExhaustedLock as EXHAUSTED, ListedLock as LISTED), and its lockHandler route on
// /leasehold, listening on a free loopback port. Used by the global setup
// (test/harness/setup/cloudflare.ts), the persistence test (with a persistence directory) and the
// benchmarks.
import { build } from "esbuild";
import { Miniflare } from "miniflare";

/** A recent date (fetch's `cache: "no-store"`, current Durable Object behaviour). */
export const COMPATIBILITY_DATE = "2025-09-01";

let bundled: Promise<string> | undefined;

/** A Worker of test/harness/cloudflare/ (`file`) as one ES module, built from the sources. */
export async function bundleWorker(file: string): Promise<string> {
  const out = await build({
    entryPoints: [new URL(`../cloudflare/${file}`, import.meta.url).pathname],
    bundle: true,
    write: false,
    format: "esm",
    target: "es2022",
    platform: "neutral",
    logLevel: "error",
  });
  return out.outputFiles[0]!.text;
}

/** The worker as one ES module. */
export function bundleLockWorker(): Promise<string> {
  bundled ??= bundleWorker("worker.ts");
  return bundled;
}

export interface LockWorker {
  /** The route of lockHandler: `http://127.0.0.1:<port>/leasehold`. */
  url: string;
  /** The bearer token the route accepts. */
  token: string;
  /** The worker's origin, `http://127.0.0.1:<port>`. */
  origin: string;
  mf: Miniflare;
  stop(): Promise<void>;
}

/**
 * Starts workerd with the lock worker. `persist`: a directory for the objects' storage (kept
 * across a stop and a new start); default in memory.
 */
export async function startLockWorker(
  options: { token?: string; persist?: string } = {},
): Promise<LockWorker> {
  const token = options.token ?? `lh-${crypto.randomUUID()}`;
  const mf = new Miniflare({
    modules: true,
    script: await bundleLockWorker(),
    compatibilityDate: COMPATIBILITY_DATE,
    durableObjects: { LOCKS: "LeaseholdLock", EXHAUSTED: "ExhaustedLock", LISTED: "ListedLock" },
    durableObjectsPersist: options.persist ?? false,
    bindings: { LEASEHOLD_DO_SECRET: token },
    host: "127.0.0.1",
    port: 0,
  });
  let origin: string;
  try {
    origin = (await mf.ready).origin;
  } catch (error) {
    await mf.dispose().catch(() => {});
    throw new Error(`workerd (Miniflare) did not start: ${(error as Error).message}`);
  }
  return { url: `${origin}/leasehold`, token, origin, mf, stop: () => mf.dispose() };
}
