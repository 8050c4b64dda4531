// Item 6: cold start. A fresh process per run imports leasehold and takes its first lease
// (bench/lib/coldstart-child.mjs). Node and Bun import a build of src/ made with esbuild (ESM,
// one file per entry plus shared chunks, unminified, like the published dist/); Deno imports
// the .ts sources (as from JSR). Runs are interleaved across runtimes in random order.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import { type Summary, shuffled, summarize } from "./lib/stats.ts";

export interface Runtime {
  id: string;
  /** argv before the script path. */
  cmd: string[];
  /** Import the .ts sources instead of the build. */
  sources?: boolean;
}

export interface ColdStartSeries {
  runtime: string;
  backend: "memory" | "upstash" | "fetch";
  importToLease: Summary;
  processToLease: Summary;
}

const ROOT = new URL("../", import.meta.url).pathname.replace(/\/$/, "");

function run(cmd: string[], env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd[0]!, cmd.slice(1), { env: { ...process.env, ...env }, cwd: ROOT, stdio: "pipe" });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0 ? resolve(out) : reject(new Error(`${cmd.join(" ")} exited ${code}: ${err.slice(-800)}`)),
    );
  });
}

export async function runColdStart(
  runtimes: Runtime[],
  upstashTarget: { url: string; token: string },
  runs: number,
): Promise<ColdStartSeries[]> {
  const dir = mkdtempSync(join(tmpdir(), "leasehold-bench-cold-"));
  try {
    await build({
      entryPoints: {
        index: `${ROOT}/src/index.ts`,
        "backends/memory/index": `${ROOT}/src/backends/memory/index.ts`,
        "backends/upstash/index": `${ROOT}/src/backends/upstash/index.ts`,
      },
      outdir: dir,
      bundle: true,
      splitting: true,
      format: "esm",
      platform: "neutral",
      target: "es2022",
      logLevel: "silent",
    });
    const samples = new Map<string, { importToLease: number[]; processToLease: number[] }>();
    const jobs = runtimes.flatMap((rt) =>
      (["memory", "upstash", "fetch"] as const).map((backend) => ({ rt, backend })),
    );
    for (let i = 0; i < runs; i++) {
      for (const { rt, backend } of shuffled(jobs)) {
        const out = await run([...rt.cmd, `${ROOT}/bench/lib/coldstart-child.mjs`], {
          COLD_DIR: rt.sources ? `${ROOT}/src` : dir,
          COLD_EXT: rt.sources ? ".ts" : ".js",
          COLD_BACKEND: backend,
          COLD_URL: upstashTarget.url,
          COLD_TOKEN: upstashTarget.token,
        });
        const line = out.trim().split("\n").at(-1) ?? "";
        const r = JSON.parse(line) as { importToLease: number; processToLease: number };
        const key = `${rt.id}\u0000${backend}`;
        const s = samples.get(key) ?? { importToLease: [], processToLease: [] };
        s.importToLease.push(r.importToLease);
        s.processToLease.push(r.processToLease);
        samples.set(key, s);
      }
    }
    return jobs.map(({ rt, backend }) => {
      const s = samples.get(`${rt.id}\u0000${backend}`)!;
      return {
        runtime: rt.id,
        backend,
        importToLease: summarize(s.importToLease),
        processToLease: summarize(s.processToLease),
      };
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
