// Runs test/harness/fixtures/conformance-runner.ts on another runtime (Deno, Bun) and expects
// every check it reports to pass.
import { spawnSync } from "node:child_process";
import { expect } from "vitest";

/**
 * Runs the runner with the command `cmd` (the runtime and its flags) and the variables `env`
 * (LH_KV, LH_KV_PATH, LH_CHECKS): it must exit 0, report no failed check, and report at least
 * `least` checks. Returns the names of the checks it ran.
 */
export function runKvChecks(cmd: string[], env: Record<string, string>, least: number): string[] {
  const r = spawnSync(cmd[0]!, [...cmd.slice(1), "test/harness/fixtures/conformance-runner.ts"], {
    encoding: "utf8",
    env: { ...process.env, ...env, DENO_NO_UPDATE_CHECK: "1", DENO_NO_PROMPT: "1" },
    timeout: 120_000,
  });
  const results = r.stdout
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as { name: string; ok: boolean; error?: string });
  expect(r.status, `${cmd[0]} exited ${r.status}: ${r.stderr.slice(-2_000)}`).toBe(0);
  expect(results.filter((x) => !x.ok)).toEqual([]);
  expect(results.length).toBeGreaterThanOrEqual(least);
  return results.map((x) => x.name);
}

/** Deno with the unstable KV API, reading and writing only `dir`, and reading the environment. */
export const denoIn = (dir: string): string[] => [
  "node_modules/.bin/deno",
  "run",
  "--unstable-kv",
  `--allow-read=${dir}`,
  `--allow-write=${dir}`,
  "--allow-env",
];
