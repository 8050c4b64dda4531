// Item 7: a quorum's cost. acquire, renew and release against one database and against quorums of
// 3 and 5 independent databases (a redis-server behind an Upstash-REST bridge each, in the parent
// process), measured interleaved in a child process; then the same with one member 5 ms slower (a
// fault proxy delays its answers), which a quorum does not wait for: fan-out costs about one round
// trip of the q-th fastest member, not the sum nor the slowest. The requests per operation are
// counted afterwards, one configuration at a time, at the bridges.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Backend } from "../src/backend.ts";
import { quorum } from "../src/backends/quorum/index.ts";
import { upstash } from "../src/backends/upstash/index.ts";
import { createMutex } from "../src/index.ts";
import { startFaultProxy } from "../test/harness/servers/fault-proxy.ts";
import { startDatabases } from "../test/harness/upstash.ts";
import { ROOT } from "./lib/env.ts";
import { type Summary, summarize } from "./lib/stats.ts";

const OPS = ["acquire", "renew", "release"] as const;
type Op = (typeof OPS)[number];

export interface QuorumRow {
  config: string;
  members: number;
  quorum: number;
  median: Record<Op, Summary>;
  /** HTTP requests the members received per operation, counted one configuration at a time. */
  requests: Record<Op, number>;
}

interface Plan {
  urls: string[];
  tokens: string[];
  slowUrl: string;
  iterations: number;
  warmup: number;
}

/** The configurations, in order: label, members, quorum size and the backend. */
function configs(p: Plan): { config: string; members: number; q: number; backend: Backend }[] {
  const member = (i: number, slow = false) =>
    upstash({ url: slow ? p.slowUrl : p.urls[i]!, token: p.tokens[i]! });
  return [
    { config: "one database", members: 1, q: 1, backend: member(1) },
    { config: "quorum of 3", members: 3, q: 2, backend: quorum([1, 2, 3].map((i) => member(i))) },
    { config: "quorum of 5", members: 5, q: 3, backend: quorum([0, 1, 2, 3, 4].map((i) => member(i))) },
    { config: "one database, 5 ms slower", members: 1, q: 1, backend: member(0, true) },
    {
      config: "quorum of 3, one member 5 ms slower",
      members: 3,
      q: 2,
      backend: quorum([member(0, true), member(2), member(3)]),
    },
  ];
}

/** One acquire, renew and release; the time of each. */
async function cycle(backend: Backend, name: string): Promise<Record<Op, number>> {
  const mutex = createMutex(backend, { name, renew: false });
  let t = performance.now();
  const lease = await mutex.tryAcquire();
  const acquire = performance.now() - t;
  if (!lease) throw new Error(`bench quorum: ${name} was not free`);
  t = performance.now();
  await lease.renew();
  const renew = performance.now() - t;
  t = performance.now();
  await lease.release();
  return { acquire, renew, release: performance.now() - t };
}

/** Child mode: the interleaved measurement. */
async function measure(p: Plan): Promise<Record<Op, Summary>[]> {
  const list = configs(p);
  const samples = list.map(() => ({
    acquire: [] as number[],
    renew: [] as number[],
    release: [] as number[],
  }));
  for (let i = 0; i < p.warmup + p.iterations; i++) {
    // A fresh random order each round, so drift on this machine hits every configuration alike.
    for (const k of list.map((_, j) => j).sort(() => Math.random() - 0.5)) {
      const t = await cycle(list[k]!.backend, `bench-quorum-${k}`);
      if (i >= p.warmup) for (const op of OPS) samples[k]![op].push(t[op]);
    }
  }
  return samples.map(
    (s) => Object.fromEntries(OPS.map((op) => [op, summarize(s[op])])) as Record<Op, Summary>,
  );
}

export async function runQuorum(iterations: number, warmup: number): Promise<QuorumRow[]> {
  const dbs = await startDatabases(5);
  const slow = startFaultProxy(dbs[0]!.url, () => ({ kind: "delayResponse", ms: 5 }));
  const dir = mkdtempSync(join(tmpdir(), "leasehold-bench-quorum-"));
  try {
    const plan: Plan = {
      urls: dbs.map((d) => d.url),
      tokens: dbs.map((d) => d.token),
      slowUrl: await slow.client("bench"),
      iterations,
      warmup,
    };
    const out = join(dir, "result.json");
    await new Promise<void>((resolve, reject) => {
      const child = spawn(process.execPath, ["--import", "tsx", `${ROOT}/bench/quorum.ts`], {
        cwd: ROOT,
        env: { ...process.env, BENCH_QUORUM: JSON.stringify(plan), BENCH_OUT: out },
        stdio: ["ignore", "inherit", "inherit"],
      });
      child.on("error", reject);
      child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`bench quorum exited ${code}`))));
    });
    const medians = JSON.parse(readFileSync(out, "utf8")) as Record<Op, Summary>[];
    // Requests per operation, one configuration at a time; stragglers get time to land.
    const total = () => dbs.reduce((a, d) => a + d.bridge.stats().total, 0);
    const settle = () => new Promise((r) => setTimeout(r, 50));
    const rows: QuorumRow[] = [];
    for (const [k, c] of configs(plan).entries()) {
      const counts = { acquire: 0, renew: 0, release: 0 };
      const n = 5;
      for (let i = 0; i < n; i++) {
        const mutex = createMutex(c.backend, { name: `bench-quorum-count-${k}`, renew: false });
        let before = total();
        const lease = (await mutex.tryAcquire())!;
        await settle();
        counts.acquire += total() - before;
        before = total();
        await lease.renew();
        await settle();
        counts.renew += total() - before;
        before = total();
        await lease.release();
        await settle();
        counts.release += total() - before;
      }
      rows.push({
        config: c.config,
        members: c.members,
        quorum: c.q,
        median: medians[k]!,
        requests: { acquire: counts.acquire / n, renew: counts.renew / n, release: counts.release / n },
      });
    }
    return rows;
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await slow.stop();
    await Promise.all(dbs.map((d) => d.stop()));
  }
}

if (process.env.BENCH_QUORUM && process.env.BENCH_OUT) {
  const result = await measure(JSON.parse(process.env.BENCH_QUORUM) as Plan);
  writeFileSync(process.env.BENCH_OUT, JSON.stringify(result));
}
