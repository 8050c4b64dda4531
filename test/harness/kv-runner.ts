// Runs test/harness/fixtures/conformance-runner.ts on another runtime (Deno, Bun) and expects
// every check it reports to pass.
import { type ChildProcess, spawn } from "node:child_process";
import { expect } from "vitest";
import { killAll } from "./servers/children.ts";

/** How long a runner may take before it is killed (and its test fails). */
const RUNNER_MS = 120_000;

const running = new Set<ChildProcess>();
/** Kills every runner still running: a test file that starts them runs it afterAll. */
export const stopKvRunners = (): Promise<void> => killAll(running);

/**
 * Runs the runner with the command `cmd` (the runtime and its flags) and the variables `env`
 * (LH_KV, LH_KV_PATH, LH_CHECKS): it must exit 0 within 120 s, report no failed check, and report
 * at least `least` checks. Resolves the names of the checks it ran. Asynchronous, so that the
 * test file's other checks run meanwhile when it is started early.
 */
export async function runKvChecks(
  cmd: string[],
  env: Record<string, string>,
  least: number,
): Promise<string[]> {
  const child = spawn(cmd[0]!, [...cmd.slice(1), "test/harness/fixtures/conformance-runner.ts"], {
    env: { ...process.env, ...env, DENO_NO_UPDATE_CHECK: "1", DENO_NO_PROMPT: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.add(child);
  let stdout = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8").on("data", (c: string) => (stdout += c));
  child.stderr!.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  let timedOut = false;
  const killer = setTimeout(() => {
    timedOut = true;
    void killAll([child]);
  }, RUNNER_MS);
  const status = await new Promise<number | null>((resolve) => {
    child.once("error", (error) => {
      stderr += String(error);
      resolve(null);
    });
    child.once("close", (code) => resolve(code));
  });
  clearTimeout(killer);
  running.delete(child);
  expect(timedOut, `${cmd[0]} was killed after ${RUNNER_MS / 1000} s; stderr: ${stderr.slice(-2_000)}`).toBe(
    false,
  );
  // Whole lines only: one cut short by the process's end is not a result.
  const results = stdout
    .split("\n")
    .slice(0, -1)
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as { name: string; ok: boolean; error?: string });
  expect(status, `${cmd[0]} exited ${status}: ${stderr.slice(-2_000)}`).toBe(0);
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
