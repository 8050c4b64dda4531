// The benchmark suite: `npm run bench` (BENCH_QUICK=1 for a short run; `-- --render` to rewrite
// RESULTS.md from results.json without measuring). Starts redis-server
// behind the Upstash bridge and Azurite (test/harness/servers/*), runs every part, writes
// bench/results.json and bench/RESULTS.md from this run's numbers, and stops the servers.
//   1 latency       bench/latency.ts, in child processes: node (tsx), Node 22 (bench/runtimes), Node 24, Bun
//   2 round trips   bench/roundtrips.ts
//   3 bundle size   bench/size.ts
//   4 failover      bench/failover.ts
//   5 contention    bench/contention.ts
//   6 cold start    bench/coldstart.ts: node, Node 24, Bun, Deno
//   7 quorum        bench/quorum.ts: one database vs quorums of 3 and 5, one slow member
//   8 deno kv       bench/denokv.ts: against the same KV calls by hand; crash takeover
//   9 cloudflare    bench/cloudflare.ts, in a child process (node): the Durable Object's route
//                   beside Upstash (its failover, handoff, contention and size rows are in 3-5)
//  10 dynamodb      bench/dynamodb.ts: leasehold vs the AWS SDK on dynalite, crash takeover
//  11 own clients   bench/clients.ts: redis() vs redlock and redis-semaphore on one ioredis client,
//                   postgres() vs a pg advisory lock on one pg Pool
//  12 semaphore     bench/semaphore.ts: createSemaphore (upstash, redis, cloudflare) vs redis-semaphore's
//                   Semaphore, limits 1, 5, 50 (alone: `npx tsx bench/semaphore.ts`)
//  13 changes       bench/changes.ts, in child processes (node, Bun): the src/ of the commits that
//                   changed the core's hot path, side by side on Upstash, with the current src/ twice
//  14 once          bench/once.ts: runOnce's run and late instance beside a plain tryAcquire on
//                   upstash, redis and postgres (measured before 13)
//  15 shared        bench/shared.ts: shared leases beside exclusive ones on upstash, redis, postgres
//  16 hand-over     bench/handover.ts: release → next waiter, woken (watch), in line (Durable Object) or polling; 16 contenders
//  17 many          bench/many.ts, in child processes: 1 000 and 10 000 held leases on redis and
//                   upstash, batched and not: CPU, heap per lease, timers, requests/s, spread
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ChangeSize, type ChangesResult, prepareChanges } from "./changes.ts";
import { runClients } from "./clients.ts";
import type { CloudflareResult, CloudflareTargets } from "./cloudflare.ts";
import { type Runtime, runColdStart } from "./coldstart.ts";
import { runContention } from "./contention.ts";
import { runDenoKv } from "./denokv.ts";
import { runDynamoDB } from "./dynamodb.ts";
import { runFailover } from "./failover.ts";
import { runHandover } from "./handover.ts";
import type { LatencyResult, Targets } from "./latency.ts";
import { BUN, DENO, environment, NODE22, NODE24, ROOT } from "./lib/env.ts";
import { evaluateTargets, type Results, renderMarkdown } from "./lib/report.ts";
import { startServers } from "./lib/servers.ts";
import { QUICK } from "./lib/stats.ts";
import { runMany } from "./many.ts";
import { runOnceBench } from "./once.ts";
import { runQuorum } from "./quorum.ts";
import { runRoundTrips } from "./roundtrips.ts";
import { runSemaphore } from "./semaphore.ts";
import { runSharedBench } from "./shared.ts";
import { runSize, sizeOfSrc } from "./size.ts";

// Sized for `npm run bench` under 5 minutes on a 2-core machine (issue 19), before issue 29 added
// sections 16 and 17, which wait by design (about 8 minutes; docs/DESIGN.md §7). Section 1 holds the
// close calls (5 % targets): 500 iterations, where two runs differ by the machine's drift, not by
// sampling (1 000 did no better). Sections 7, 9 and 10 compare things that differ by ×1.5 or
// more and cost the most per iteration: sideIterations. Takeover trials wait rather than
// compute, so a crash series runs all its trials at once (failParallel); handoffs, whose bound has
// no slack for the ms that many mutexes in one process add, 10 at a time (handoffParallel).
const plan = QUICK
  ? {
      iterations: 150,
      warmup: 30,
      sideIterations: 150,
      sideWarmup: 30,
      rtCycles: 5,
      failTrials: 5,
      failParallel: 5,
      handoffParallel: 5,
      perContender: 50,
      coldRuns: 3,
      changeIterations: 100,
    }
  : {
      iterations: 500,
      warmup: 50,
      sideIterations: 250,
      sideWarmup: 25,
      rtCycles: 20,
      failTrials: 20,
      failParallel: 20,
      handoffParallel: 10,
      perContender: 100,
      coldRuns: 10,
      changeIterations: 300,
    };
const started = performance.now();
const log = (msg: string) =>
  console.log(`[bench ${((performance.now() - started) / 1000).toFixed(0).padStart(4)} s] ${msg}`);
/** Seconds each section took, in the order they ran (RESULTS.md reports them). */
const sectionSeconds: Record<string, number> = {};
let current: { id: string; since: number } | undefined;
/** Closes the section running (its time recorded) and, with `id`, logs and starts the next. */
const section = (id?: string, msg = "") => {
  if (current) sectionSeconds[current.id] = Math.round((performance.now() - current.since) / 100) / 10;
  current = id === undefined ? undefined : { id, since: performance.now() };
  if (id !== undefined) log(`${id}${msg}`);
};

/** Runs `script` (bench/latency.ts by default) in a child process on `cmd` and returns its result. */
async function latencyChild<R = LatencyResult>(
  id: string,
  cmd: string[],
  targets: Targets | CloudflareTargets,
  script = "bench/latency.ts",
): Promise<R> {
  const dir = mkdtempSync(join(tmpdir(), "leasehold-bench-lat-"));
  const out = join(dir, "result.json");
  try {
    await new Promise<void>((resolve, reject) => {
      const child = spawn(cmd[0]!, [...cmd.slice(1), `${ROOT}/${script}`], {
        cwd: ROOT,
        env: { ...process.env, BENCH_TARGETS: JSON.stringify(targets), BENCH_OUT: out },
        stdio: ["ignore", "inherit", "inherit"],
      });
      child.on("error", reject);
      child.on("exit", (code) =>
        code === 0 ? resolve() : reject(new Error(`${script} on ${id} exited ${code}`)),
      );
    });
    return JSON.parse(readFileSync(out, "utf8")) as R;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Lays out RESULTS.md's tables the way `biome check` (npm run lint) wants them; no figure changes. */
function formatResults(): void {
  const r = spawnSync(`${ROOT}/node_modules/.bin/biome`, ["format", "--write", "bench/RESULTS.md"], {
    cwd: ROOT,
    encoding: "utf8",
  });
  if (r.status !== 0) console.error(`[bench] biome format bench/RESULTS.md failed: ${r.stderr || r.stdout}`);
}

// `--render`: rewrite bench/RESULTS.md from the existing bench/results.json (same run, same
// numbers) after a change to the page's layout; measures nothing.
if (process.argv.includes("--render")) {
  const saved = JSON.parse(readFileSync(`${ROOT}/bench/results.json`, "utf8")) as Results;
  saved.targets = evaluateTargets(saved);
  writeFileSync(`${ROOT}/bench/RESULTS.md`, renderMarkdown(saved));
  formatResults();
  console.log("rewrote bench/RESULTS.md from bench/results.json");
  process.exit(0);
}

const servers = await startServers();
const stop = async () => {
  await servers.stop();
};
process.once("SIGINT", () => {
  stop().finally(() => process.exit(130));
});
try {
  const env = environment(servers.redis.version);
  log(
    `servers up: bridge ${servers.bridge.url}, Azurite ${servers.azurite.accountUrl}, workerd ${servers.workerd.origin}${QUICK ? " (quick mode)" : ""}`,
  );
  const upstashTarget = { url: servers.bridge.url, token: servers.bridge.token };
  const cloudflareTarget = { url: servers.workerd.url, token: servers.workerd.token };
  const targets: Targets = {
    upstash: upstashTarget,
    azure: servers.azure,
    iterations: plan.iterations,
    warmup: plan.warmup,
  };

  // `cold: null`: measured in section 1 only (Node 22 is the bench's own runtime, bench/runtimes).
  const runtimes: { id: string; latency: string[]; cold: string[] | null }[] = [
    {
      id: `node ${process.version}`,
      latency: [process.execPath, "--import", "tsx"],
      cold: [process.execPath],
    },
  ];
  if (env.runtimes.node22)
    runtimes.push({
      id: `node ${env.runtimes.node22}`,
      latency: [NODE22, "--import", "tsx"],
      cold: null,
    });
  if (env.runtimes.node24)
    runtimes.push({
      id: `node ${env.runtimes.node24}`,
      latency: [NODE24, "--import", "tsx"],
      cold: [NODE24],
    });
  if (env.runtimes.bun) runtimes.push({ id: `bun ${env.runtimes.bun}`, latency: [BUN], cold: [BUN] });
  const missing = [
    !env.runtimes.node22 && "Node 22 (bench/runtimes: npm ci --prefix bench/runtimes failed)",
    !env.runtimes.node24 && `Node 24 (${NODE24}; test/harness/servers/runtimes.ts could not install it)`,
    !env.runtimes.bun && "Bun",
    !env.runtimes.deno && "Deno",
  ].filter(Boolean) as string[];

  const latency: LatencyResult[] = [];
  for (const rt of runtimes) {
    section(
      `1 latency on ${rt.id}`,
      `: ${plan.iterations} interleaved iterations after ${plan.warmup} warm-up`,
    );
    const r = await latencyChild(rt.id, rt.latency, targets);
    latency.push({ ...r, runtime: rt.id });
  }

  section("2 round trips", `: ${plan.rtCycles} cycles per contender`);
  const roundTrips = await runRoundTrips(servers, plan.rtCycles);

  section("3 bundle sizes");
  const size = await runSize();

  section("4 failover", `: ${plan.failTrials} trials per series`);
  const failoverConfigs = [
    { ttl: 1_000, retryDelay: 200 },
    { ttl: 2_000, retryDelay: 500 },
  ];
  const failover = await runFailover(
    upstashTarget,
    {
      trials: plan.failTrials,
      parallel: plan.failParallel,
      handoffParallel: plan.handoffParallel,
      configs: failoverConfigs,
    },
    cloudflareTarget,
  );

  section("5 contention", `: 16 contenders x ${plan.perContender}`);
  const contention = await runContention(servers, {
    contenders: 16,
    perContender: plan.perContender,
    retryDelays: [1_000, 100],
  });

  section("6 cold start", `: ${plan.coldRuns} runs per runtime and backend`);
  const cold: Runtime[] = runtimes.flatMap((rt) => (rt.cold ? [{ id: rt.id, cmd: rt.cold }] : []));
  if (env.runtimes.deno && existsSync(DENO))
    cold.push({ id: `deno ${env.runtimes.deno}`, cmd: [DENO, "run", "-A"], sources: true });
  const coldStart = await runColdStart(cold, upstashTarget, plan.coldRuns);

  section("7 quorum", `: ${plan.sideIterations} interleaved iterations after ${plan.sideWarmup} warm-up`);
  const quorum = await runQuorum(plan.sideIterations, plan.sideWarmup);

  section("8 deno kv", `: ${plan.iterations} interleaved iterations, ${plan.failTrials} crash takeovers`);
  const denoKv = await runDenoKv(plan.iterations, plan.warmup, plan.failTrials);

  section("9 cloudflare", `: ${plan.sideIterations} interleaved iterations after ${plan.sideWarmup} warm-up`);
  const cloudflare = await latencyChild<CloudflareResult>(
    "node",
    [process.execPath, "--import", "tsx"],
    {
      cloudflare: cloudflareTarget,
      upstash: upstashTarget,
      iterations: plan.sideIterations,
      warmup: plan.sideWarmup,
    },
    "bench/cloudflare.ts",
  );

  section(
    "10 dynamodb",
    `: ${plan.sideIterations} interleaved iterations after ${plan.sideWarmup} warm-up, ${plan.failTrials} takeovers`,
  );
  const dynamodb = await runDynamoDB(plan.sideIterations, plan.sideWarmup, plan.failTrials);

  section("11 own clients", `: ${plan.iterations} interleaved iterations after ${plan.warmup} warm-up`);
  const clients = await runClients(
    { redisPort: servers.redis.port, postgresUrl: servers.postgres.url },
    plan.iterations,
    plan.warmup,
  );

  section(
    "12 semaphore",
    `: limits 1, 5, 50; ${plan.iterations} interleaved iterations after ${plan.warmup} warm-up`,
  );
  const semaphore = await runSemaphore(
    { upstash: upstashTarget, redisPort: servers.redis.port, cloudflare: cloudflareTarget },
    plan.iterations,
    plan.warmup,
  );

  section("14 once", `: ${plan.iterations} interleaved iterations after ${plan.warmup} warm-up`);
  const once = await runOnceBench(
    { bridge: servers.bridge, redisPort: servers.redis.port, postgresUrl: servers.postgres.url },
    plan.iterations,
    plan.warmup,
  );

  section("15 shared", `: ${plan.iterations} interleaved iterations after ${plan.warmup} warm-up`);
  const shared = await runSharedBench(
    { bridge: servers.bridge, redisPort: servers.redis.port, postgresUrl: servers.postgres.url },
    plan.iterations,
    plan.warmup,
  );

  section(
    "16 hand-over",
    `: ${plan.failTrials} hand-overs per store, 16 contenders x ${plan.perContender / 5}`,
  );
  const handover = await runHandover(
    {
      upstash: upstashTarget,
      cloudflare: cloudflareTarget,
      redisPort: servers.redis.port,
      postgresUrl: servers.postgres.url,
    },
    { trials: plan.failTrials, contenders: 16, each: plan.perContender / 5, rtCycles: 100 },
  );
  section("17 many", ": 1 000 and 10 000 held leases, redis and upstash, batched and not (child processes)");
  const many = await runMany({ bridge: servers.bridge, redisPort: servers.redis.port });

  // Node 20 and Bun: the runtime where the core's cost shows most, and the one where it shows least.
  const changeRuntimes = runtimes.filter(
    (rt) => rt.id === `node ${process.version}` || rt.id.startsWith("bun"),
  );
  const prepared = prepareChanges();
  const changes: ChangesResult[] = [];
  const changeSizes: ChangeSize[] = [];
  try {
    for (const v of prepared.variants) {
      if (v.id !== "now, copy") changeSizes.push({ id: v.id, change: v.change, ...(await sizeOfSrc(v.dir)) });
    }
    for (const rt of changeRuntimes) {
      section(
        `13 changes on ${rt.id}`,
        `: ${prepared.variants.filter((v) => v.latency).length} versions of src/, ${plan.changeIterations} interleaved iterations after ${plan.warmup} warm-up`,
      );
      const r = await latencyChild<ChangesResult>(
        rt.id,
        rt.latency,
        {
          upstash: upstashTarget,
          iterations: plan.changeIterations,
          warmup: plan.warmup,
          variants: prepared.variants,
        } as unknown as Targets,
        "bench/changes.ts",
      );
      changes.push({ ...r, runtime: rt.id, missing: prepared.missing });
    }
  } finally {
    prepared.cleanup();
  }

  section();
  log(
    `seconds per section: ${Object.entries(sectionSeconds)
      .map(([id, x]) => `${id} ${x}`)
      .join(", ")}`,
  );
  const results: Results = {
    environment: env,
    quick: QUICK,
    plan,
    missingRuntimes: missing,
    latency,
    roundTrips,
    size,
    failover,
    contention,
    coldStart,
    quorum,
    denoKv,
    cloudflare,
    dynamodb,
    clients,
    semaphore,
    once,
    shared,
    handover,
    many,
    changes,
    changeSizes,
    seconds: Math.round((performance.now() - started) / 1000),
    sectionSeconds,
  };
  results.targets = evaluateTargets(results);
  writeFileSync(`${ROOT}/bench/results.json`, `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(`${ROOT}/bench/RESULTS.md`, renderMarkdown(results));
  formatResults();
  log("wrote bench/results.json and bench/RESULTS.md");
} finally {
  await stop();
}
