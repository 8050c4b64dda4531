import { readdirSync } from "node:fs";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

// Every file in test/harness/setup/ is a global setup: each starts one real server (redis-server behind
// the Upstash REST bridge, Azurite) on loopback before the tests and stops it afterwards.
const globalSetup = readdirSync(new URL("./test/harness/setup/", import.meta.url))
  .filter((f) => f.endsWith(".ts"))
  .map((f) => `test/harness/setup/${f}`);

// The files that take longest (about 50 s or more each here, measured in a clean-clone run), in
// the order vitest starts them, before every other file: the run then ends on short files. On a
// fresh clone (no timing cache) vitest's own order put these small files, each calling a suite,
// last, and the run ended on them side by side. The Azure suite first, beside two that mostly wait.
const LONG = [
  "test/backends/azure-blob/conformance.test.ts", // 132 s
  "test/backends/quorum/shutdown.test.ts", // 57 s
  "test/cli/stores.test.ts", // 58 s
  "test/backends/quorum/conformance.test.ts", // 111 s
  "test/package/runtimes.test.ts", // 88 s
  "test/system/invariant.test.ts", // 83 s
  "test/system/invariant-tcp.test.ts", // 73 s
  "test/backends/cloudflare/conformance.test.ts", // 72 s
  "test/system/invariant-dynamodb.test.ts", // 58 s
  "test/backends/deno-kv/conformance.test.ts", // 58 s
  "test/system/invariant-quorum.test.ts", // 55 s
  "test/system/invariant-cloudflare.test.ts", // 51 s
];

/** vitest's order, with the {@link LONG} files first, in that order. */
class LongFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification) => {
      const i = LONG.findIndex((path) => f.moduleId.endsWith(path));
      return i < 0 ? LONG.length : i;
    };
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}

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
    // Three at once (about 11-12 min in all). Four took about 10, but every one of five
    // clean-clone runs then failed a different test on a timing margin the load ate (a Bun
    // process's timers stalled 131 ms, a request to Azurite unanswered for 3 s, a quorum tick
    // left unrun by a lost acquire answer): a CI that fails now and then is worse than a slower one.
    // The shared servers written in Node (the Upstash bridge, dynalite) run in processes of their
    // own (test/harness/servers/own-process.ts), and the quorum suite has an Azurite of its own.
    maxWorkers: 3,
    sequence: { sequencer: LongFirst },
  },
});
