// The invariant test's machinery (test/system/invariant*.test.ts): OS processes contend on one
// lock name through a fault proxy (HTTP: random delays, hangs, resets, 5xx HTML/XML pages,
// truncated bodies, short partitions of one client; TCP: delays, resets, partitions) and write to a fenced Redis "resource" while they hold
// the lease (and sometimes just after losing it). From their logs we check:
//   1. no two unaborted leases overlapped in time ([acquired, aborted] per token, across processes;
//      every lease is closed by its aborted line, at the latest the one its final release writes;
//      an abort that ran after the lease's local deadline, in a process starved of CPU, closes it
//      at that deadline, from which the lease is invalid: the summary counts these lateAborts);
//   2. every rejected fenced write came from a holder whose signal had already aborted, and no
//      write was accepted with a token below one accepted before it was issued;
//   3. tokens strictly increase in acquisition order;
//   4. no process hung: each ends by itself within the run time plus a margin.
// With `limit` (a semaphore: the workers take permits), 1-3 hold per slot, and at no instant are
// more than `limit` permits unaborted.
// With `shared` (readers and writers, docs/DESIGN.md §18: each attempt of a mutex is shared with
// that probability, else exclusive), 1 and 3 become {@link sharedChecks}: no exclusive lease's
// interval (closed as above) overlapped any other lease's, shared or exclusive, while readers did
// overlap readers (the run must see two at once); tokens strictly increase in acquisition order
// across both modes; and no reader saw the resource's version change between two of its reads made
// while its lease was valid (readers do not write: they read through a fenced read). 2 and 4 hold
// as they are. test/system/invariant-shared.test.ts runs it per backend with shared mode.
import { type ChildProcess, spawn } from "node:child_process";
import pg from "pg";
import { afterAll, beforeAll, expect, inject, it } from "vitest";
import { postgres } from "../../src/backends/postgres/index.ts";
import { nodeScript } from "./node-script.ts";
import { registerSecret } from "./secrets.ts";
import { killAll } from "./servers/children.ts";
import {
  type FaultProxy,
  type FaultRule,
  type RandomFaults,
  randomRule,
  seededRandom,
} from "./servers/fault-proxy.ts";
import type { TcpFaultProxy, TcpFaults } from "./servers/tcp-fault-proxy.ts";
import { startBridge, type UpstashBridge } from "./servers/upstash-bridge.ts";

export const PROCESSES = 8;
export const TTL = 1_500;
export const RETRY_DELAY = 150;
export const EXIT_MARGIN = 20_000; // startup, the last release, a last simulated pause

const FAULTS: Omit<RandomFaults, "seed"> = {
  delay: 0.04,
  delayResponse: 0.03,
  hang: 0.01,
  reset: 0.02,
  status: 0.03,
  truncate: 0.02,
  partition: 0.004,
  delayMs: [5, 400],
  partitionMs: [300, 2_500],
};
/** Of the renewals (the holder's requests), this share starts a partition of the holder. */
const HOLDER_PARTITION = 0.3;

/**
 * Whether a request body to the Upstash bridge is a renewal (only a holder sends those): RENEW or
 * RENEW_SHARED, which extend a key and neither bump a fence counter nor remove from a sorted set.
 */
export const upstashRenewal = (body: string): boolean =>
  body.includes("PEXPIRE") && !body.includes("INCR") && !body.includes("ZREM");

/** Whether a request body to DynamoDB is a renewal: an UpdateItem that writes a new version and ttl only. */
export const dynamodbRenewal = (body: string): boolean =>
  body.includes('"UpdateExpression":"SET #v = :v, #t = :t"');

/** Random faults on every request, plus partitions aimed at the holder through its renewals. */
export function faultRule(seed: number, isRenewal: (body: string) => boolean = upstashRenewal): FaultRule {
  const base = randomRule({ seed, ...FAULTS });
  const rnd = seededRandom(seed ^ 0x5bd1e995);
  return (req) => {
    const renewal = isRenewal(req.body);
    if (renewal && rnd() < HOLDER_PARTITION)
      return { kind: "partition", ms: Math.round(300 + rnd() * 2_200) };
    return base(req);
  };
}

export interface Line {
  t: number;
  id: string;
  ev: string;
  token?: number;
  accepted?: boolean;
  signalAbortedAtIssue?: boolean;
  stale?: boolean;
  issued?: number;
  reason?: string;
  /** On `aborted` lines: the lease's local deadline, on the same clock as `t`. */
  deadline?: number;
  [k: string]: unknown;
}

/** Runs one worker; resolves its lines, how long it ran, and whether it had to be killed. */
function runWorker(
  children: ChildProcess[],
  i: number,
  env: Record<string, string>,
  limit: number,
): Promise<{ lines: Line[]; ms: number; code: number | null; killed: boolean; stderr: string }> {
  const t0 = performance.now();
  const [node, ...args] = nodeScript("test/harness/fixtures/invariant-worker.ts");
  const child = spawn(node, args, {
    env: { ...process.env, ...env, LH_ID: `w${i}` },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let out = "";
  let stderr = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (stderr += d));
  let killed = false;
  const timer = setTimeout(() => {
    killed = true;
    child.kill("SIGKILL");
  }, limit);
  return new Promise((resolve) => {
    child.once("close", (code) => {
      clearTimeout(timer);
      const lines = out
        .split("\n")
        .filter((l) => l.trim() !== "")
        .map((l) => JSON.parse(l) as Line);
      resolve({ lines, ms: performance.now() - t0, code, killed, stderr: stderr.slice(-2_000) });
    });
  });
}

/** Where the workers' lock requests go and what befalls them: an HTTP or a TCP fault proxy. */
export interface Faults {
  /** The lock URL of worker `i`. */
  url(i: number): Promise<string>;
  /** Turns the faults on, seeded. */
  start(seed: number): void;
  /** Turns them off; what was injected, by kind, and how many requests went through (HTTP). */
  stop(): { counts: Record<string, number>; requests?: number };
}

const TCP_FAULTS: Omit<TcpFaults, "seed"> = {
  delay: 0.05,
  reset: 0.01,
  partition: 0.015, // about 2.5 times what made a run without one likely (1 in 6) on redis
  delayMs: [5, 300],
  partitionMs: [300, 2_500],
};

/** The TCP fault proxy: one port for every worker, faults on every chunk either way. */
export function tcpFaults(proxy: TcpFaultProxy, urlVia: (port: number) => string): Faults {
  return {
    url: async () => urlVia(proxy.port),
    start: (seed) => proxy.setFaults({ seed, ...TCP_FAULTS }),
    stop() {
      const counts = proxy.counts();
      proxy.setFaults(undefined);
      return { counts };
    },
  };
}

/** A server of the global setup that the workers reach over TCP, through a {@link tcpFaults} proxy. */
export interface TcpServer {
  /** The worker's LH_BACKEND. */
  backend: "redis" | "postgres";
  port: number;
  /** Its URL through a proxy on `port`. */
  urlVia: (port: number) => string;
  /** What must be done once before the workers start. */
  prepare: () => Promise<void>;
}

/** The redis and postgres servers (their passwords registered as secrets). */
export function tcpServers(): Record<TcpServer["backend"], TcpServer> {
  const redis = inject("redis");
  const pgCtx = inject("postgres");
  registerSecret(redis.password);
  registerSecret(pgCtx.password);
  return {
    redis: {
      backend: "redis",
      port: redis.port,
      urlVia: (port) => `redis://${redis.username}:${redis.password}@127.0.0.1:${port}`,
      prepare: async () => {},
    },
    postgres: {
      backend: "postgres",
      port: pgCtx.port,
      urlVia: (port) => pgCtx.url.replace(`:${pgCtx.port}/`, `:${port}/`),
      // The workers' table (the default name), created once before they start.
      prepare: async () => {
        const pool = new pg.Pool({ connectionString: pgCtx.url });
        await postgres(pool, { createTable: true }).inspect({ key: "none" });
        await pool.end();
      },
    },
  };
}

/**
 * The fenced resource of a test file's runs (an Upstash bridge on the shared redis-server, not
 * behind a fault proxy), started before its tests and stopped after; the workers' variables for it.
 */
export function fencedResource(): () => Record<string, string> {
  let bridge: UpstashBridge | undefined;
  beforeAll(async () => {
    bridge = await startBridge({ redis: inject("upstash").redisSocket });
  });
  afterAll(async () => {
    await bridge?.stop();
  });
  return () => ({ LH_RESOURCE_URL: bridge!.url, LH_RESOURCE_TOKEN: bridge!.token });
}

/** The HTTP fault proxy, a client port per worker, random faults plus partitions of the holder. */
export function httpFaults(proxy: FaultProxy, isRenewal: (body: string) => boolean = upstashRenewal): Faults {
  return {
    url: (i) => proxy.client(`w${i}`),
    start: (seed) => proxy.setRule(faultRule(seed, isRenewal)),
    stop() {
      const counts = proxy.counts();
      proxy.setRule(undefined);
      return { counts, requests: Object.values(proxy.requests()).reduce((a, b) => a + b, 0) };
    },
  };
}

/** Every kind of fault the HTTP proxy injects happened in the run. */
export function expectEveryHttpFault(faults: Record<string, number>): void {
  for (const kind of ["delay", "delayResponse", "hang", "reset", "status", "truncate", "partition"]) {
    expect(faults[kind], `faults of kind ${kind}`).toBeGreaterThan(0);
  }
}

/** What one run is: its length, its fault seed, the faults, and each worker's backend variables. */
export interface InvariantRun {
  duration: number;
  seed: number;
  faults: Faults;
  /** The variables of worker `i` besides the common ones, given its lock URL. */
  env: (url: string, i: number) => Record<string, string>;
  /** How many processes. Default {@link PROCESSES}. */
  processes?: number;
  /** Semaphore mode: the workers take permits of a semaphore with this limit. */
  limit?: number;
  /**
   * Reader/writer mode (a mutex): each attempt takes a shared lease with this probability, else an
   * exclusive one; see {@link sharedChecks}.
   */
  shared?: number;
  /** A meaningful run has at least one acquisition per this many ms, by this many holders. */
  meaningful?: { msPerAcquisition: number; holders: number };
}

interface LeaseSpan {
  id: string;
  slot: number;
  token: number;
  mode: string;
  from: number;
  to?: number;
  reason?: string;
}

/** The most leases live at one instant among `spans` (each [from, to], closed). */
function mostAtOnce(spans: LeaseSpan[]): number {
  const edges = spans.flatMap((l) => [
    { t: l.from, d: 1 },
    { t: l.to!, d: -1 },
  ]);
  edges.sort((a, b) => a.t - b.t || a.d - b.d);
  let now = 0;
  let most = 0;
  for (const e of edges) {
    now += e.d;
    most = Math.max(most, now);
  }
  return most;
}

/**
 * The reader/writer mode's checks on the leases (sorted by start) and the lines; each returns the
 * violations it found, as sentences:
 *   1. no exclusive lease overlapped any other lease (readers may overlap readers);
 *   2. tokens are unique and strictly increase in acquisition order across both modes: a lease
 *      that started before an exclusive one has a lower token, one that started after it a higher
 *      one (two readers' order is not observable: one may be granted first and log second);
 *   3. the resource's version did not change between two reads of one reader that were both made
 *      while its lease was valid (the fenced read raised the highest token to the reader's, so a
 *      write accepted in between came from a writer beside the reader).
 */
function sharedChecks(all: LeaseSpan[], lines: Line[]) {
  const overlaps: string[] = [];
  for (const e of all.filter((l) => l.mode === "exclusive")) {
    for (const l of all) {
      if (l !== e && l.from < e.to! && e.from < l.to!)
        overlaps.push(
          `exclusive ${e.id}/${e.token} [${e.from}..${e.to}] and ${l.mode} ${l.id}/${l.token} [${l.from}..${l.to}]`,
        );
    }
  }
  const tokenOrder: string[] = [];
  const seen = new Set<number>();
  for (const l of all) {
    if (seen.has(l.token)) tokenOrder.push(`token ${l.token} granted twice (again to ${l.mode} ${l.id})`);
    seen.add(l.token);
  }
  let highest = { token: 0, what: "" };
  let lastExclusive = { token: 0, what: "" };
  for (const l of all) {
    const what = `${l.mode} ${l.id}/${l.token}`;
    if (l.mode === "exclusive" && l.token <= highest.token) tokenOrder.push(`${what} after ${highest.what}`);
    else if (l.token <= lastExclusive.token) tokenOrder.push(`${what} after ${lastExclusive.what}`);
    if (l.token > highest.token) highest = { token: l.token, what };
    if (l.mode === "exclusive") lastExclusive = { token: l.token, what };
  }
  const versions = new Map<number, number[]>();
  for (const r of lines.filter((l) => l.ev === "read" && l.validAtEnd)) {
    versions.set(r.token!, [...(versions.get(r.token!) ?? []), r.version as number]);
  }
  const readerSawWrite = [...versions]
    .filter(([, v]) => Math.min(...v) !== Math.max(...v))
    .map(([token, v]) => `reader ${token} read versions ${Math.min(...v)} to ${Math.max(...v)} while valid`);
  const readers = all.filter((l) => l.mode === "shared");
  return {
    violations: { overlaps, tokenOrder, readerSawWrite },
    counts: {
      leases: { shared: readers.length, exclusive: all.length - readers.length },
      mostReadersAtOnce: mostAtOnce(readers),
      readersChecked: [...versions.values()].filter((v) => v.length >= 2).length,
      reads: lines.filter((l) => l.ev === "read").length,
    },
  };
}

/** Runs the workers under faults, checks the invariants (1-4), logs and returns the summary. */
export async function runInvariant(o: InvariantRun) {
  const children: ChildProcess[] = [];
  const name = `invariant-${crypto.randomUUID().slice(0, 8)}`;
  try {
    const processes = o.processes ?? PROCESSES;
    const urls = await Promise.all(Array.from({ length: processes }, (_, i) => o.faults.url(i)));
    o.faults.start(o.seed);
    const results = await Promise.all(
      urls.map((url, i) =>
        runWorker(
          children,
          i,
          {
            ...o.env(url, i),
            LH_NAME: name,
            LH_DURATION_MS: String(o.duration),
            LH_TTL: String(TTL),
            LH_RETRY_DELAY: String(RETRY_DELAY),
            LH_SEED: String(o.seed + i + 1),
            ...(o.limit ? { LH_LIMIT: String(o.limit) } : {}),
            ...(o.shared !== undefined ? { LH_SHARED: String(o.shared) } : {}),
          },
          o.duration + EXIT_MARGIN,
        ),
      ),
    );
    const { counts: faults, requests } = o.faults.stop();

    // 4. No process hung or crashed.
    for (const [i, r] of results.entries()) {
      expect(r.killed, `w${i} did not exit by itself within ${o.duration + EXIT_MARGIN} ms`).toBe(false);
      expect(r.code, `w${i} exit code; stderr: ${r.stderr}`).toBe(0);
      expect(r.lines.at(-1)?.ev, `w${i} last line`).toBe("exit");
      expect(r.lines.filter((l) => l.ev === "crash")).toEqual([]);
    }
    const lines = results.flatMap((r) => r.lines);

    // Leases: [acquired, aborted] per (process, slot, token); a mutex has one slot.
    const slotOf = (l: Line) => (typeof l.slot === "number" ? l.slot : 0);
    const keyOf = (l: Line) => `${l.id}/${slotOf(l)}/${l.token}`;
    const leases = new Map<string, LeaseSpan>();
    let lateAborts = 0;
    let lateMs = 0;
    for (const l of lines) {
      const key = keyOf(l);
      if (l.ev === "acquired") {
        expect(leases.has(key), `token ${l.token} acquired twice`).toBe(false);
        const mode = typeof l.mode === "string" ? l.mode : "exclusive";
        leases.set(key, { id: l.id, slot: slotOf(l), token: l.token!, mode, from: l.t });
      } else if (l.ev === "aborted") {
        const lease = leases.get(key)!;
        expect(lease, `aborted without acquired: ${key}`).toBeDefined();
        // A lease ends at its abort, or at its local deadline when the abort ran after it: a
        // process starved of CPU (a loaded machine) runs its abort late, but from the deadline on
        // its lease is invalid (`valid` false, writes stale) and the store's expiry is later still.
        lease.to = Math.min(l.t, l.deadline ?? l.t);
        if (l.deadline !== undefined && l.t > l.deadline) {
          lateAborts++;
          lateMs = Math.max(lateMs, l.t - l.deadline);
        }
        lease.reason = l.reason;
      }
    }
    const all = [...leases.values()].sort((a, b) => a.from - b.from);
    for (const lease of all) expect(lease.to, `lease ${lease.id}/${lease.token} never closed`).toBeDefined();
    // Closing a late abort at its deadline leaves the abort's timing to the fake-timer tests of
    // the lease; a timer not armed at all would show here as an abort a ttl or more late.
    expect(lateMs, "the latest abort after its lease's local deadline, in ms").toBeLessThan(TTL);

    // 1. No overlap, and 3. tokens strictly increase in acquisition order, per slot (reader/writer
    // mode: sharedChecks instead).
    let minGap = Number.POSITIVE_INFINITY;
    const overlaps: string[] = [];
    const slots = [...new Set(all.map((l) => l.slot))];
    const rw = o.shared !== undefined ? sharedChecks(all, lines) : undefined;
    for (const slot of rw ? [] : slots) {
      const mine = all.filter((l) => l.slot === slot);
      for (let i = 1; i < mine.length; i++) {
        const prev = mine[i - 1]!;
        const cur = mine[i]!;
        expect(cur.token, `slot ${slot}: token after ${prev.id}/${prev.token}`).toBeGreaterThan(prev.token);
        const gap = cur.from - prev.to!;
        minGap = Math.min(minGap, gap);
        if (gap < 0)
          overlaps.push(
            `${prev.id}/${prev.token} [${prev.from}..${prev.to}] (${prev.reason}) and ${cur.id}/${cur.token} [${cur.from}..${cur.to}]`,
          );
      }
      // Sorted by start, a later lease could still overlap an earlier one that is not its
      // predecessor only if the predecessor is nested in it; the token check above rules that
      // out, but check every pair anyway.
      for (let i = 0; i < mine.length; i++) {
        for (let j = i + 1; j < mine.length && mine[j]!.from < mine[i]!.to!; j++) {
          overlaps.push(`${mine[i]!.id}/${mine[i]!.token} overlaps ${mine[j]!.id}/${mine[j]!.token}`);
        }
      }
    }
    expect([...new Set(overlaps)], `leases that overlapped (fault seed ${o.seed})`).toEqual([]);
    // At no instant more than `limit` unaborted leases (1 for a mutex), whatever their slots.
    const limit = o.limit ?? 1;
    const most = mostAtOnce(all);
    if (!rw) expect(most, "the most unaborted leases at one instant").toBeLessThanOrEqual(limit);

    // 2. Fencing: no live holder's write was rejected; stale writes may be (checked below).
    const writes = lines.filter((l) => l.ev === "write");
    const live = writes.filter((w) => !w.signalAbortedAtIssue);
    const stale = writes.filter((w) => w.signalAbortedAtIssue);
    const rejectedLive = live.filter((w) => !w.accepted);

    const reasons: Record<string, number> = {};
    for (const lease of all) {
      const r = /released/.test(lease.reason ?? "")
        ? "released"
        : /deadline|after its deadline/.test(lease.reason ?? "")
          ? "deadline passed"
          : /another owner/.test(lease.reason ?? "")
            ? "not ours"
            : /stalled/.test(lease.reason ?? "")
              ? "stall"
              : "other";
      reasons[r] = (reasons[r] ?? 0) + 1;
    }
    const summary = {
      seed: o.seed,
      durationMs: o.duration,
      processes,
      ...(o.limit ? { limit: o.limit, mostAtOnce: most, slots: slots.length } : {}),
      ...(rw && { shared: o.shared, ...rw.counts }),
      ttl: TTL,
      acquisitions: all.length,
      holders: new Set(all.map((l) => l.id)).size,
      leaseEnds: reasons,
      ...(!rw && { minGapMs: Number(minGap.toFixed(2)) }),
      // Aborts that ran after their lease's local deadline (a timer fires late by its latency, more in a
      // process starved of CPU), and the latest; each lease counts as ended at its deadline.
      lateAborts,
      lateMs: Number(lateMs.toFixed(2)),
      faults,
      requestsThroughProxy: requests,
      writes: {
        live: live.length,
        liveAccepted: live.filter((w) => w.accepted).length,
        liveRejected: rejectedLive.length,
        stale: stale.length,
        staleAccepted: stale.filter((w) => w.accepted).length,
        staleRejected: stale.filter((w) => !w.accepted).length,
      },
      exitMs: results.map((r) => Math.round(r.ms)),
      acquireErrors: lines.filter((l) => l.ev === "acquireError").length,
      ...(rw && {
        violations: Object.fromEntries(Object.entries(rw.violations).map(([k, v]) => [k, v.length])),
      }),
    };
    console.log(`[invariant] ${JSON.stringify(summary, null, 2)}`);
    // (The checks after the summary, so that a failing run still shows its counts.)
    if (rw) {
      expect(rw.violations, "reader/writer violations").toEqual({
        overlaps: [],
        tokenOrder: [],
        readerSawWrite: [],
      });
      // Meaningful: readers overlapped readers, and readers' versions were compared.
      expect(rw.counts.mostReadersAtOnce, "the most readers at one instant").toBeGreaterThanOrEqual(2);
      expect(rw.counts.readersChecked, "readers with two valid reads").toBeGreaterThan(0);
    }
    expect(rejectedLive, "fenced writes rejected while the writer's signal was unaborted").toEqual([]);
    // Every live write lies inside its own lease's interval. Its end may be the deadline the
    // worker estimated from Date.now() and expiresAt (whole ms each), while `valid` reads the
    // monotonic clock: 2 ms of slack for that rounding (a run saw a write 0.026 ms past it).
    for (const w of live) {
      const lease = leases.get(keyOf(w))!;
      expect(w.issued!).toBeGreaterThanOrEqual(lease.from);
      expect(w.issued!).toBeLessThanOrEqual(lease.to! + 2);
    }
    expect(lines.filter((l) => l.ev === "writeError" || l.ev === "readError")).toEqual([]);
    // No write was accepted with a token below one that was accepted before it was issued (per
    // slot: each slot has its own resource).
    const acceptedStale = slots.flatMap((slot) => {
      const accepted = writes.filter((w) => w.accepted && slotOf(w) === slot).sort((a, b) => a.t - b.t);
      const highest: number[] = [];
      for (const w of accepted) highest.push(Math.max(highest.at(-1) ?? 0, w.token!));
      return accepted.filter((w) => {
        let lo = 0;
        let hi = accepted.length; // first write that completed at or after w was issued
        while (lo < hi) {
          const mid = (lo + hi) >> 1;
          if (accepted[mid]!.t < w.issued!) lo = mid + 1;
          else hi = mid;
        }
        return lo > 0 && w.token! < highest[lo - 1]!;
      });
    });
    expect(acceptedStale, "writes accepted below a token accepted before them").toEqual([]);

    // The run must have been meaningful: many handovers, fencing exercised.
    const { msPerAcquisition, holders } = o.meaningful ?? { msPerAcquisition: 4_000, holders: 4 };
    expect(all.length).toBeGreaterThanOrEqual(Math.floor(o.duration / msPerAcquisition));
    expect(summary.holders).toBeGreaterThanOrEqual(Math.min(processes, holders));
    expect(summary.writes.liveAccepted).toBeGreaterThan(0);
    return summary;
  } finally {
    await killAll(children);
  }
}

/** A run's length, LEASEHOLD_SOAK_MS (default `ms`), and fault seed, LEASEHOLD_SEED (default random). */
export function soak(ms: number): { duration: number; seed: number } {
  return {
    duration: Number(process.env.LEASEHOLD_SOAK_MS ?? ms),
    seed: Number(process.env.LEASEHOLD_SEED ?? Math.floor(Math.random() * 2 ** 31)),
  };
}

/**
 * Registers the invariant test `title`: a run of LEASEHOLD_SOAK_MS (default `ms`) per process
 * with the fault seed LEASEHOLD_SEED (default random), then `more` checks on its summary.
 */
export function invariantTest(
  title: string,
  ms: number,
  setup: () => Omit<InvariantRun, "duration" | "seed">,
  more: (summary: Awaited<ReturnType<typeof runInvariant>>) => void,
  processes = PROCESSES,
): void {
  const { duration, seed } = soak(ms);
  const what = /semaphore/.test(title) ? "at most limit live permits" : "one live holder at a time";
  it(`${processes} processes ${title}: ${what}, fencing, monotonic tokens, no hang`, {
    timeout: duration + EXIT_MARGIN + 10_000,
  }, async () => {
    more(await runInvariant({ processes, ...setup(), duration, seed }));
  });
}
