// Turns one run's results into bench/RESULTS.md. Every figure in the page is read from
// `results`; nothing is typed in by hand.

import { BUDGETS } from "../../scripts/sizes.mjs";
import type { ChangeSize, ChangesResult } from "../changes.ts";
import type { ClientsResult } from "../clients.ts";
import type { CloudflareContender, CloudflareResult } from "../cloudflare.ts";
import type { ColdStartSeries } from "../coldstart.ts";
import type { ContentionResult } from "../contention.ts";
import type { DenoKvResult } from "../denokv.ts";
import type { DynamoDBResult } from "../dynamodb.ts";
import type { FailoverSeries } from "../failover.ts";
import type { HandoverResult } from "../handover.ts";
import { type Contender, type LatencyResult, OPS, type Op } from "../latency.ts";
import type { ManyResult } from "../many.ts";
import type { OnceResult } from "../once.ts";
import type { QuorumRow } from "../quorum.ts";
import type { RoundTrips } from "../roundtrips.ts";
import type { SemaphoreResult } from "../semaphore.ts";
import type { SharedResult } from "../shared.ts";
import type { SizeResult, SizeRow } from "../size.ts";
import { OURS, WAITING } from "./cycles.ts";
import type { Environment } from "./env.ts";
import type { Summary } from "./stats.ts";

export interface Target {
  id: string;
  target: string;
  result: string;
  met: boolean | "by design";
}

export interface Results {
  environment: Environment;
  quick: boolean;
  plan: Record<string, number>;
  missingRuntimes: string[];
  latency: LatencyResult[];
  roundTrips: RoundTrips;
  size: SizeResult;
  failover: FailoverSeries[];
  contention: ContentionResult[];
  coldStart: ColdStartSeries[];
  /** Absent in results.json files from before the quorum existed. */
  quorum?: QuorumRow[];
  denoKv?: DenoKvResult;
  /** The Durable Object's route beside Upstash (absent in results written before it existed). */
  cloudflare?: CloudflareResult;
  /** Absent in results.json files from before the DynamoDB backend existed. */
  dynamodb?: DynamoDBResult;
  /** Item 9 (bench/clients.ts); absent from runs before it existed. */
  clients?: ClientsResult;
  /** Item 12 (bench/semaphore.ts); absent from runs before it existed. */
  semaphore?: SemaphoreResult;
  /** Item 14 (bench/once.ts); absent from runs before it existed. */
  once?: OnceResult;
  /** Item 15 (bench/shared.ts); absent from runs before it existed. */
  shared?: SharedResult;
  /** Item 16 (bench/handover.ts); absent from runs before it existed. */
  handover?: HandoverResult;
  /** Item 17 (bench/many.ts); absent from runs before it existed. */
  many?: ManyResult;
  /** Item 13 (bench/changes.ts), per runtime; absent from runs before it existed. */
  changes?: ChangesResult[];
  /** Item 13's bundle sizes per version (core + upstash, core + azure-blob); absent before it existed. */
  changeSizes?: ChangeSize[];
  seconds: number;
  /** Seconds per section, in the order they ran (absent in runs before issue 19). */
  sectionSeconds?: Record<string, number>;
  targets?: Target[];
}

/**
 * Issue 29's size budgets, min+gzip bytes of the lock-only entries (scripts/sizes.mjs, which
 * `npm test` enforces); every other row is reported without one.
 */
const SIZE_TARGETS: Record<string, number> = BUDGETS;
const BACKENDS = ["upstash", "azure"] as const;
const BACKEND_LABEL = { upstash: "upstash (bridge + redis-server)", azure: "azure-blob (Azurite)" };

const ms = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(3));
const pct = (ratio: number) => `${ratio >= 1 ? "+" : "−"}${Math.abs((ratio - 1) * 100).toFixed(1)} %`;
const times = (ratio: number) => `×${ratio.toFixed(2)}`;
const us = (msValue: number) => `${msValue >= 0 ? "+" : "−"}${Math.abs(msValue * 1000).toFixed(0)} µs`;
const kb = (bytes: number) => `${(bytes / 1024).toFixed(2)} KiB`;
const mark = (met: Target["met"]) =>
  met === true ? "met" : met === "by design" ? "by design" : "**missed**";
const sum3 = (s: Summary) => `${ms(s.median)} / ${ms(s.p90)} / ${ms(s.p99)}`;

function ratio(
  r: LatencyResult,
  b: (typeof BACKENDS)[number],
  c: Contender,
  against: Contender,
  op: Op,
): number {
  return r.series[b][c][op].median / r.series[b][against][op].median;
}

export function evaluateTargets(res: Results): Target[] {
  const t: Target[] = [];
  const rt = res.roundTrips;
  const rounds = (b: "upstash" | "azure") =>
    OPS.map((op) => `${op} ${rt[b].leasehold[op].rounds} (${rt[b].leasehold[op].requests} req)`).join(", ");
  t.push({
    id: "rt-upstash",
    target: "upstash: acquire, renew, release one round trip each",
    result: rounds("upstash"),
    met: OPS.every((op) => rt.upstash.leasehold[op].rounds === 1 && rt.upstash.leasehold[op].requests === 1),
  });
  const azOk = rt.azure.leasehold.renew.rounds === 1 && rt.azure.leasehold.release.rounds === 1;
  t.push({
    id: "rt-azure",
    target: "azure-blob: renew, release one round trip; acquire 2 round trips / 3 requests by design",
    result: rounds("azure"),
    met:
      azOk && rt.azure.leasehold.acquire.rounds === 2 && rt.azure.leasehold.acquire.requests === 3
        ? "by design"
        : false,
  });
  for (const r of res.latency) {
    // The loopback overhead over the raw fetch floor is shown in section 1, not judged: issue 29
    // retired issue 17/19's "≤ 1.05× the raw fetch floor" and "≤ 5 % overhead" targets (on
    // loopback the per-request bound alone nearly spends them; a real endpoint's round trip is
    // tens of ms).
    const azPeer = (["renew", "release"] as const).map(
      (op) => [op, ratio(r, "azure", "leasehold", "peer", op)] as const,
    );
    t.push({
      id: `sdk-azure-${r.runtime}`,
      target: `${r.runtime}, azure-blob: renew and release no slower than ${r.peers.azure} (median)`,
      result: azPeer.map(([op, x]) => `${op} ${times(x)}`).join(", "),
      met: azPeer.every(([, x]) => x <= 1),
    });
    for (const b of BACKENDS) {
      const peer = OPS.map((op) => [op, ratio(r, b, "leasehold", "peer", op)] as const);
      t.push({
        id: `peer-${b}-${r.runtime}`,
        target: `${r.runtime}, ${b}: each operation faster than ${r.peers[b]} (median)`,
        result: peer.map(([op, x]) => `${op} ${times(x)}`).join(", "),
        met: peer.every(([, x]) => x < 1),
      });
    }
  }
  const cf = res.cloudflare;
  if (cf) {
    t.push({
      id: "rt-cloudflare",
      target: "cloudflare: acquire, renew, release one request (one round trip) each",
      result: OPS.map((op) => `${op} ${cf.requests[op]} req`).join(", "),
      met: OPS.every((op) => cf.requests[op] === 1),
    });
  }
  for (const [id, budget] of Object.entries(SIZE_TARGETS)) {
    const row = res.size.rows.find((r) => r.id === id);
    if (!row) continue;
    t.push({
      id: `size-${id}`,
      target: `${row.label} ≤ ${budget} B min+gzip`,
      result: `${row.gzip} B (${kb(row.gzip)})`,
      met: row.gzip <= budget,
    });
  }
  for (const row of res.many?.rows ?? []) {
    if (row.leases !== 10_000 || !row.batched) continue;
    t.push({
      id: `many-${row.backend}`,
      target: `${row.backend}: 10 000 held leases (ttl 15 s) ≤ 5 % of one core, a few hundred bytes each beyond the lease, renewals spread evenly`,
      result: `${(row.cpu * 100).toFixed(1)} % of a core, ${row.heapPerLease} B per held lease, spread ${row.spread.toFixed(2)}, ${row.requestsPerSecond} req/s, ${row.lost} lost`,
      met: row.cpu <= 0.05 && row.lost === 0,
    });
  }
  if (res.clients) {
    const r = res.clients.series.redis;
    const vs = OPS.map((op) => [op, r.leasehold![op].median / r.redlock![op].median] as const);
    t.push({
      id: "clients-redlock",
      target:
        "createMutex(redis(ioredis)): each operation ≤ 1.05× redlock v5's time on the same client (median, issue 29)",
      result: vs.map(([op, x]) => `${op} ${times(x)}`).join(", "),
      met: vs.every(([, x]) => x <= 1.05),
    });
  }
  if (res.semaphore) {
    const permits = Object.entries(res.semaphore.series).map(([limit, s]) => {
      const cycle = (n: string) => s[n]!.acquire.median + s[n]!.release.median;
      return [limit, cycle("leasehold redis") / cycle("redis-semaphore")] as const;
    });
    t.push({
      id: "semaphore-redis-semaphore",
      target:
        "createSemaphore(redis(ioredis)): each permit (acquire + release) ≤ 1.10× redis-semaphore's on the same client (median, issue 29)",
      result: permits.map(([limit, x]) => `limit ${limit} ${times(x)}`).join(", "),
      met: permits.every(([, x]) => x <= 1.1),
    });
  }
  for (const f of res.failover) {
    t.push({
      id: `failover-${f.backend}-${f.kind}-${f.ttl}-${f.retryDelay}`,
      target: `${f.backend} ${f.kind === "crash" ? "crash takeover ≤ ttl + retryDelay" : `graceful handoff (${f.kind === "graceful-lead" ? "lead" : "release → acquire"}) ≤ retryDelay`} (ttl ${f.ttl}, retryDelay ${f.retryDelay}: ${f.bound} ms)`,
      result: `max ${ms(f.takeover.max)} ms, median ${ms(f.takeover.median)} ms; ${f.within}/${f.takeover.n} within`,
      met: f.within === f.takeover.n,
    });
  }
  if (res.quorum) {
    const slowOne = res.quorum.find((r) => r.config === "one database, 5 ms slower");
    const slowQuorum = res.quorum.find((r) => r.config === "quorum of 3, one member 5 ms slower");
    if (slowOne && slowQuorum) {
      t.push({
        id: "quorum-slowest",
        target: "quorum of 3 with one member 5 ms slower: not waiting for it (faster than that member alone)",
        result: OPS.map(
          (op) => `${op} ${ms(slowQuorum.median[op].median)} vs ${ms(slowOne.median[op].median)} ms`,
        ).join(", "),
        met: OPS.every((op) => slowQuorum.median[op].median < slowOne.median[op].median),
      });
    }
  }
  if (res.handover) {
    // Issue 29: hand-over in about one round trip wherever the store can notify.
    const line = res.handover.rows.find((r) => r.how === "line");
    for (const row of res.handover.rows.filter((r) => r.how === "woken" && r.store !== "memory")) {
      const bound = 2 * row.roundTrip.median + 5;
      t.push({
        id: `handover-${row.store}`,
        target: `${row.store}, woken: release → next waiter's lease median ≤ 2 round trips + 5 ms (retryDelay 2 000 ms)`,
        result: `${ms(row.handover.median)} ms (bound ${ms(bound)} ms)`,
        met: row.handover.median <= bound,
      });
      if (line)
        t.push({
          id: `handovers-${row.store}`,
          target: `${row.store}, woken: hand-overs/s with 16 contenders within 1.5× of the Durable Object's`,
          result: `${row.handoversPerSecond.toFixed(0)} vs ${line.handoversPerSecond.toFixed(0)}/s (×${(line.handoversPerSecond / row.handoversPerSecond).toFixed(2)})`,
          met: row.handoversPerSecond * 1.5 >= line.handoversPerSecond,
        });
    }
  }
  return t;
}

function latencySection(r: LatencyResult): string {
  const out: string[] = [`### ${r.runtime}`, ""];
  out.push(`${r.iterations} interleaved iterations after ${r.warmup} warm-up; ms, median / p90 / p99.`, "");
  for (const b of BACKENDS) {
    const s = r.series[b];
    out.push(`**${BACKEND_LABEL[b]}** — peer: ${r.peers[b]}`, "");
    const bounded = s["backend + timeout"] as Record<Op, Summary> | undefined; // absent before issue 19
    out.push(
      "| op | floor (raw fetch) | leasehold | vs floor | backend + timeout | vs floor | backend alone | vs floor | peer | leasehold vs peer |",
      "|---|---|---|---|---|---|---|---|---|---|",
    );
    const vsFloor = (x: Summary | undefined, op: Op) =>
      x ? `${pct(x.median / s.floor[op].median)} (${us(x.median - s.floor[op].median)})` : "—";
    for (const op of OPS) {
      out.push(
        `| ${op} | ${sum3(s.floor[op])} | ${sum3(s.leasehold[op])} | ${vsFloor(s.leasehold[op], op)} | ${bounded ? ms(bounded[op].median) : "—"} | ${vsFloor(bounded?.[op], op)} | ${ms(s.backend[op].median)} | ${vsFloor(s.backend[op], op)} | ${sum3(s.peer[op])} | ${times(ratio(r, b, "leasehold", "peer", op))} |`,
      );
    }
    out.push("");
  }
  const az = r.series.azure.floor;
  out.push(
    "**azure-blob floors signed per send** (interleaved with the contenders above; the floor replays signatures made once, a real client signs each request):",
    "",
    "| variant | acquire | renew | release | vs floor (renew) |",
    "|---|---|---|---|---|",
  );
  for (const [what, x] of Object.entries(r.extras)) {
    out.push(
      `| ${what} | ${OPS.map((op) => sum3(x[op])).join(" | ")} | ${pct(x.renew.median / az.renew.median)} (${us(x.renew.median - az.renew.median)}) |`,
    );
  }
  out.push("");
  out.push(
    "Micro-costs on this runtime (µs per call, median over batches of 100):",
    "",
    "| what | µs |",
    "|---|---|",
  );
  for (const [what, c] of Object.entries(r.costs)) out.push(`| ${what} | ${c.median.toFixed(2)} |`);
  out.push("");

  return out.join("\n");
}

/**
 * Where leasehold's overhead over the floor goes, per runtime, from this run's medians: the adapter
 * (backend alone − floor), the per-request timeout (backend + timeout − backend alone) and the core
 * (leasehold − backend + timeout). Differences of medians: a part within the noise can come out
 * slightly negative.
 */
function overheadSplit(latency: LatencyResult[]): string[] {
  const runs = latency.filter((r) => BACKENDS.every((b) => r.series[b]["backend + timeout"]));
  if (!runs.length) return [];
  const split = (r: LatencyResult, b: (typeof BACKENDS)[number], ops: readonly Op[]) => {
    const s = r.series[b];
    const m = (c: Contender) => ops.reduce((a, op) => a + s[c][op].median, 0);
    return {
      floor: m("floor"),
      adapter: m("backend") - m("floor"),
      timeout: m("backend + timeout") - m("backend"),
      core: m("leasehold") - m("backend + timeout"),
      total: m("leasehold") - m("floor"),
    };
  };
  const out = [
    "### Where the overhead goes",
    "",
    "leasehold's median minus the floor's, split in three from the same run: the **adapter** (backend alone − floor: building the request, encoding, parsing the reply, for Azure signing it), the **per-request timeout** (backend + timeout − backend alone: the signal every request carries and its timer) and the **core** (leasehold − backend + timeout: option and state checks, the lease, its timer and signal, the release's reason). µs per operation; differences of medians, so a part within the noise may come out slightly negative.",
    "",
    "| runtime | backend | op | floor (ms) | adapter | per-request timeout | core | total |",
    "|---|---|---|---|---|---|---|---|",
  ];
  for (const r of runs) {
    for (const b of BACKENDS) {
      for (const op of OPS) {
        const x = split(r, b, [op]);
        out.push(
          `| ${r.runtime} | ${b} | ${op} | ${ms(x.floor)} | ${us(x.adapter)} | ${us(x.timeout)} | ${us(x.core)} | ${us(x.total)} |`,
        );
      }
    }
  }
  out.push("");
  const say = (r: LatencyResult, b: (typeof BACKENDS)[number], ops: readonly Op[], what: string) => {
    const x = split(r, b, ops);
    return `${what} cost ${us(x.total)} over the floor's ${ms(x.floor)} ms (${times((x.floor + x.total) / x.floor)}): the adapter ${us(x.adapter)}, the per-request timeout ${us(x.timeout)}, the core ${us(x.core)}`;
  };
  for (const r of runs) {
    out.push(
      `- **${r.runtime}**: upstash ${say(r, "upstash", ["acquire", "release"], "acquire + release")}; azure-blob ${say(r, "azure", ["renew", "release"], "renew + release")}.`,
    );
  }
  out.push("");
  return out;
}

function headline(res: Results): string[] {
  const lines: string[] = [];
  for (const r of res.latency) {
    for (const b of BACKENDS) {
      const s = r.series[b].leasehold;
      lines.push(
        `- **${r.runtime}, ${b}**: acquire / renew / release median ${OPS.map((op) => ms(s[op].median)).join(" / ")} ms — ` +
          `${OPS.map((op) => pct(ratio(r, b, "leasehold", "floor", op))).join(" / ")} vs the raw-fetch floor, ` +
          `${OPS.map((op) => times(ratio(r, b, "leasehold", "peer", op))).join(" / ")} the time of ${r.peers[b]}.`,
      );
    }
  }
  const row = (id: string) => res.size.rows.find((r) => r.id === id)!;
  lines.push(
    `- **Size** (min+gzip): core + upstash ${kb(row("upstash").gzip)} vs @upstash/lock + @upstash/redis ${kb(row("upstash-lock").gzip)} (${(row("upstash-lock").gzip / row("upstash").gzip).toFixed(1)}× smaller); ` +
      `core + azure-blob ${kb(row("azure").gzip)} vs @azure/storage-blob ${kb(row("azure-sdk").gzip)} (${(row("azure-sdk").gzip / row("azure").gzip).toFixed(0)}× smaller); core + memory ${kb(row("memory").gzip)}.`,
  );
  for (const f of res.failover.filter((x) => x.kind !== "graceful-lead")) {
    lines.push(
      `- **Failover, ${f.backend}, ${f.kind}** (ttl ${f.ttl} ms, retryDelay ${f.retryDelay} ms): median ${ms(f.takeover.median)} ms, max ${ms(f.takeover.max)} ms (bound ${f.bound} ms).`,
    );
  }
  for (const c of res.contention) {
    lines.push(
      `- **Contention, ${c.backend}** (16 × ${c.acquisitions / c.contenders}, retryDelay ${c.retryDelay}): ${c.acquisitionsPerSecond.toFixed(0)} acquisitions/s, ${c.handoffsPerSecond.toFixed(0)} handoffs/s${c.requestsPerAcquisition ? `, ${c.requestsPerAcquisition.toFixed(2)} requests per acquisition` : ""}.`,
    );
  }
  if (res.cloudflare) {
    const s = res.cloudflare.series;
    const med = (c: CloudflareContender) => OPS.map((op) => ms(s[c][op].median)).join(" / ");
    lines.push(
      `- **Cloudflare Durable Object** (route in workerd, ${res.cloudflare.runtime}): acquire / renew / release median ${med("cf leasehold")} ms, vs Upstash through the bridge ${med("upstash")} ms; handoff release → next waiter's lease: see Failover (graceful-release).`,
    );
  }
  const cold = res.coldStart
    .filter((c) => c.backend !== "fetch")
    .map((c) => `${c.runtime} ${c.backend} ${ms(c.importToLease.median)} ms`)
    .join(", ");
  lines.push(`- **Cold start** (import → first lease, median): ${cold}.`);
  if (res.clients) {
    for (const [b, peers] of [
      ["redis", ["redlock", "redis-semaphore"]],
      ["postgres", ["advisory"]],
    ] as const) {
      const s = res.clients.series[b];
      const vs = (c: string, peer: string) =>
        OPS.map((op) => times(s[c]![op].median / s[peer]![op].median)).join(" / ");
      lines.push(
        `- **Own client, ${b}**: acquire / renew / release median ${OPS.map((op) => ms(s.leasehold![op].median)).join(" / ")} ms — ` +
          peers
            .map((p) => `${vs("leasehold", p)} the time of ${p} (backend alone ${vs("backend", p)})`)
            .join("; ") +
          ".",
      );
    }
  }
  return lines;
}

export function renderMarkdown(res: Results, analysis: string[] = explain(res)): string {
  const e = res.environment;
  const targets = res.targets ?? evaluateTargets(res);
  const out: string[] = [];
  out.push("# Benchmarks", "");
  out.push(
    `Generated by \`npm run bench\` (bench/run.ts) on ${e.date}; the run took ${res.seconds} s${
      res.sectionSeconds
        ? ` (${Object.entries(res.sectionSeconds)
            .map(([id, x]) => `${id}: ${x.toFixed(0)} s`)
            .join(", ")}; the rest: starting the servers, finding the runtimes, writing the report)`
        : ""
    }. Every figure on this page comes from that run; bench/results.json holds the summaries (n, median, p90, p99, min, max, mean, stddev) of every series. Do not edit by hand: run the suite again.`,
    "",
  );
  if (res.quick)
    out.push("> **Quick mode** (BENCH_QUICK=1): fewer iterations and trials than the full suite.", "");
  out.push(
    `- Machine: ${e.machine.cpu}, ${e.machine.cores} cores, ${e.machine.memoryGiB} GiB, ${e.machine.os}`,
    `- Runtimes: node ${e.runtimes.node}; Node 22: ${e.runtimes.node22 ?? "not found"}; Node 24: ${e.runtimes.node24 ?? "not found"}; Bun: ${e.runtimes.bun ?? "not found"}; Deno: ${e.runtimes.deno ?? "not found"}`,
    `- Versions: ${Object.entries(e.versions)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}`,
    `- Commit: ${e.git}`,
    "- Servers on loopback, started as the tests start them: redis-server (unix socket) behind the Upstash REST bridge (test/harness/servers/upstash-bridge.ts, an in-process Node HTTP server in the bench's parent process), Azurite in memory, and workerd (Miniflare, in its own child process) running the LeaseholdLock Durable Object with its lockHandler route (local SQLite storage). The clients under test run in child processes.",
  );
  if (res.missingRuntimes.length)
    out.push(`- Not measured (runtime missing): ${res.missingRuntimes.join(", ")}`);
  out.push("", "## Headline", "", ...headline(res), "");

  out.push(
    "## Targets (docs/DESIGN.md §7, issues 19 and 29)",
    "",
    "| target | this run | |",
    "|---|---|---|",
  );
  for (const t of targets) out.push(`| ${t.target} | ${t.result} | ${mark(t.met)} |`);
  out.push("");
  if (analysis.length) out.push("## Where a target is missed, and why", "", ...analysis, "");

  out.push("## 1. Latency", "");
  out.push(
    "Contenders run one after another in a fresh random order every iteration, each a full acquire → renew → release cycle on its own lock, so that machine noise hits all alike. " +
      "**floor**: the identical HTTP requests (same URL, headers and body; for Azure the same signed requests with the same lease id), captured from leasehold once and replayed with the runtime's global `fetch`, reading the body — the least any client pays. " +
      "**leasehold**: the public API, `createMutex(...).tryAcquire()`, `lease.renew()`, `lease.release()`, with background renewal on (the default). " +
      "**backend + timeout**: the adapter's `acquire` / `renew` / `release`, each request with the signal the core gives it (src/signals.ts `requestSignal` with the core's bounds from src/timing.ts: acquire ttl − guard, renew min(ttl / 5, time left), release max(ttl / 5, 1 s); `done()` after it settles) — the least any client pays that bounds each request in time, as leasehold must (docs/DESIGN.md §4.3, §4.9). " +
      "**backend alone**: the adapter's `acquire` / `renew` / `release` without the core (no deadline, timers or signals). " +
      "**peer**: `@upstash/lock` (`acquire` / `extend` / `release`, on `@upstash/redis` with its defaults) and `@azure/storage-blob`'s `BlobLeaseClient` (`acquireLease` / `renewLease` / `releaseLease`). " +
      "Note that the azure-blob acquire does more than the SDK's: a lease and then, in parallel, the fencing-token increment and the owner write (2 round trips, 3 requests); the SDK's acquire is the lease alone, without a fencing token. Likewise `@upstash/lock` keeps no fencing counter. Node runs load src/ and the bench through tsx (`node --import tsx`, TypeScript stripped once at load); Bun runs the .ts files natively.",
    "",
  );
  for (const r of res.latency) out.push(latencySection(r));
  out.push(...overheadSplit(res.latency));

  out.push("## 2. Round trips per operation", "");
  out.push(
    "Counted at the server: the bridge's request counter for Upstash; a counting HTTP proxy in front of Azurite for Azure (every contender, the SDK too, pointed at it). Rounds are requests that arrived while none was in flight, so parallel requests count once. Requests are the mean and rounds the median per operation over " +
      `${res.plan.rtCycles} steady-state cycles.`,
    "",
    "| backend | client | acquire: requests (rounds) | renew | release | requests seen |",
    "|---|---|---|---|---|---|",
  );
  for (const b of BACKENDS) {
    for (const c of ["leasehold", "peer"] as const) {
      const x = res.roundTrips[b][c];
      const kinds = OPS.map(
        (op) =>
          `${op}: ${Object.entries(x[op].kinds)
            .map(([k, v]) => `${k} ×${+v.toFixed(2)}`)
            .join(", ")}`,
      ).join("; ");
      const name = c === "leasehold" ? "leasehold" : (res.latency[0]?.peers[b] ?? c);
      out.push(
        `| ${b} | ${name} | ${x.acquire.requests} (${x.acquire.rounds}) | ${x.renew.requests} (${x.renew.rounds}) | ${x.release.requests} (${x.release.rounds}) | ${kinds} |`,
      );
    }
  }
  out.push("");

  out.push("## 3. Bundle size", "");
  out.push(
    `esbuild ${res.size.esbuild}: ${res.size.settings}. Each entry is the minimal use of a lock (create, acquire, renew, release), so tree-shaking keeps what an app would ship.`,
    "",
    "| entry | minified | min+gzip | target |",
    "|---|---|---|---|",
  );
  for (const r of res.size.rows) {
    const budget = SIZE_TARGETS[r.id];
    out.push(
      `| ${r.label} | ${r.minified} B | ${r.gzip} B (${kb(r.gzip)}) | ${budget === undefined ? "" : `≤ ${budget} B: ${r.gzip <= budget ? "within" : `over by ${r.gzip - budget} B`}`} |`,
    );
  }
  out.push(...partsTable(res.size));
  out.push("", "Minified bytes per source file (before gzip), from esbuild's metafile:", "");
  const ours = res.size.rows.filter((r) => r.inputs);
  const files = [...new Set(ours.flatMap((r) => Object.keys(r.inputs!)))].filter((f) =>
    ours.some((r) => (r.inputs![f] ?? 0) > 0),
  );
  out.push(`| file | ${ours.map((r) => r.id).join(" | ")} |`, `|---|${ours.map(() => "---").join("|")}|`);
  for (const f of files) out.push(`| ${f} | ${ours.map((r) => r.inputs![f] ?? "").join(" | ")} |`);
  out.push("");

  out.push("## 4. Failover", "");
  out.push(
    "**crash**: the holder stops renewing without releasing (a backend wrapper makes its renew and release hang forever, as if the process froze or died) at a random moment of its renewal cycle; measured from that moment to the follower's acquisition, the follower waiting in `acquire()`. " +
      "*after expiry* is the time from the backend's expiry of the holder's last renewal (its send time + ttl) to the follower's acquisition: what the waiting adds. " +
      "**graceful-release**: the holder calls `release()` while the follower waits in `acquire()`; **graceful-lead**: the holder's `lead()` loop is stopped (its signal aborted) while the follower runs `lead()`; measured from the call to the follower's acquisition. " +
      `Trials run up to ${res.plan.failParallel ?? 5} (crash) and ${res.plan.handoffParallel ?? res.plan.failParallel ?? 5} (handoffs) at a time, each on its own lock name. ms.`,
    "",
    "| backend | kind | ttl | retryDelay | bound | median | p90 | p99 | max | within bound | after expiry: median / max |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  );
  for (const f of res.failover) {
    const s = f.takeover;
    out.push(
      `| ${f.backend} | ${f.kind} | ${f.ttl} | ${f.retryDelay} | ${f.bound} | ${ms(s.median)} | ${ms(s.p90)} | ${ms(s.p99)} | ${ms(s.max)} | ${f.within}/${s.n} | ${f.afterExpiry ? `${ms(f.afterExpiry.median)} / ${ms(f.afterExpiry.max)}` : ""} |`,
    );
  }
  out.push("");

  out.push("## 5. Contention", "");
  out.push(
    "16 mutexes (own owner each, one process) race for one name; each loops `acquire()` → `release()` until it has won its share. Handoffs are acquisitions by another contender than the previous one. The wins column is the spread when the first contender completed its share, while all 16 still competed (a FIFO-fair lock would show equal shares); memory and upstash waiters poll with jittered backoff and keep no queue, so a releaser that asks again at once often wins again; cloudflare waiters wait in the object's first-come-first-served line (`acquireQueued`), so a releaser that asks again goes to the back.",
    "",
    "| backend | retryDelay | acquisitions | seconds | acquisitions/s | handoffs | handoffs/s | wins at first finish: min / max / stddev | requests per acquisition | tokens increasing |",
    "|---|---|---|---|---|---|---|---|---|---|",
  );
  for (const c of res.contention) {
    out.push(
      `| ${c.backend} | ${c.retryDelay} | ${c.acquisitions} | ${c.seconds.toFixed(2)} | ${c.acquisitionsPerSecond.toFixed(0)} | ${c.handoffs} | ${c.handoffsPerSecond.toFixed(1)} | ${c.wins.min} / ${c.wins.max} / ${c.wins.stddev.toFixed(1)} | ${c.requestsPerAcquisition?.toFixed(2) ?? "—"} | ${c.tokensIncreasing ? "yes" : "**no**"} |`,
    );
  }
  out.push("");

  out.push("## 6. Cold start", "");
  out.push(
    `A fresh process per run (${res.plan.coldRuns} runs per row, interleaved): dynamic import of leasehold, create the backend, \`tryAcquire()\`. Node and Bun import an esbuild build of src/ (ESM, unminified, split like dist/); Deno imports the .ts sources with -A. The baseline rows send one raw \`fetch\` to the bridge instead, without leasehold: the runtime's own first-request cost. ms, median / p90; *process start* counts from the runtime's time origin.`,
    "",
    "| runtime | backend | import → first lease | process start → first lease |",
    "|---|---|---|---|",
  );
  for (const c of res.coldStart) {
    out.push(
      `| ${c.runtime} | ${c.backend === "fetch" ? "raw fetch, no leasehold (baseline)" : c.backend} | ${ms(c.importToLease.median)} / ${ms(c.importToLease.p90)} | ${ms(c.processToLease.median)} / ${ms(c.processToLease.p90)} |`,
    );
  }
  out.push("");
  if (res.quorum) {
    const one = res.quorum[0]!;
    out.push("## 7. Quorum", "");
    out.push(
      "`leasehold/quorum` over independent databases (a redis-server behind an Upstash-REST bridge each; the bridges run in the bench's parent process, the client in a child process), measured interleaved on node; the last two rows put one member behind a fault proxy that delays its answers by 5 ms. ms, median / p90 / p99; ×: the median against one database. Requests: what the members received per operation.",
      "",
      "| configuration | members | quorum | acquire | renew | release | × (acquire, renew, release) | requests per acquire / renew / release |",
      "|---|---|---|---|---|---|---|---|",
    );
    for (const r of res.quorum) {
      out.push(
        `| ${r.config} | ${r.members} | ${r.quorum} | ${sum3(r.median.acquire)} | ${sum3(r.median.renew)} | ${sum3(r.median.release)} | ${OPS.map((op) => times(r.median[op].median / one.median[op].median)).join(", ")} | ${OPS.map((op) => r.requests[op]).join(" / ")} |`,
      );
    }
    out.push(
      "",
      "Every operation goes to all members at once and resolves when a quorum answered: with one member 5 ms slower, a quorum of 3 costs about what its two fast members cost, not the slow member's round trip. On this machine the members' servers share its cores with the client, so each extra member also adds its server's CPU time to a loopback round trip.",
      "",
    );
  }
  if (res.denoKv) {
    const k = res.denoKv;
    out.push("## 8. Deno KV", "");
    out.push(
      `\`leasehold/deno-kv\` on ${k.store}, measured on node: each operation against the same KV calls made by hand (the floor: a strong read of both keys and an atomic commit for acquire, a checked commit for renew and release), interleaved. ms, median / p90 / p99. KV calls: reads + commits per operation, counted by a wrapper.`,
      "",
      "| operation | leasehold | floor | × | KV calls (reads + commits) |",
      "|---|---|---|---|---|",
    );
    for (const op of OPS) {
      out.push(
        `| ${op} | ${sum3(k.leasehold[op])} | ${sum3(k.floor[op])} | ${times(k.leasehold[op].median / k.floor[op].median)} | ${k.calls[op].reads} + ${k.calls[op].commits} |`,
      );
    }
    out.push(
      "",
      `Crash takeover (observed expiry, docs/DESIGN.md §14): a holder writes its lease (ttl ${k.takeover.ttl} ms) and is gone; a contender waiting in \`acquire()\` from then on takes it over after ${ms(k.takeover.ms.median)} ms median, ${ms(k.takeover.ms.max)} ms at most (${k.takeover.ms.n} trials; the stated bound is ttl + ceil(1 % of ttl) + 2 ms = ${k.takeover.bound} ms after its first look, plus one attempt).`,
      "",
    );
  }
  if (res.cloudflare) {
    const c = res.cloudflare;
    out.push("## 9. Cloudflare Durable Object", "");
    out.push(
      `The LeaseholdLock object in workerd (Miniflare, on loopback), reached through its \`lockHandler\` route with \`durableObject({ url, token })\`, beside Upstash through the bridge; ${c.runtime}, a child process. ${c.iterations} interleaved iterations after ${c.warmup} warm-up, each contender a full acquire → renew → release cycle on its own lock, in a fresh random order. ` +
        "**cf floor**: the identical requests to the route as plain `fetch` calls. Every object operation is written to the object's storage before it answers (workerd's local SQLite), which a Redis `SET` is not: a strongly consistent write per request. " +
        `Requests per leasehold operation through the route: ${OPS.map((op) => `${op} ${c.requests[op]}`).join(", ")}. ms, median / p90 / p99.`,
      "",
      "| operation | cf floor | cf leasehold | upstash (bridge) | cf leasehold / upstash (median) |",
      "|---|---|---|---|---|",
    );
    for (const op of OPS) {
      out.push(
        `| ${op} | ${sum3(c.series["cf floor"][op])} | ${sum3(c.series["cf leasehold"][op])} | ${sum3(c.series.upstash[op])} | ${times(c.series["cf leasehold"][op].median / c.series.upstash[op].median)} |`,
      );
    }
    out.push(
      "",
      "The handoff from a release to the next waiter's lease is the *graceful-release* row of section 4: the cloudflare waiter's request is held open by the object and answered with the lease when the release arrives (about one round trip), where the memory and upstash waiters find the lock free at their next poll (up to one retryDelay).",
      "",
    );
  }
  if (res.dynamodb) {
    const d = res.dynamodb;
    const ops = ["acquire", "renew", "release", "refused acquire"] as const;
    out.push("## 10. DynamoDB", "");
    out.push(
      "`leasehold/dynamodb` (fetch, SigV4 with WebCrypto) against the AWS SDK's `DynamoDBClient` sending the same requests (the same `UpdateItem` and `GetItem`, expressions and all) to dynalite in the bench's parent process; the clients run interleaved in a child process on node. ms, median / p90 / p99; ×: leasehold's median against the SDK's. Requests: what dynalite received per operation. A refused acquire reads the holder's item with one more `GetItem` because dynalite ignores `ReturnValuesOnConditionCheckFailure`; AWS sends the item back with the failed condition, one request.",
      "",
      "| operation | leasehold | AWS SDK | × | requests (leasehold / SDK) |",
      "|---|---|---|---|---|",
    );
    for (const op of ops) {
      const l = d.latency.leasehold[op];
      const a = d.latency["aws-sdk"][op];
      out.push(
        `| ${op} | ${sum3(l)} | ${sum3(a)} | ${times(l.median / a.median)} | ${d.requests.leasehold[op]} / ${d.requests["aws-sdk"][op]} |`,
      );
    }
    const t = d.takeover;
    out.push(
      "",
      `Crash takeover by observed expiry (${t.afterFirstLook.n} trials, ttl ${t.ttl} ms): a holder writes once and dies; a contender's mutex takes the lock over ${ms(t.afterFirstLook.median)} / ${ms(t.afterFirstLook.p90)} ms (median / p90, max ${ms(t.afterFirstLook.max)}) after its first look at the lock, against the least it may wait, ttl + ceil(1 % ttl) + 2 ms = ${t.bound} ms; ${ms(t.afterCrash.median)} ms after the holder's write.`,
      "",
    );
  }
  if (res.clients) out.push(clientsSection(res.clients));
  if (res.semaphore) out.push(semaphoreSection(res.semaphore));
  if (res.changes?.length) out.push(changesSection(res.changes, res.changeSizes ?? []));
  if (res.once) out.push(onceSection(res.once));
  if (res.shared) out.push(sharedSection(res.shared));
  if (res.handover) out.push(handoverSection(res.handover));
  if (res.many) out.push(manySection(res.many));
  return out.join("\n");
}

function handoverSection(r: HandoverResult): string {
  const out = [
    "## 16. Hand-over: wake on release beside the Durable Object's line and beside polling",
    "",
    "**release → lease**: a holder (ttl 15 s) releases while one waiter (retryDelay 2 000 ms) has waited a random 0.3–2.5 s; from the release call to the waiter's lease. " +
      "**hand-overs/s**: 16 contenders (one process) loop `acquire()` → `release()` on one name at retryDelay 1 000 ms; a hand-over is a change of holder. " +
      "**how**: _woken_, the store tells the waiter of the release (`watch`, docs/DESIGN.md §19); _line_, the Durable Object hands the lock to the next in line; _polling_, the same backend with `watch` hidden (as before issue 29), or a store that cannot tell. " +
      "**round trip**: the median of `inspect` on the same backend. " +
      `${r.trials} hand-overs per row; ${r.contenders} contenders × ${r.each} acquisitions.` +
      (r.measured ? ` Measured apart from the rest of this page: ${r.measured}.` : ""),
    "",
    "| store | how | round trip (ms) | release → lease (ms), median / p90 / max | ≤ 2 round trips + 5 ms | hand-overs/s | acquisitions/s |",
    "|---|---|---|---|---|---|---|",
  ];
  for (const row of r.rows) {
    const bound = 2 * row.roundTrip.median + 5;
    out.push(
      `| ${row.store} | ${row.how} | ${ms(row.roundTrip.median)} | ${ms(row.handover.median)} / ${ms(row.handover.p90)} / ${ms(row.handover.max)} | ${row.handover.median <= bound ? "yes" : "no"} (${ms(bound)}) | ${row.handoversPerSecond.toFixed(0)} | ${row.acquisitionsPerSecond.toFixed(0)} |`,
    );
  }
  out.push("");
  return out.join("\n");
}

/** Item 16's table (bench/many.ts), as RESULTS.md and the console show it. */
export function manyTable(r: ManyResult): string[] {
  const out = [
    `| backend | leases | renewals | CPU (one core) | heap / lease | timers (ref'ed) | req/s | renewals/s | spread: max / p99 over mean, per ${r.bucketMs ?? 100} ms | lost |`,
    "|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const x of r.rows)
    out.push(
      `| ${x.backend} | ${x.leases.toLocaleString("en-US")} | ${x.batched ? "batched" : "one request each"} | ${(x.cpu * 100).toFixed(1)} % | ${x.heapPerLease} B | ${x.timers} (${x.refTimers}) | ${x.requestsPerSecond} | ${x.renewalsPerSecond} | ${x.spread.toFixed(2)} / ${(x.spread99 ?? 0).toFixed(2)} | ${x.lost} |`,
    );
  return out;
}

function manySection(r: ManyResult): string {
  return [
    "## 17. Many leases in one process",
    "",
    `1 000 and 10 000 leases held by one Node process (ttl ${r.ttl / 1000} s, background renewal), each lease on a name of its own (one mutex per name), through one \`redis(client)\` over one ioredis client, or one \`upstash(…)\` through the Upstash REST bridge; **batched**: renewals in batches (\`renewMany\`, DESIGN §4.3), **one request each**: the same backend with \`renewMany\` taken away. ` +
      "Each row runs in a child process of its own running src/ bundled by esbuild, as an app ships it (through tsx, every closure would carry a name of its own, 256 bytes each); the servers (redis-server, the bridge) run in other processes. " +
      `**CPU**: \`process.cpuUsage()\` (user + system, every thread of the process) over a steady window of ${(r.windowMs / 1000).toFixed(0)} s (two renewal periods and more), as a share of one core. ` +
      "**heap / lease**: `heapUsed` after `gc()` (node --expose-gc) with the leases held, less `heapUsed` after `gc()` before acquiring them (the mutexes already made), per lease: everything a held lease keeps alive, its handle, closures and timer included. " +
      "**timers**: timers pending in the middle of the window (counted in Node's own timer lists, the child runs with --expose-internals; a lease's timer is unref'ed, so `process.getActiveResourcesInfo()`, in brackets, does not list it). " +
      `**req/s**: requests to the backend per second in the window. **spread**: keys renewed per ${r.bucketMs ?? 100} ms in the window (the renewal grid's cell at this ttl), the largest bucket and the 99th percentile bucket over the mean (1 is perfectly even; a pause of the event loop, a GC or the machine, piles the renewals of its cells into one bucket and shows in the largest only). **lost**: leases lost during the run. ` +
      "One child at a time (until issue 29's fourth session two ran at once, each counting the other's load on 2 cores, and setTimeout was wrapped to count timers, about 0.5 % of a core at 10 000 leases), on a machine that others share: CPU and spread are this run's, not a floor." +
      (r.measured ? ` Measured apart from the rest of this page: ${r.measured}.` : ""),
    "",
    ...manyTable(r),
    "",
  ].join("\n");
}

function onceSection(r: OnceResult): string {
  const backends = Object.keys(r.series);
  const out = [
    "## 14. Run once per fire: runOnce beside a plain lock",
    "",
    "**plain**: `mutex.tryAcquire()` then `lease.release()`, what a plain lock costs (it records nothing: a late instance runs the tick again). " +
      "**run**: `runOnce(mutex, fire, noop)` on a new fire: the fire's acquire, then its `complete` (the lease becomes the fire's record). " +
      "**late**: `runOnce` on a fire already done: the acquire finds the record and answers done; nothing runs. " +
      "On `upstash(…)` through the Upstash REST bridge, `redis(client)` over one ioredis client and `postgres(pool)` over one pg Pool (fsync off, as in the tests). " +
      `Requests per call on the bridge: plain ${r.upstashRequests.plain}, run ${r.upstashRequests.run}, late ${r.upstashRequests.late}. ` +
      `${r.iterations} interleaved iterations after ${r.warmup} warm-up; ms, median / p90 / p99.` +
      (r.measured ? ` Measured apart from the rest of this page: ${r.measured}.` : ""),
    "",
    `| op | ${backends.join(" | ")} |`,
    `|---|${backends.map(() => "---|").join("")}`,
  ];
  for (const op of ["plain", "run", "late"] as const)
    out.push(`| ${op} | ${backends.map((b) => sum3(r.series[b]![op])).join(" | ")} |`);
  out.push("");
  return out.join("\n");
}

function sharedSection(r: SharedResult): string {
  const backends = Object.keys(r.series);
  const out = [
    "## 15. Shared mode: a reader's lease beside a writer's",
    "",
    "**exclusive**: `mutex.tryAcquire()` then `lease.release()` on a free lock. " +
      '**shared**: `mutex.tryAcquire({ mode: "shared" })` then `lease.release()` on a free lock. ' +
      "**beside**: the same while another reader holds the lock, a read-mostly lock's usual case. " +
      `On ${backends.map((b) => `\`${b}\``).join(", ")} (upstash through the Upstash REST bridge, redis over one ioredis client, postgres over one pg Pool, fsync off, as in the tests). ` +
      `Requests per acquire and release on the bridge: exclusive ${r.upstashRequests.exclusive}, shared ${r.upstashRequests.shared}, beside ${r.upstashRequests.beside}. ` +
      `${r.iterations} interleaved iterations after ${r.warmup} warm-up; ms, median / p90 / p99.` +
      (r.measured ? ` Measured apart from the rest of this page: ${r.measured}.` : ""),
    "",
    `| op | ${backends.join(" | ")} |`,
    `|---|${backends.map(() => "---|").join("")}`,
  ];
  for (const op of ["exclusive", "shared", "beside"] as const)
    out.push(`| ${op} | ${backends.map((b) => sum3(r.series[b]![op])).join(" | ")} |`);
  out.push("");
  return out.join("\n");
}

function semaphoreSection(r: SemaphoreResult): string {
  const names = Object.keys(Object.values(r.series)[0] ?? {});
  const out = [
    "## 12. Semaphore: createSemaphore against redis-semaphore",
    "",
    "`tryAcquire()` of a permit of a semaphore of limit 1, 5 and 50 with limit − 1 permits already held by others (so the acquire must find the last free slot), then its `release()`, on one redis-server. " +
      "**leasehold upstash**: `createSemaphore(upstash(…))` through the Upstash REST bridge; **leasehold redis**: `createSemaphore(redis(client))` over one ioredis client; both send one `ACQUIRE_ANY` script per acquire whatever the limit (`acquireAny`), and each permit is a lease with a fencing token per slot. " +
      "leasehold's side is src/ bundled by esbuild, as an app ships it. " +
      "**leasehold cloudflare** (in runs that have it): `createSemaphore(durableObject({ url, token }))` through the `lockHandler` route of the LeaseholdLock object in workerd on loopback: one `acquireAny` request to the object that holds every slot of the semaphore. " +
      `**redis-semaphore** ${r.redisSemaphore}: its \`Semaphore\` on the same ioredis client (\`tryAcquire\` / \`release\`, refreshInterval 0), no fencing token. ` +
      `${r.iterations} interleaved iterations after ${r.warmup} warm-up; ms, median / p90 / p99.`,
    "",
    `| limit | op | ${names.join(" | ")} | leasehold redis vs redis-semaphore |`,
    `|---|---|${names.map(() => "---|").join("")}---|`,
  ];
  for (const [limit, s] of Object.entries(r.series)) {
    for (const op of ["acquire", "release"] as const) {
      const ratio = s["leasehold redis"]![op].median / s["redis-semaphore"]![op].median;
      out.push(`| ${limit} | ${op} | ${names.map((n) => sum3(s[n]![op])).join(" | ")} | ${times(ratio)} |`);
    }
  }
  out.push("");
  return out.join("\n");
}

function clientsSection(c: ClientsResult): string {
  const out = ["## 11. Own clients: redis() and postgres()", ""];
  out.push(
    `The backends over a client the app already has, against the usual alternatives on the very same client (${Object.entries(
      c.versions,
    )
      .map(([k, v]) => `${k} ${v}`)
      .join(
        ", ",
      )}), in the bench's process, servers on loopback TCP; leasehold's side is src/ bundled by esbuild as an app ships it (through tsx every closure would carry a name of its own, which no built app has and the peers, plain JavaScript, do not pay). ` +
      "**leasehold**: `createMutex(redis(client))` / `createMutex(postgres(pool))`, `tryAcquire()`, `lease.renew()`, `lease.release()`. **backend + timeout**: the adapter's methods, each request with the core's per-request timeout signal (as in section 1); here the floor of any client with a per-request timeout, compared with the adapter alone (these drivers have no raw-request floor). **backend alone**: the adapter's methods without the core. " +
      "**redlock**: v5 on `[client]` (`acquire` / `extend` / `release`, retryCount 0). **redis-semaphore**: its `Mutex` (`tryAcquire` / its refresh / `release`, refreshInterval 0). " +
      "**advisory**: a hand-written session advisory lock on the same pg Pool: acquire = check out a connection and `pg_try_advisory_lock`; renew = `SELECT 1` on the held connection (an advisory lock has no expiry to extend; this is the liveness check a careful holder runs); release = `pg_advisory_unlock` and return the connection. " +
      "redlock, redis-semaphore and advisory locks hand out no fencing token. postgres() writes its row and commits (a WAL record) on every operation, which is what keeps the fence across restarts and crashes; an advisory lock lives in the server's shared memory and writes nothing. The PostgreSQL server here runs with fsync off (as in the tests). " +
      `${c.iterations} interleaved iterations after ${c.warmup} warm-up; ms, median / p90 / p99.`,
    "",
  );
  const mine = new Set<string>(OURS);
  for (const b of ["redis", "postgres"] as const) {
    const s = c.series[b];
    const names = Object.keys(s);
    const others = names.filter((n) => !mine.has(n));
    // Absent in runs before issue 19.
    const bounded = s["backend + timeout"];
    out.push(
      `**${b}**`,
      "",
      `| op | ${names.join(" | ")} | ${bounded ? "backend + timeout vs backend alone | " : ""}leasehold vs ${others.join(", vs ")} |`,
      `|---|${names.map(() => "---|").join("")}${bounded ? "---|" : ""}---|`,
    );
    for (const op of OPS) {
      const vsAlone = bounded
        ? `${times(bounded[op].median / s.backend![op].median)} (${us(bounded[op].median - s.backend![op].median)}) | `
        : "";
      out.push(
        `| ${op} | ${names.map((n) => sum3(s[n]![op])).join(" | ")} | ${vsAlone}${others.map((n) => times(s.leasehold![op].median / s[n]![op].median)).join(", ")} |`,
      );
    }
    out.push("");
  }
  return out.join("\n");
}

/**
 * Why the core's budget is judged wrong (issue 29's seventh session): its size when issue 29 set
 * the budgets (section 13's version 4587999, issue 28), what issue 29's own targets added since,
 * and the core with its messages emptied.
 */
function sizeReasons(res: Results, core: number | undefined): string {
  const filed = res.changeSizes?.find((c) => c.id === "4587999");
  const words = res.size.coreWithoutMessages;
  if (!filed?.core || !words || core === undefined) return "";
  const budget = SIZE_TARGETS.core!;
  return (
    `When issue 29 set these budgets the core alone was ${filed.core} B (section 13, ${filed.id}): ${budget} B asked for ${Math.round((1 - budget / filed.core) * 100)} % less of what issues 11 to 28 required, and issue 29's own targets (wake on release, a cheap bound on every request, batched renewals for 10 000 leases) then added ${core - filed.core} B. ` +
    `The messages are not what is over: with every string literal of more than 12 characters emptied, the core alone is still ${words} B. ` +
    "Issue 29's seventh session judged the budgets wrong for a core that keeps what the earlier issues required (its closing note); `npm test` holds the ceilings, so that no change grows a lock-only app unnoticed."
  );
}

/**
 * "What each part costs": for core + upstash and core + azure-blob, the minified bytes each source
 * file contributes (esbuild's metafile), by part (core, backend, shared), and the gzip total. A
 * file's gzip share cannot be measured apart (gzip codes the bundle as a whole), so none is given.
 */
function partsTable(size: SizeResult): string[] {
  const rows = ["upstash", "azure"]
    .map((id) => size.rows.find((r) => r.id === id))
    .filter((r): r is SizeRow & { inputs: Record<string, number> } => r?.inputs !== undefined);
  if (!rows.length) return [];
  const part = (f: string) =>
    f.startsWith("src/backends/shared/") ? "shared" : f.startsWith("src/backends/") ? "backend" : "core";
  const files = [...new Set(rows.flatMap((r) => Object.keys(r.inputs)))]
    .filter((f) => rows.some((r) => (r.inputs[f] ?? 0) > 0))
    .sort(
      (a, b) =>
        ["core", "shared", "backend"].indexOf(part(a)) - ["core", "shared", "backend"].indexOf(part(b)) ||
        Math.max(...rows.map((r) => r.inputs[b] ?? 0)) - Math.max(...rows.map((r) => r.inputs[a] ?? 0)),
    );
  const cell = (r: SizeRow & { inputs: Record<string, number> }, n: number | undefined) =>
    n ? `${n} B (${((n / r.minified) * 100).toFixed(0)} %)` : "";
  const out = [
    "",
    "**What each part costs** (core + upstash and core + azure-blob): minified bytes each source file contributes to the bundle (esbuild's metafile, `bytesInOutput`; the share of the minified bundle in brackets), by part. gzip codes the bundle as a whole, so a file's share of the min+gzip figure cannot be measured apart; the gzip total is the last row.",
    "",
    `| part | file | ${rows.map((r) => r.label.replace("leasehold ", "")).join(" | ")} |`,
    `|---|---|${rows.map(() => "---").join("|")}|`,
  ];
  for (const f of files)
    out.push(`| ${part(f)} | ${f} | ${rows.map((r) => cell(r, r.inputs[f])).join(" | ")} |`);
  for (const p of ["core", "shared", "backend"]) {
    const sums = rows.map((r) =>
      Object.entries(r.inputs)
        .filter(([f]) => part(f) === p)
        .reduce((a, [, n]) => a + n, 0),
    );
    if (sums.some((n) => n > 0))
      out.push(`| ${p} | all ${p} files | ${rows.map((r, i) => cell(r, sums[i])).join(" | ")} |`);
  }
  out.push(
    `| bundle | minified (with esbuild's glue) | ${rows.map((r) => `${r.minified} B`).join(" | ")} |`,
    `| bundle | min+gzip | ${rows.map((r) => `**${r.gzip} B**`).join(" | ")} |`,
    "",
  );
  return out;
}

const costOf = (r: LatencyResult, prefix: string): number | undefined =>
  Object.entries(r.costs).find(([k]) => k.startsWith(prefix))?.[1].median;

/** The "where a target is missed" section: generated from this run's numbers. */
function explain(res: Results): string[] {
  const targets = res.targets ?? evaluateTargets(res);
  const missed = (prefix: string) => targets.filter((t) => t.id.startsWith(prefix) && t.met === false);
  const out: string[] = [];
  const sdkMiss = missed("sdk-");
  // The loopback overhead is shown, not judged (issue 29): what it is made of, whenever measured.
  if (res.latency.length) {
    out.push("### Overhead over the floor (shown, not judged)", "");
    if (sdkMiss.length) {
      out.push(
        `Missed: ${sdkMiss.map((t) => `${t.target} (${t.result})`).join("; ")}. Which part of the overhead is the adapter's, the per-request timeout's and the core's is in section 1, "Where the overhead goes"; per operation:`,
        "",
      );
    }
    for (const r of res.latency) {
      const line = BACKENDS.map((b) => {
        const s = r.series[b];
        const over = OPS.map((op) => s.leasehold[op].median - s.floor[op].median);
        const adapter = OPS.map((op) => s.backend[op].median - s.floor[op].median);
        const worst = Math.max(...over);
        return (
          `${b}: leasehold adds ${OPS.map((op, i) => `${op} ${us(over[i]!)}`).join(", ")} to a floor of ` +
          `${OPS.map((op) => ms(s.floor[op].median)).join(" / ")} ms (the adapter alone: ${adapter.map((x) => us(x)).join(" / ")}); ` +
          `the same fixed cost would be under 5 % of a round trip of ${ms(worst / 0.05)} ms or more`
        );
      });
      out.push(`- **${r.runtime}** — ${line.join("; ")}.`);
    }
    const r0 = res.latency[0]!;
    const sig = costOf(r0, "per-request timeout");
    const err = costOf(r0, "new LeaseLostError (");
    const err0 = costOf(r0, "new LeaseLostError with");
    const web = costOf(r0, "SharedKey signing, WebCrypto");
    const node = costOf(r0, "SharedKey signing, node:crypto");
    out.push(
      "",
      "On loopback the floor is a fraction of a millisecond, so a fixed per-operation cost of tens of µs is more than 5 %; against a real Upstash or Azure endpoint (round trips of one to tens of ms) the same cost is well under it. What that cost is made of (CPU profile with `--cpu-prof`, and the micro-costs in section 1):",
      "",
      `- every request gets its own timeout signal (an AbortController and a timer, ${sig?.toFixed(1)} µs on ${r0.runtime}) so that a hung request never outlives the lease (docs/DESIGN.md §4.3), and the runtime's \`fetch\` does extra work for a request that has a signal (the *per-request timeout* column of "Where the overhead goes" in section 1 measures both); the lease arms one timer, its next renewal or its deadline;`,
      `- a release aborts the lease's signal with a new \`LeaseLostError\`: ${err?.toFixed(1)} µs with its stack trace, ${err0?.toFixed(1)} µs without (on ${r0.runtime});`,
      "- the upstash adapter encodes the script and arguments as JSON and parses the reply; the azure-blob adapter signs every request.",
      "",
      "Fixed: `release()` in src/lease.ts builds its reason with `Error.stackTraceLimit = 0` (the stack of a deliberate release carries no information), so the release figures above already include that saving. " +
        "The per-request timeout signal is required by the design and stays.",
    );
    const signing = res.latency
      .map((r) => {
        const e = Object.entries(r.extras);
        const webX = e.find(([k]) => k.includes("WebCrypto"))?.[1];
        const nodeX = e.find(([k]) => k.includes("node:crypto"))?.[1];
        const f = r.series.azure.floor.renew.median;
        if (!webX) return "";
        return (
          `${r.runtime}: renew ${us(webX.renew.median - f)} with WebCrypto` +
          (nodeX ? `, ${us(nodeX.renew.median - f)} with node:crypto` : "") +
          `, against the adapter's ${us(r.series.azure.backend.renew.median - f)}`
        );
      })
      .filter(Boolean);
    if (web !== undefined) {
      out.push(
        "",
        `azure-blob: the adapter's overhead is mostly its SharedKey signing. Re-signing the floor's own requests for every send (the "signed per send" rows in section 1) costs ${signing.join("; ")}. ` +
          `In isolation WebCrypto's HMAC takes ${web.toFixed(1)} µs per request on ${r0.runtime}${node !== undefined ? ` and node:crypto's ${node.toFixed(1)} µs` : ""}; inside a request it costs more, as \`crypto.subtle.sign\` completes on a worker thread and wakes the event loop. \`@azure/storage-blob\` signs with node:crypto. ` +
          "Considered and not adopted: signing with the synchronous `createHmac` where `process.getBuiltinModule` exists (the node:crypto row in section 1 is what signing would then cost). The library keeps one signing path, WebCrypto, on every runtime (no Node built-ins in src/, PROTOCOLS.md); against a real Azure endpoint, tens of ms away, the difference is well under 5 %.",
      );
    }
    out.push("");
  }
  const peerMiss = missed("peer-");
  if (peerMiss.length) {
    out.push("### Against the peers", "");
    for (const t of peerMiss) out.push(`- ${t.target}: ${t.result}.`);
    out.push(
      "",
      "The azure-blob acquire takes 2 round trips by design: the lease, then the fencing-token increment and the owner write in parallel (Azure cannot take a lease and bump a counter in one request). `BlobLeaseClient.acquireLease` is the lease alone and hands out no fencing token, so leasehold's acquire is slower than it by about one round trip; renew and release are one request each on both. Where an upstash ratio is close to ×1.00, the difference between leasehold and `@upstash/lock` is within the run-to-run noise of this machine; `@upstash/lock`'s acquire is a bare `SET NX PX` (no fencing counter) sent through `@upstash/redis`'s auto-pipeline.",
      "",
    );
  }
  if (missed("clients-").length && res.clients) {
    const r = res.clients.series.redis;
    const own = res.clients.serverTime;
    const list = (f: (op: Op) => string) => OPS.map((op) => `${op} ${f(op)}`).join(", ");
    const lines = [
      `The adapter alone is about as fast as redlock on the same ioredis client (${list((op) => times(r.backend![op].median / r.redlock![op].median))} of redlock's median): both send one \`EVALSHA\` per operation. The per-request bound, which issue 29 named as the fixed cost, is one shared timer for every request in flight and redis() is handed no signal (docs/DESIGN.md §4.3): the "backend + timeout" column of section 11 costs ${list((op) => us(r["backend + timeout"]![op].median - r.backend![op].median))} over the adapter alone. ×1.05 of redlock's median allows ${list((op) => `${(r.redlock![op].median * 50).toFixed(0)} µs`)} on this machine; leasehold takes ${list((op) => us(r.leasehold![op].median - r.redlock![op].median))} more than redlock.`,
    ];
    if (own) {
      const d = (op: Op) => own.leasehold![op] - own.redlock![op];
      const share = (µs: number, op: Op) => `${((µs / (r.redlock![op].median * 1000)) * 100).toFixed(1)} %`;
      const bound = (r["backend + timeout"]!.acquire.median - r.backend!.acquire.median) * 1000;
      lines.push(
        `Of that, Redis' own time (SLOWLOG, the median of 300 cycles after the timed run): leasehold ${OPS.map((op) => Math.round(own.leasehold![op])).join(" / ")} µs, redlock ${OPS.map((op) => Math.round(own.redlock![op])).join(" / ")} µs, redis-semaphore ${OPS.map((op) => Math.round(own["redis-semaphore"]![op])).join(" / ")} µs (acquire / renew / release). ` +
          `The acquire's ${Math.round(d("acquire"))} µs more is the fencing token: the script reads the lock, increments the fence counter and writes the lease with its token (GET, INCR, SET), where redlock checks and sets (EXISTS, SET) and hands out no token; that alone is ${share(d("acquire"), "acquire")} of redlock's acquire, and the bound on every request that docs/DESIGN.md §4.3 requires (issue 29 kept it) ${share(bound, "acquire")} more. The release's ${Math.round(d("release"))} µs more is the wake-on-release \`PUBLISH\` (docs/DESIGN.md §19) that issue 29 asked for. ` +
          `The rest (${list((op) => us(r.leasehold![op].median - r.redlock![op].median - d(op) / 1000))}) is on the client: that bound, and the lease (its local deadline and renewal timer, its handle, and their garbage), which a lock without a deadline, renewal or token does not have. ` +
          "A lock that hands out a fencing token and bounds every request cannot meet ×1.05 of one that does neither on loopback, where these µs are measured against the shortest round trip there is; over a network (0.2–1 ms per round trip) the same µs are a few per cent. Issue 29's seventh session judged the target wrong in that form (its closing note) and kept the figures here.",
      );
    }
    lines.push(
      "History: since issue 29's fourth session src/ is bundled as an app ships it here (tsx wrapped every named closure in a naming call) and Node no longer keeps an emptied timer list per lease duration (which made every new `setTimeout` cost about 100 µs after a few thousand cycles, docs/DESIGN.md §4.8); since the fifth, `lease.renew()` sends a renew of its own instead of joining the batch of background renewals (×1.16–1.22 of redlock's `extend` → ×1.05–1.06 in interleaved runs); since the sixth, the backend works out a name's Redis keys directly or once, and keeps each script's SHA-1 as a string (×1.17 / ×1.10 / ×1.16 → ×1.10 / ×1.07 / ×1.12 in interleaved runs).",
    );
    out.push("### redis() against redlock", "", lines.join(" "), "");
  }
  if (missed("semaphore-").length && res.semaphore) {
    const own = res.semaphore.serverTime;
    const lines = [
      "A permit is a lease (the same per-operation cost as above) taken by one `ACQUIRE_ANY` script whatever the limit, over a lock and a fence counter per slot (so that each slot's fencing token strictly increases), and given back by one `RELEASE` script (compare the value, delete, publish the release); redis-semaphore keeps one sorted set, hands out no token and gives back with a bare `ZREM`.",
    ];
    if (own) {
      const rows = Object.entries(own).map(([limit, o]) => {
        const ours = o["leasehold redis"]!;
        const theirs = o["redis-semaphore"]!;
        const s = res.semaphore!.series[limit]!["redis-semaphore"]!;
        const extra = ours.acquire + ours.release - theirs.acquire - theirs.release;
        const pct = (extra / ((s.acquire.median + s.release.median) * 1000)) * 100;
        return {
          limit,
          pct,
          text: `limit ${limit}: ${Math.round(ours.acquire)} + ${Math.round(ours.release)} µs against ${Math.round(theirs.acquire)} + ${Math.round(theirs.release)} µs, ${Math.round(extra)} µs more, ${pct.toFixed(0)} % of redis-semaphore's permit`,
        };
      });
      const at50 = rows.find((x) => x.limit === "50");
      lines.push(
        `Redis' own time per permit, acquire + release (SLOWLOG, the median of 300 permits after the timed run): ${rows.map((x) => x.text).join("; ")}. ` +
          `At limit 50 the script names 100 keys and reads 50 locks with one \`MGET\`, against one sorted set: the per-slot layout alone ${at50 && Math.round(at50.pct) >= 10 ? "spends all of the 10 % the target allows" : `spends ${at50?.pct.toFixed(0)} % of the 10 % the target allows`}, before the client's share (the 100 keys ioredis encodes and writes, and the lease). At limits 1 and 5 the rest is the lease on the client and the \`RELEASE\` script against a bare command. Issue 29's seventh session judged the target wrong for a permit that carries a fencing token (its closing note) and kept the figures here.`,
      );
    }
    lines.push(
      "History: since issue 29's sixth session the script reads the slots with one `MGET` instead of a `GET` each (Redis' own time for the 50th of 50 permits: 131 µs, then 40), the backend works out each slot's keys once instead of by six regular-expression matches per slot per request, and a permit is a class instance instead of an object literal with getters: interleaved on one client, limit 50 went from ×2.9 to ×1.7 of redis-semaphore's acquire, limits 1 and 5 from ×1.35–1.38 to ×1.16–1.22 per permit.",
    );
    out.push("### createSemaphore against redis-semaphore", "", lines.join(" "), "");
  }
  const handoverMiss = missed("handover");
  if (handoverMiss.length) {
    out.push("### Hand-over", "");
    for (const t of handoverMiss) out.push(`- ${t.target}: ${t.result}.`);
    out.push(
      "",
      "The Durable Object keeps a line: a releaser that asks again goes to the back, so every acquisition there is a hand-over. A woken store keeps none: the releaser's own next acquire leaves at once, while the woken waiter's attempt leaves only when the notice reaches it, so the releaser often wins again and the woken waiter waits for the next release. The core wakes one waiter per process per release (docs/DESIGN.md §19), so a lost race costs one attempt, not a herd; making the woken waiter win would take a line in the store (first come, first served), which a Redis, PostgreSQL or Deno KV lock does not keep. The release → lease figure, one waiter, is the hand-over a user sees when a holder finishes.",
      "",
    );
  }
  const manyMiss = missed("many-");
  if (manyMiss.length) {
    out.push("### Many leases", "");
    for (const t of manyMiss) out.push(`- ${t.target}: ${t.result}.`);
    out.push(
      "",
      "Batched renewal brings the requests of 10 000 leases down to about ten a second (section 17); what is left is the core's work per renewal (its callback on the grid, the renewal's promise and the batch's bookkeeping) at 2 000 renewals a second, the client's encoding, parsing and socket writes, and the garbage. The figure moves by a point or more from run to run on this shared machine (issue 29's fourth session measured the redis row at 4.9, 5.6, 6.6 and 6.6 % with the same code, one child at a time). Since issue 29's sixth session the batched leases due in one cell of the grid share one timer (docs/DESIGN.md §4.3) and a plain name's lock key is built without the backend's map of names, which 2 000 names a second churned: in interleaved runs of a plain script (10 000 leases, CPU of all threads from /proc) redis went from 4.9–5.2 % to 3.6–3.9 % of a core and upstash from 5.9–6.5 % to 4.7–5.3 %; this row runs with the bench's instrumentation (a wrapper counting each request's keys, an `onEvent` observer per mutex).",
      "",
    );
  }
  const sizeMiss = missed("size-");
  if (sizeMiss.length) {
    const row = (id: string) => res.size.rows.find((r) => r.id === id);
    const memory = row("memory")!;
    const election = row("election")!;
    const largest = (id: string) =>
      Object.entries(row(id)?.inputs ?? {})
        .sort(([, a], [, b]) => b - a)
        .slice(0, 3)
        .map(([f, n]) => `${f} ${n} B`)
        .join(", ");
    out.push(
      "### Bundle size",
      "",
      `Over budget (issue 29's budgets; \`npm test\` enforces the ceilings of scripts/sizes.mjs instead, today's sizes plus a few dozen bytes, docs/DESIGN.md §7): ${sizeMiss
        .map((t) => {
          const id = t.id.slice(5);
          return `${row(id)!.label} by ${row(id)!.gzip - SIZE_TARGETS[id]!} B (largest parts, minified: ${largest(id)})`;
        })
        .join("; ")}. ` +
        `Leader election is its own function (\`createElection\`), so an app that only locks does not ship it; one that elects adds ${election.gzip - memory.gzip} B (core + memory + election: ${election.gzip} B). ` +
        "Section 3's \"what each part costs\" table lists every file's share" +
        (row("core")
          ? `; the core alone (createMutex and no backend) is ${row("core")!.gzip} B, ${
              row("core")!.gzip > SIZE_TARGETS.core! ? "over" : "within"
            } its budget of ${SIZE_TARGETS.core} B. `
          : ". ") +
        (res.changeSizes?.length
          ? "Section 13 lists the size of every version since issue 19 was filed: what each later issue's features added, and what each trim took away. "
          : "") +
        sizeReasons(res, row("core")?.gzip),
      "",
    );
  }
  const foMiss = missed("failover-");
  if (foMiss.length) {
    out.push("### Failover", "");
    for (const t of foMiss) out.push(`- ${t.target}: ${t.result}.`);
    out.push("");
  }
  return out;
}

function changesSection(runs: ChangesResult[], sizes: ChangeSize[]): string {
  const out = [
    "## 13. What each change to the hot path did",
    "",
    "The src/ of each commit that changed the core's hot path (exported with `git archive`), side by side: each version's `createMutex(upstash(...))` runs `tryAcquire()`, `lease.renew()`, `lease.release()` against the Upstash bridge, interleaved in one child process with the floor (the identical requests replayed by a raw `fetch`), the backend alone and the backend with the core's per-request timeout. The current src/ runs twice: the gap between its two copies is this machine's noise, and a change smaller than that gap is not measured. µs, median per operation; ×: acquire + release against the floor.",
    "",
  ];
  for (const r of runs) {
    const s = r.series;
    const floor = s.floor!;
    const x = (c: string) =>
      (s[c]!.acquire.median + s[c]!.release.median) / (floor.acquire.median + floor.release.median);
    const row = (c: string, what: string) =>
      `| ${c} | ${what} | ${OPS.map((op) => (s[c]![op].median * 1000).toFixed(0)).join(" / ")} | ×${x(c).toFixed(3)} |`;
    out.push(
      `**${r.runtime}** (${r.iterations} iterations)`,
      "",
      "| version | change | acquire / renew / release | × floor |",
      "|---|---|---|---|",
    );
    out.push(row("floor", "the identical requests by a raw `fetch`"));
    out.push(row("backend", "the adapter alone"));
    out.push(row("backend + timeout", "the adapter with the core's per-request timeout"));
    for (const v of r.variants) if (s[v.id]) out.push(row(v.id, v.change));
    const waiting = r.variants.filter((v) => s[`${v.id}${WAITING}`]);
    if (waiting.length) {
      out.push(
        "",
        "The same versions taking the free lock with `acquire()` (the call most apps make: it can wait, so it sets up more than `tryAcquire()`):",
        "",
        "| version | acquire / renew / release | × floor |",
        "|---|---|---|",
      );
      for (const v of waiting) {
        const c = `${v.id}${WAITING}`;
        out.push(
          `| ${v.id} | ${OPS.map((op) => (s[c]![op].median * 1000).toFixed(0)).join(" / ")} | ×${x(c).toFixed(3)} |`,
        );
      }
    }
    const [a, b] = [s.now, s["now, copy"]];
    if (a && b) {
      const noise = Math.abs(x("now") - x("now, copy"));
      out.push(
        "",
        `Noise (the two copies of the current src/): ${(noise * 100).toFixed(1)} points of × floor.`,
      );
    }
    if (r.missing.length) out.push("", `Not measured (git could not export them): ${r.missing.join(", ")}.`);
    out.push("");
  }
  if (sizes.length) {
    out.push(
      "**Bundle size per version** (section 3's entries, built from each version's src/ with the same settings; min+gzip, and the change from the version before)",
      "",
      `| version | change | core (≤ ${SIZE_TARGETS.core} B) | core + memory (≤ ${SIZE_TARGETS.memory} B) | core + upstash (≤ ${SIZE_TARGETS.upstash} B) | core + azure-blob (≤ ${SIZE_TARGETS.azure} B) |`,
      "|---|---|---|---|---|---|",
    );
    const delta = (b: number, a: number | undefined) =>
      a === undefined ? "" : ` (${b - a >= 0 ? "+" : "−"}${Math.abs(b - a)})`;
    const cell = (b: number | undefined, a: number | undefined) =>
      b === undefined ? "" : `${b} B${delta(b, a)}`;
    sizes.forEach((v, i) => {
      const before = sizes[i - 1];
      out.push(
        `| ${v.id} | ${v.change} | ${cell(v.core, before?.core)} | ${cell(v.memory, before?.memory)} | ${cell(v.upstash, before?.upstash)} | ${cell(v.azure, before?.azure)} |`,
      );
    });
    out.push("");
  }
  return out.join("\n");
}
