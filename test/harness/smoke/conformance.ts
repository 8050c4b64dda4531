// The backend conformance suite (leasehold/testing, waiting checks included) against the
// Durable Object through its lockHandler route, for the runners of other runtimes
// (run-conformance-bun.ts, run-conformance-deno.ts, run-conformance-node24.mjs): the same checks
// test/backends/cloudflare/conformance.test.ts runs from vitest's Node. Fewer cycles and
// contenders than the default, to stay quick, and a ttl of 1 s: each attempt is bounded by
// ttl − guard, and the shared workerd serves the whole suite at once (a 500 ms ttl left 393 ms,
// which a loaded 2-core machine exceeded once). Only erasable TypeScript here (Node 24 strips it).
import type * as CloudflareModule from "../../../src/backends/cloudflare/index.ts";
import type * as TestingModule from "../../../src/testing/index.ts";

export interface ConformanceLib {
  conformanceChecks: typeof TestingModule.conformanceChecks;
  durableObject: typeof CloudflareModule.durableObject;
}

/** The options every runner uses; the test compares the names against the same list. */
export const OPTIONS = { ttl: 1_000, cycles: 100, contenders: 30, prefix: "conformance-runtime" } as const;

/** Runs every check in order; throws on the first failure (with the check's name). */
export async function conformance(
  lib: ConformanceLib,
  read: (name: string) => string | undefined,
): Promise<{ passed: string[]; ms: number }> {
  const url = read("LEASEHOLD_DO_URL");
  const token = read("LEASEHOLD_DO_TOKEN");
  if (!url || !token) throw new Error("conformance: LEASEHOLD_DO_URL and LEASEHOLD_DO_TOKEN must be set");
  const backend = () => lib.durableObject({ url, token });
  if (typeof backend().acquireQueued !== "function") throw new Error("conformance: no acquireQueued");
  const started = performance.now();
  const passed: string[] = [];
  for (const check of lib.conformanceChecks({
    ...OPTIONS,
    prefix: `${OPTIONS.prefix}-${read("SMOKE_RUNTIME")}`,
    backend,
  })) {
    try {
      await check.run();
    } catch (error) {
      throw new Error(`conformance check failed: ${check.name}: ${(error as Error).message}`);
    }
    passed.push(check.name);
  }
  return { passed, ms: Math.round(performance.now() - started) };
}
