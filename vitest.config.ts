import { readdirSync } from "node:fs";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * The files that took 45 s or more in a full run (a clean clone on a 2-core machine, four at
 * once). Without a cache of earlier runs (a fresh clone, as CI has) vitest keeps the files in the
 * order it found them, and a long one started last was the run's tail: these start first, longest
 * first. A file missing from the list only starts later; nothing else depends on it.
 */
const SLOW = [
  "test/package/runtimes.test.ts",
  "test/backends/redis/conformance.test.ts",
  "test/backends/quorum/conformance.test.ts",
  "test/backends/deno-kv/conformance.test.ts",
  "test/system/invariant.test.ts",
  "test/system/invariant-tcp.test.ts",
  "test/cli/stores.test.ts",
  "test/backends/cloudflare/conformance.test.ts",
  "test/backends/azure-blob/conformance.test.ts",
  "test/system/invariant-dynamodb.test.ts",
  "test/system/invariant-quorum.test.ts",
  "test/backends/quorum/shutdown.test.ts",
  "test/system/invariant-cloudflare.test.ts",
  "test/cli/exec.test.ts",
  "test/cli/own-clients.test.ts",
  "test/backends/postgres/conformance.test.ts",
  "test/cli/lead.test.ts",
];

class SlowFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification) => {
      const i = SLOW.findIndex((slow) => f.moduleId.endsWith(slow));
      return i < 0 ? SLOW.length : i;
    };
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}

// Every file in test/harness/setup/ is a global setup: each starts one real server (redis-server behind
// the Upstash REST bridge, Azurite) on loopback before the tests and stops it afterwards.
const globalSetup = readdirSync(new URL("./test/harness/setup/", import.meta.url))
  .filter((f) => f.endsWith(".ts"))
  .map((f) => `test/harness/setup/${f}`);

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup,
    // Records every LockError and console line of the run and fails when one carries a secret.
    setupFiles: ["test/harness/secrets.ts"],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // Most files wait on timers, servers and child processes rather than on the CPU: on a 2-core
    // machine vitest's default (one worker per core but one) would run them one after another.
    // Four at once: three took 13 min (8 min of CPU). Tests whose bounds include the load (process
    // start, fault coverage) derive them from what they measure, so four do not fail them.
    maxWorkers: 4,
    sequence: { sequencer: SlowFirst },
  },
});
