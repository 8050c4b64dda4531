#!/usr/bin/env node
// `npm test`: every check, the independent ones at once, so that the run takes the time of its
// longest path rather than the sum of its steps:
//   1. at once: typecheck, check:examples, check:lists, lint, check:docs and build;
//   2. once the last four passed: vitest, and check:package beside it (both need the build),
//      while typecheck and check:examples go on.
// typecheck, check:examples and check:package run at a lower priority (nice 10): nothing waits
// for them, while the tests wait for the build, and on a 2-core machine three compilers at once
// made the build take 45 s instead of 18; beside vitest, they take the CPU its tests leave idle
// rather than delaying a timer a test counts on.
// Every step but vitest prints its output whole when it ends (with its time); vitest prints its
// own as it runs. A step that fails fails the run: when one of the four fails, nothing more
// starts; otherwise every step runs to its end.
//
// Usage: node scripts/test.mjs [vitest arguments…]
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../", import.meta.url));

const children = new Set();
// Interrupted (Ctrl-C, a CI timeout): the steps, vitest and the servers it started go too.
for (const signal of ["SIGINT", "SIGTERM"])
  process.once(signal, () => {
    for (const child of children) child.kill(signal);
    process.exit(1);
  });

/**
 * Runs `command`; its output is kept (printed when it ends) unless `live`. Resolves its exit status.
 * `low`: at nice 10 (`nice` is on Linux and macOS; elsewhere at the usual priority).
 */
function run(name, command, args, live = false, low = false) {
  const started = performance.now();
  if (low && process.platform !== "win32") [command, args] = ["nice", ["-n", "10", command, ...args]];
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      cwd: root,
      stdio: live ? "inherit" : ["ignore", "pipe", "pipe"],
      env: process.env,
    });
    children.add(child);
    let out = "";
    if (!live) {
      child.stdout.on("data", (c) => (out += c));
      child.stderr.on("data", (c) => (out += c));
    }
    let ended = false;
    const end = (status, how) => {
      if (ended) return; // a spawn that failed reports "error", then "close"
      ended = true;
      children.delete(child);
      const s = ((performance.now() - started) / 1000).toFixed(1);
      const what = status === 0 ? "passed" : `FAILED (${how})`;
      process.stdout.write(`\n── ${name}: ${what} in ${s} s\n${out}`);
      resolve(status);
    };
    child.once("error", (error) => end(1, error.message));
    child.once("close", (code, signal) =>
      end(code ?? 1, signal ? `killed by ${signal}` : `exit status ${code}`),
    );
  });
}

/** `npm run <script>` (package.json defines each); `low`: see run(). */
const npmRun = (script, low = false) => run(script, "npm", ["run", "--silent", script], false, low);

// vitest and check:package need only the build: they start as soon as it (and the quick checks)
// passed, beside typecheck and check:examples, which take a few seconds longer.
const quick = ["check:lists", "lint", "check:docs", "build"].map((s) => npmRun(s));
const slow = ["typecheck", "check:examples"].map((s) => npmRun(s, true));
if ((await Promise.all(quick)).some((status) => status !== 0)) {
  await Promise.all(slow);
  process.stdout.write("\nnpm test: a check above failed; the tests did not run.\n");
  process.exit(1);
}
const [tests, pkg, ...rest] = await Promise.all([
  run("vitest", "node_modules/.bin/vitest", ["run", ...process.argv.slice(2)], true),
  npmRun("check:package", true),
  ...slow,
]);
process.exit(tests === 0 && pkg === 0 && rest.every((status) => status === 0) ? 0 : 1);
