import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Starts every server of test/harness/setup/ (one file each) at once, before the tests, and
    // stops them afterwards: redis-server behind the Upstash REST bridge, Azurite, PostgreSQL, …
    globalSetup: ["test/harness/global-setup.ts"],
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
  },
});
