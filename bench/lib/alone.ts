// Running one bench item alone (`npx tsx bench/<item>.ts [--save]`): its own redis-server, Upstash
// bridge and PostgreSQL, the item's figures printed, and with --save put into bench/results.json
// under `key` (the other items as they were, the date, commit and machine noted in `measured`)
// with bench/RESULTS.md rewritten.
import { execSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import type { UpstashBridge } from "../../test/harness/servers/upstash-bridge.ts";
import { evaluateTargets, renderMarkdown } from "./report.ts";
import { QUICK, type Summary } from "./stats.ts";

/** What an item run alone measures against. */
export interface AloneTarget {
  bridge: UpstashBridge;
  redisPort: number;
  postgresUrl: string;
}

/** Runs `measure` against servers of its own; prints `series` (backend → row → summary); saves with --save. */
export async function runAlone<R extends { series: Record<string, Record<string, Summary>> }>(
  key: string,
  script: string,
  measure: (target: AloneTarget, iterations: number, warmup: number) => Promise<R>,
  print: (r: R) => void = () => {},
): Promise<void> {
  const { startRedisOnFreePort } = await import("../../test/harness/servers/redis.ts");
  const { startBridge } = await import("../../test/harness/servers/upstash-bridge.ts");
  const { startPostgres } = await import("../../test/harness/servers/postgres.ts");
  const server = await startRedisOnFreePort();
  const bridge = await startBridge({ redis: server.socket });
  const pgServer = await startPostgres();
  try {
    const r = await measure(
      { bridge, redisPort: server.port, postgresUrl: pgServer.url },
      QUICK ? 150 : 500,
      QUICK ? 30 : 50,
    );
    print(r);
    if (process.argv.includes("--save")) saveItem(key, script, r);
    for (const [b, byOp] of Object.entries(r.series))
      for (const [op, s] of Object.entries(byOp))
        console.log(
          `${b.padEnd(9)} ${op.padEnd(8)} median ${s.median.toFixed(3)} p90 ${s.p90.toFixed(3)} p99 ${s.p99.toFixed(3)} ms`,
        );
  } finally {
    await pgServer.stop();
    await bridge.stop();
    await server.stop();
  }
}

/**
 * Puts `result` into bench/results.json under `key` (the other items as they were; the date,
 * commit and machine noted in `measured`) and rewrites bench/RESULTS.md.
 */
export function saveItem(key: string, script: string, result: object): void {
  const file = new URL("../results.json", import.meta.url);
  const saved = JSON.parse(readFileSync(file, "utf8"));
  const commit = execSync("git rev-parse --short HEAD", { encoding: "utf8" }).trim();
  saved[key] = {
    ...result,
    measured: `${new Date().toISOString().slice(0, 10)}, commit ${commit}, ${cpus()[0]?.model.trim()} × ${cpus().length}, alone (npx tsx ${script} --save)`,
  };
  saved.targets = evaluateTargets(saved);
  writeFileSync(file, `${JSON.stringify(saved, null, 2)}\n`);
  const page = new URL("../RESULTS.md", import.meta.url);
  writeFileSync(page, renderMarkdown(saved));
  // Laid out as bench/run.ts lays it out (biome), so the page's other sections do not change.
  execSync(`npx biome format --write ${JSON.stringify(page.pathname)}`, { stdio: "ignore" });
}
