// Item 13: what each change to the core's hot path did. The src/ of earlier commits (one per
// change, listed in CHANGES) is exported with `git archive` into a temp dir, and every version's
// createMutex(upstash(...)) runs tryAcquire → renew → release against the same Upstash bridge,
// interleaved in one child process with the floor (the identical requests replayed by a raw
// `fetch`), the backend alone and the backend with the core's per-request timeout. The current
// src/ runs twice (two copies) as a control: the spread between two copies of identical code is
// this machine's noise, and a change smaller than it is not measured.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Backend, FetchLike } from "../src/backend.ts";
import { upstash } from "../src/backends/upstash/index.ts";
import { capture, OPS, type Op, replay } from "./latency.ts";
import { type Cycle, mutexCycle, ours, time3, WAITING } from "./lib/cycles.ts";
import { ROOT } from "./lib/env.ts";
import { type Summary, shuffled, summarize } from "./lib/stats.ts";

/**
 * The commits whose src/ is measured, oldest first; each names the change it made. `size`: a
 * change to the bundle size only, whose latency is not measured (the sizes of every version are).
 */
export const CHANGES: readonly { rev: string; change: string; size?: true }[] = [
  { rev: "3fd2da5", change: "when issue 19 was filed", size: true },
  {
    rev: "46bd7e2",
    change: "issue 12: upstash refuses a fencing token that went back (fence memory), inspects with EVAL_RO",
    size: true,
  },
  {
    rev: "ebb2b55",
    change: "issue 12: azure-blob block-blob mode, owner written only when it changed",
    size: true,
  },
  {
    rev: "d2174fb",
    change:
      "issue 11: run-time option checks, onError, lease.valid; HTTP cache no-store with its fallback, no redirects, a 64 KiB reply cap, redaction in every form",
    size: true,
  },
  {
    rev: "95429f1",
    change: "issue 19: election is createElection(mutex), dropped by an app that only locks",
    size: true,
  },
  { rev: "be783c1", change: "issue 15: raiseFence for leasehold/quorum", size: true },
  { rev: "55e3872", change: "issue 16: observed expiry in the core (Backend.expiry)", size: true },
  { rev: "f20b873", change: "before issue 19's overhead work" },
  {
    rev: "0638504",
    change:
      "one lease timer; the lease's signal made when first read; a renewal aborted directly; one controller, one timer, one listener per request",
  },
  { rev: "a545bd8", change: "a renewal that moves the deadline re-arms no timer", size: true },
  {
    rev: "e7e90fb",
    change: "createMutex over the semaphore's shared attempt and wait (issue 18)",
    size: true,
  },
  { rev: "5c473f4", change: "events (issue 19)", size: true },
  { rev: "bf1c10c", change: "request timeouts not unref'ed", size: true },
  { rev: "620267a", change: "the end of the previous session (review fixes, refused())" },
  {
    rev: "02e24a5",
    change: "granted() hands the checked options to the lease instead of spreading them (on 620267a)",
  },
  {
    rev: "6f99586",
    change:
      "azure-blob trimmed (merged on 620267a, without 02e24a5): one fence step, one HEAD reader, SharedKey headers and option checks from tables",
    size: true,
  },
  {
    rev: "728fe0c",
    change:
      "upstash and redis trimmed: acquire is ACQUIRE_ANY on one key pair, shorter Lua, leaner shared/http.ts",
    size: true,
  },
  { rev: "70d56b3", change: "ACQUIRE_ANY computes the earliest expiry in Lua", size: true },
  {
    rev: "ea86951",
    change:
      "the core's trims merged: no spread, NEVER, linkedSignal in one pass; acquire() without a timeout links no signal",
    size: true,
  },
  // What the issues after 19 added to a lock-only app, against issue 29's budgets.
  {
    rev: "b8d0930",
    change:
      "issue 24: semaphore, cloudflare and quorum reviews (fence exhaustion, late grants renewed at once)",
    size: true,
  },
  {
    rev: "9b25f84",
    change: "issue 25: backends in folders over the engine's contract, checkBackend",
    size: true,
  },
  { rev: "a3794c7", change: "issue 26: runOnce (FireRecord on every backend)", size: true },
  {
    rev: "dfc4e77",
    change: "issue 27: the command line's stores; acquire()'s retried failures printed without onError",
    size: true,
  },
  {
    rev: "4587999",
    change: "issue 28: shared mode on every mutex, createLockManager",
    size: true,
  },
  { rev: "afe1cb6", change: "wake on release, the core's half (the watch capability)", size: true },
];

export interface ChangeVariant {
  id: string;
  change: string;
  /** Whether its latency is measured (not a size-only change). */
  latency: boolean;
  /** The directory holding that version's src/. */
  dir: string;
}

export interface ChangesTargets {
  upstash: { url: string; token: string };
  iterations: number;
  warmup: number;
  variants: ChangeVariant[];
}

/** One version's bundle sizes, min+gzip (bench/size.ts sizeOfSrc). */
export interface ChangeSize {
  id: string;
  change: string;
  /** The core alone (createMutex); absent in runs before issue 29. */
  core?: number;
  /** core + memory; absent in runs before issue 29. */
  memory?: number;
  /** core + upstash. */
  upstash: number;
  /** core + azure-blob. */
  azure: number;
}

export interface ChangesResult {
  runtime: string;
  iterations: number;
  /** Per contender (floor, backend, backend + timeout, then each variant's id): per op. */
  series: Record<string, Record<Op, Summary>>;
  variants: { id: string; change: string }[];
  /** Commits that could not be exported (a shallow clone): left out. */
  missing: string[];
}

/**
 * Exports each commit's src/ (and the working tree's, twice) into a temp dir; returns the variants
 * and a cleanup. A commit git cannot find is reported as missing, not measured.
 */
export function prepareChanges(): { variants: ChangeVariant[]; missing: string[]; cleanup: () => void } {
  const base = mkdtempSync(join(tmpdir(), "leasehold-bench-changes-"));
  const variants: ChangeVariant[] = [];
  const missing: string[] = [];
  for (const { rev, change, size } of CHANGES) {
    const dir = join(base, rev);
    const tar = spawnSync(
      "sh",
      ["-c", `mkdir -p "${dir}" && git archive "${rev}" src | tar -x -C "${dir}"`],
      {
        cwd: ROOT,
        encoding: "utf8",
      },
    );
    if (tar.status !== 0) {
      missing.push(rev);
      continue;
    }
    // ESM like the repository's own src/: without it tsx loads the copy as CommonJS, which
    // runs slower on Node and would bias the comparison against the older versions.
    // "sideEffects": false as in the repository's package.json, which bundlers read to tree-shake.
    writeFileSync(join(dir, "package.json"), '{"type":"module","sideEffects":false}\n');
    variants.push({ id: rev, change, latency: !size, dir: join(dir, "src") });
  }
  for (const copy of ["now", "now, copy"]) {
    const dir = join(base, copy === "now" ? "now-a" : "now-b");
    spawnSync("sh", ["-c", `mkdir -p "${dir}" && cp -r src "${dir}/"`], { cwd: ROOT });
    writeFileSync(join(dir, "package.json"), '{"type":"module","sideEffects":false}\n');
    variants.push({
      id: copy,
      change: copy === "now" ? "the working tree" : "the same code again (the noise control)",
      latency: true,
      dir: join(dir, "src"),
    });
  }
  return { variants, missing, cleanup: () => rmSync(base, { recursive: true, force: true }) };
}

/** Runs the interleaved rounds in this process (the child). */
export async function runChanges(t: ChangesTargets): Promise<ChangesResult> {
  const ttl = 15_000;
  const { url, token } = t.upstash;
  const make = (f?: FetchLike): Backend =>
    upstash({ url, token, prefix: "bench-changes:", ...(f && { fetch: f }) });
  // The floor: one steady-state cycle of today's leasehold, captured, then replayed.
  const [acq, ren, rel] = (await capture(make, "floor", ttl)).map((p) => (p.length === 1 ? p[0] : undefined));
  if (!acq || !ren || !rel) throw new Error("bench: expected one upstash request per operation");
  const { leasehold: _, ...alone } = ours(make(), "alone", ttl);
  const cycles: Record<string, Cycle> = {
    floor: () =>
      time3(
        () => replay(acq),
        () => replay(ren),
        () => replay(rel),
      ),
    ...alone,
  };
  // Loaded in a random order: in one process the version loaded later tends to run a few µs
  // faster (Node 22/24, Bun), so a fixed order would favour the last one.
  for (const [i, v] of shuffled([...t.variants.entries()])) {
    if (!v.latency) continue;
    const core = (await import(join(v.dir, "index.ts"))) as typeof import("../src/index.ts");
    const up = (await import(
      join(v.dir, "backends/upstash/index.ts")
    )) as typeof import("../src/backends/upstash/index.ts");
    const backend = up.upstash({ url, token, prefix: "bench-changes:" });
    cycles[v.id] = mutexCycle(core.createMutex(backend, { name: `version-${i}`, ttl, owner: "bench" }), v.id);
    cycles[`${v.id}${WAITING}`] = mutexCycle(
      core.createMutex(backend, { name: `version-${i}-waiting`, ttl, owner: "bench" }),
      v.id,
      true,
    );
  }
  const names = Object.keys(cycles);
  const samples: Record<string, Record<Op, number[]>> = Object.fromEntries(
    names.map((n) => [n, { acquire: [], renew: [], release: [] }]),
  );
  for (let i = 0; i < t.warmup + t.iterations; i++) {
    for (const n of shuffled(names)) {
      const [t0, t1, t2, t3] = await cycles[n]!();
      if (i < t.warmup) continue;
      samples[n]!.acquire.push(t1 - t0);
      samples[n]!.renew.push(t2 - t1);
      samples[n]!.release.push(t3 - t2);
    }
  }
  const bun = (globalThis as { Bun?: { version: string } }).Bun;
  return {
    runtime: bun ? `bun ${bun.version}` : `node ${process.version}`,
    iterations: t.iterations,
    series: Object.fromEntries(
      names.map((n) => [n, Object.fromEntries(OPS.map((op) => [op, summarize(samples[n]![op])]))]),
    ) as ChangesResult["series"],
    variants: t.variants.filter((v) => v.latency).map(({ id, change }) => ({ id, change })),
    missing: [],
  };
}

// Child mode: `BENCH_TARGETS='{...}' BENCH_OUT=file <runtime> bench/changes.ts`.
if (process.env.BENCH_TARGETS && process.env.BENCH_OUT && process.argv[1]?.endsWith("changes.ts")) {
  const result = await runChanges(JSON.parse(process.env.BENCH_TARGETS) as ChangesTargets);
  writeFileSync(process.env.BENCH_OUT, JSON.stringify(result));
  process.exit(0);
}
