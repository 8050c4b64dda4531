// Item 16: many leases in one process. A service that holds a lease per tenant, partition or
// shard holds thousands: what 1 000 and 10 000 held leases (ttl 15 s, background renewal) cost
// one Node process on redis() over one ioredis client and on upstash() through the Upstash REST
// bridge, with the renewals batched (`renewMany`, docs/DESIGN.md §4.3) and without (the same
// backend with `renewMany` taken away: one request per renewal).
//
// Each row runs in a child process of its own (`node --expose-gc`), so its heap and CPU are its
// own and the servers' (redis-server, and the bridge in this process) are not counted:
//   heap/lease  heapUsed after gc() once the leases are held, less heapUsed after gc() before
//               acquiring (the mutexes, one per name, already made), divided by the leases: what
//               each held lease costs, its handle included.
//   CPU         process.cpuUsage() (user + system) over a steady window of two renewal periods
//               (10 s at ttl 15 s), as a share of one core.
//   timers      timers pending in the middle of it (counted in Node's timer lists: the leases'
//               timers are unref'ed, and process.getActiveResourcesInfo() lists only the others,
//               shown beside).
//   req/s       requests sent to the backend per second in the window (renew or renewMany).
//   spread      keys renewed per 200 ms (a cell of the renewal grid at ttl 15 s, DESIGN §4.3) in
//               the window: the largest bucket over the mean.
// One child at a time (about three minutes in all): two at once on a 2-core machine, with the
// bridge and redis-server beside them, counted each other's load in their CPU.
// `npx tsx bench/many.ts` runs it alone (its own servers); `--save` puts it into bench/results.json.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import IORedis from "ioredis";
import type * as Redis from "../src/backends/redis/index.ts";
import type * as Upstash from "../src/backends/upstash/index.ts";
import type * as Core from "../src/index.ts";
import type { Backend, Lease } from "../src/index.ts";
import type { UpstashBridge } from "../test/harness/servers/upstash-bridge.ts";
import { bundleSrc } from "./lib/bundle.ts";
import { manyTable } from "./lib/report.ts";
import { QUICK } from "./lib/stats.ts";

/** One row: a backend, a number of leases, batched or not. */
export interface ManyRow {
  backend: "redis" | "upstash";
  leases: number;
  batched: boolean;
  /** Share of one core over the window (0.05 is 5 %). */
  cpu: number;
  /** heapUsed bytes per held lease (see above). */
  heapPerLease: number;
  /** Timers set and not yet fired or cleared, in the middle of the window. */
  timers: number;
  /** The `Timeout` entries of process.getActiveResourcesInfo() then: the timers that keep the process alive. */
  refTimers: number;
  /** Requests per second to the backend in the window. */
  requestsPerSecond: number;
  /** Keys renewed per second in the window. */
  renewalsPerSecond: number;
  /** Largest bucket of renewed keys (`bucketMs`) over the mean bucket. */
  spread: number;
  /** The 99th percentile bucket over the mean (one hiccup of the event loop does not move it). */
  spread99: number;
  /** Leases lost during the run (0 expected). */
  lost: number;
  /** Seconds the acquires took (not in the window). */
  acquireSeconds: number;
  /** The first renewal that failed, if one did. */
  failure?: string;
}

export interface ManyResult {
  ttl: number;
  windowMs: number;
  /** The spread's bucket, ms: the renewal grid's cell at this ttl (100 before issue 29's seventh session). */
  bucketMs?: number;
  rows: ManyRow[];
  /** When measured apart from `npm run bench` (`--save`): the date, commit and machine. */
  measured?: string;
}

const TTL = 15_000;
/** Two renewal periods (ttl / 3 each). */
const WINDOW = QUICK ? (2 * TTL) / 3 : (2 * TTL) / 3 + 1_000;
// The cell of the renewal grid at TTL (src/timing.ts onGrid): renewals finer than it are batched
// together by design, so evenness is measured per cell.
const BUCKET = 200;

interface ChildConfig {
  /** Where the bundle of src/ is (bench/lib/bundle.ts). */
  dir: string;
  backend: ManyRow["backend"];
  leases: number;
  batched: boolean;
  redisPort: number;
  url: string;
  token: string;
}

/** The measured side, in a child process started with --expose-gc. */
async function child(cfg: ChildConfig): Promise<ManyRow> {
  // Live timers: the leases' timers are unref'ed, which process.getActiveResourcesInfo() does not
  // list (it lists what keeps the process alive), so they are counted in Node's own timer lists
  // (the child runs with --expose-internals): a walk once in the window, where wrapping
  // setTimeout to count would add a closure and two Set operations to every timer (about 0.5 % of
  // a core at 10 000 leases).
  const { timerListMap } = createRequire(import.meta.url)("internal/timers") as {
    timerListMap: Record<string, { _idleNext: unknown }>;
  };
  const pendingTimers = () => {
    let n = 0;
    for (const list of Object.values(timerListMap))
      for (let t = list._idleNext; t !== list; t = (t as { _idleNext: unknown })._idleNext) n++;
    return n;
  };
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error("bench/many.ts: the child needs --expose-gc");
  const collect = () => {
    gc();
    gc();
    return process.memoryUsage().heapUsed;
  };
  const { createMutex } = (await import(join(cfg.dir, "core.mjs"))) as typeof Core;
  const { redis } = (await import(join(cfg.dir, "redis.mjs"))) as typeof Redis;
  const { upstash } = (await import(join(cfg.dir, "upstash.mjs"))) as typeof Upstash;
  const client =
    cfg.backend === "redis" ? new IORedis({ host: "127.0.0.1", port: cfg.redisPort }) : undefined;
  const base = client ? redis(client) : upstash({ url: cfg.url, token: cfg.token });
  // Counting: each request sent, and its keys by BUCKET from `from`.
  let from = Number.POSITIVE_INFINITY;
  let requests = 0;
  const buckets = new Float64Array(Math.ceil(WINDOW / BUCKET) + 1);
  const note = (keys: number) => {
    const i = Math.floor((performance.now() - from) / BUCKET);
    if (i < 0 || i >= buckets.length - 1) return;
    requests++;
    buckets[i]! += keys;
  };
  const backend: Backend = {
    ...base,
    renew: (r) => {
      note(1);
      return base.renew(r);
    },
    renewMany:
      cfg.batched && base.renewMany
        ? (r) => {
            note(r.requests.length);
            return base.renewMany!(r).catch((error) => {
              failure = `${String(error?.message)} (${failure})`;
              throw error;
            });
          }
        : undefined,
  };
  if (cfg.batched && !base.renewMany) throw new Error(`bench/many.ts: ${cfg.backend} has no renewMany`);
  const tag = crypto.randomUUID().slice(0, 8);
  let lost = 0;
  let failure: string | undefined;
  const mutexes = Array.from({ length: cfg.leases }, (_, i) =>
    createMutex(backend, {
      name: `many-${tag}-${i}`,
      ttl: TTL,
      owner: "bench",
      onEvent: (e) => {
        if (e.type === "lost") lost++;
        if (e.type === "lost") failure ??= `lost: ${e.reason}`;
      },
    }),
  );
  const leases: Lease[] = [];
  // Warm the paths up (and the connection) before the heap is read.
  await (await createMutex(backend, { name: `many-${tag}-warm`, ttl: TTL }).acquire()).release();
  const before = collect();
  // BENCH_MANY_SNAP=<dir>: heap snapshots before and after acquiring, written there (while working on it).
  const snap = async (when: string) => {
    const dir = process.env.BENCH_MANY_SNAP;
    if (dir)
      (await import("node:v8")).writeHeapSnapshot(`${dir}/${cfg.backend}-${cfg.leases}-${when}.heapsnapshot`);
  };
  await snap("before");
  const t0 = performance.now();
  await inTurn(mutexes, 32, async (m) => {
    const lease = await m.tryAcquire();
    if (!lease) throw new Error("bench/many.ts: a fresh name was held");
    leases.push(lease);
  });
  const acquireSeconds = (performance.now() - t0) / 1000;
  const heapPerLease = (collect() - before) / cfg.leases;
  await snap("after");
  // BENCH_MANY_PROF=<dir>: a CPU profile of the window, written there (while working on it).
  const prof = process.env.BENCH_MANY_PROF ? await profile() : undefined;
  from = performance.now();
  const cpu0 = process.cpuUsage();
  await new Promise((r) => setTimeout(r, WINDOW / 2));
  const timers = pendingTimers();
  const refTimers = process.getActiveResourcesInfo().filter((x) => x === "Timeout").length;
  await new Promise((r) => setTimeout(r, WINDOW / 2));
  const cpu = process.cpuUsage(cpu0);
  await prof?.(`${process.env.BENCH_MANY_PROF}/${cfg.backend}-${cfg.leases}-${cfg.batched}.cpuprofile`);
  const seconds = (performance.now() - from) / 1000;
  const used = buckets.subarray(0, Math.floor(WINDOW / BUCKET));
  const total = used.reduce((a, b) => a + b, 0);
  const mean = total / used.length;
  const row: ManyRow = {
    backend: cfg.backend,
    leases: cfg.leases,
    batched: cfg.batched,
    cpu: (cpu.user + cpu.system) / 1000 / 1000 / seconds,
    heapPerLease: Math.round(heapPerLease),
    timers,
    refTimers,
    requestsPerSecond: Math.round(requests / seconds),
    renewalsPerSecond: Math.round(total / seconds),
    spread: mean > 0 ? Math.round((Math.max(...used) / mean) * 100) / 100 : 0,
    spread99:
      mean > 0
        ? Math.round(([...used].sort((a, b) => a - b)[Math.floor(used.length * 0.99)]! / mean) * 100) / 100
        : 0,
    lost,
    acquireSeconds: Math.round(acquireSeconds * 10) / 10,
    ...(failure ? { failure } : {}),
  };
  await inTurn(leases, 32, (l) => l.release().catch(() => {}));
  await client?.quit();
  return row;
}

/** Calls `fn` on each of `xs`, `parallel` at a time. */
async function inTurn<T>(xs: readonly T[], parallel: number, fn: (x: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < xs.length) await fn(xs[next++]!);
    }),
  );
}

/** Starts a CPU profile of this process; the function returned stops it and writes it to a file. */
async function profile(): Promise<(file: string) => Promise<void>> {
  const { Session } = await import("node:inspector/promises");
  const { writeFileSync } = await import("node:fs");
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.start");
  return async (file) => {
    const { profile } = await session.post("Profiler.stop");
    writeFileSync(file, JSON.stringify(profile));
    session.disconnect();
  };
}

/** Runs one row in a child process. */
function spawnRow(cfg: ChildConfig): Promise<ManyRow> {
  return new Promise((resolve, reject) => {
    const proc = spawn(
      process.execPath,
      [
        "--expose-gc",
        "--expose-internals",
        "--import",
        "tsx",
        fileURLToPath(import.meta.url),
        "--child",
        JSON.stringify(cfg),
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let out = "";
    proc.stdout.on("data", (d) => {
      out += d;
    });
    proc.on("error", reject);
    proc.on("exit", (code) => {
      const line = out.split("\n").find((l) => l.startsWith("{"));
      if (code === 0 && line) resolve(JSON.parse(line) as ManyRow);
      else reject(new Error(`bench/many.ts: the ${cfg.backend} child exited ${code}: ${out}`));
    });
  });
}

/** Item 16 against redis-server on `redisPort` and the bridge (in this process). */
export async function runMany(target: { bridge: UpstashBridge; redisPort: number }): Promise<ManyResult> {
  const bundle = await bundleSrc({
    core: "src/index.ts",
    redis: "src/backends/redis/index.ts",
    upstash: "src/backends/upstash/index.ts",
  });
  try {
    return await rowsOf(bundle.dir, target);
  } finally {
    bundle.remove();
  }
}

async function rowsOf(
  dir: string,
  target: { bridge: UpstashBridge; redisPort: number },
): Promise<ManyResult> {
  const rows: ManyRow[] = [];
  // BENCH_MANY=10000 or BENCH_MANY=10000:batched runs only those rows (while working on them).
  const only = process.env.BENCH_MANY?.split(":");
  for (const leases of only ? [Number(only[0])] : [1_000, 10_000]) {
    for (const batched of only?.[1] ? [only[1] === "batched"] : [false, true]) {
      const cfg = {
        dir,
        leases,
        batched,
        redisPort: target.redisPort,
        url: target.bridge.url,
        token: target.bridge.token,
      };
      // One child at a time: each row's CPU is its own, not shared with the other's on 2 cores.
      for (const backend of ["redis", "upstash"] as const) rows.push(await spawnRow({ ...cfg, backend }));
    }
  }
  return { ttl: TTL, windowMs: WINDOW, bucketMs: BUCKET, rows };
}

const argv = process.argv;
if (argv[2] === "--child") {
  const row = await child(JSON.parse(argv[3]!) as ChildConfig);
  console.log(JSON.stringify(row));
  process.exit(0);
} else if (import.meta.url === `file://${argv[1]}`) {
  const { startRedis } = await import("../test/harness/servers/redis.ts");
  const { startBridge } = await import("../test/harness/servers/upstash-bridge.ts");
  const { freePort } = await import("../test/harness/servers/listen.ts");
  const server = await startRedis({ port: await freePort() });
  const bridge = await startBridge({ redis: server.socket });
  try {
    const r = await runMany({ bridge, redisPort: server.port });
    console.log(manyTable(r).join("\n"));
    for (const x of r.rows)
      if (x.failure) console.log(`${x.backend} ${x.leases} ${x.batched ? "batched" : ""}: ${x.failure}`);
    if (argv.includes("--save")) {
      const { saveItem } = await import("./lib/alone.ts");
      saveItem("many", "bench/many.ts", r);
    }
  } finally {
    await bridge.stop();
    await server.stop();
  }
}
