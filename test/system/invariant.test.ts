// The invariant test: 8 OS processes contend on one lock name through the fault proxy (random
// delays, hangs, resets, 5xx HTML/XML pages, truncated bodies, short partitions of one client) to
// the Upstash bridge and a real redis-server, and again to the LeaseholdLock Durable Object's
// route in workerd (its waiters held open in line), and write to a fenced Redis "resource" while they
// hold the lease (and sometimes just after losing it). From their logs we check:
//   1. no two unaborted leases overlapped in time ([acquired, aborted] per token, across processes;
//      every lease is closed by its aborted line, at the latest the one its final release writes);
//   2. every rejected fenced write came from a holder whose signal had already aborted;
//   3. tokens strictly increase in acquisition order;
//   4. no process hung: each ends by itself within the run time plus a margin.
// The run lasts LEASEHOLD_SOAK_MS (default 55 000 ms on Upstash, 30 000 on the Durable Object)
// per process; set it higher for a soak.
// LEASEHOLD_SEED fixes the fault seed (the interleaving still depends on timing).
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, inject, it } from "vitest";
import { killAll } from "../harness/servers/children.ts";
import {
  type FaultProxy,
  type FaultRule,
  type RandomFaults,
  randomRule,
  seededRandom,
  startFaultProxy,
} from "../harness/servers/fault-proxy.ts";
import { startBridge, type UpstashBridge } from "../harness/servers/upstash-bridge.ts";

const PROCESSES = 8;
const DURATIONS = {
  upstash: Number(process.env.LEASEHOLD_SOAK_MS ?? 55_000),
  cloudflare: Number(process.env.LEASEHOLD_SOAK_MS ?? 30_000),
};
type BackendName = keyof typeof DURATIONS;
const TTL = 1_500;
const RETRY_DELAY = 150;
const EXIT_MARGIN = 20_000; // startup (tsx), the last release, a last simulated pause
const SEED = Number(process.env.LEASEHOLD_SEED ?? Math.floor(Math.random() * 2 ** 31));

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

/** Whether a request body is a renewal (only the holder sends those). */
const RENEWAL: Record<BackendName, (body: string) => boolean> = {
  upstash: (body) => body.includes("PEXPIRE") && !body.includes("INCR"),
  cloudflare: (body) => body.includes('"op":"renew"'),
};

/** Random faults on every request, plus partitions aimed at the holder through its renewals. */
function faultRule(seed: number, backend: BackendName): FaultRule {
  const base = randomRule({ seed, ...FAULTS });
  const rnd = seededRandom(seed ^ 0x5bd1e995);
  return (req) => {
    const renewal = RENEWAL[backend](req.body);
    if (renewal && rnd() < HOLDER_PARTITION)
      return { kind: "partition", ms: Math.round(300 + rnd() * 2_200) };
    return base(req);
  };
}

interface Line {
  t: number;
  id: string;
  ev: string;
  token?: number;
  accepted?: boolean;
  signalAbortedAtIssue?: boolean;
  stale?: boolean;
  issued?: number;
  reason?: string;
  [k: string]: unknown;
}

let lockBridge: UpstashBridge;
let resourceBridge: UpstashBridge;
/** The fault proxies, by backend: in front of the lock bridge, and of the Durable Object's route. */
const proxies = {} as Record<BackendName, FaultProxy>;
const children: ChildProcess[] = [];
const cloudflare = inject("cloudflare");

beforeAll(async () => {
  const { redisSocket } = inject("upstash");
  const token = `invariant-${crypto.randomUUID()}`;
  lockBridge = await startBridge({ redis: redisSocket, token });
  resourceBridge = await startBridge({ redis: redisSocket, token });
  proxies.upstash = startFaultProxy(lockBridge.url);
  proxies.cloudflare = startFaultProxy(cloudflare.url);
});

afterAll(async () => {
  await killAll(children);
  await Promise.all(Object.values(proxies).map((p) => p.stop()));
  await lockBridge?.stop();
  await resourceBridge?.stop();
});

/** Runs one worker; resolves its lines, how long it ran, and whether it had to be killed. */
function runWorker(
  i: number,
  env: Record<string, string>,
  limit: number,
): Promise<{ lines: Line[]; ms: number; code: number | null; killed: boolean; stderr: string }> {
  const script = fileURLToPath(new URL("../harness/fixtures/invariant-worker.ts", import.meta.url));
  const t0 = performance.now();
  const child = spawn(process.execPath, ["--import", "tsx", script], {
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

it.each(["upstash", "cloudflare"] as const)(
  `%s: ${PROCESSES} processes under random faults: one live holder at a time, fencing, monotonic tokens, no hang`,
  {
    timeout: Math.max(...Object.values(DURATIONS)) + EXIT_MARGIN + 10_000,
  },
  async (backend) => {
    const DURATION = DURATIONS[backend];
    const proxy = proxies[backend];
    const name = `invariant-${crypto.randomUUID().slice(0, 8)}`;
    const urls = await Promise.all(Array.from({ length: PROCESSES }, (_, i) => proxy.client(`w${i}`)));
    proxy.setRule(faultRule(SEED, backend));
    const results = await Promise.all(
      urls.map((url, i) =>
        runWorker(
          i,
          {
            LH_URL: url,
            LH_RESOURCE_URL: resourceBridge.url,
            LH_TOKEN: lockBridge.token,
            LH_BACKEND: backend,
            LH_LOCK_TOKEN: cloudflare.token,
            LH_NAME: name,
            LH_DURATION_MS: String(DURATION),
            LH_TTL: String(TTL),
            LH_RETRY_DELAY: String(RETRY_DELAY),
            LH_SEED: String(SEED + i + 1),
          },
          DURATION + EXIT_MARGIN,
        ),
      ),
    );
    const faults = proxy.counts();
    proxy.setRule(undefined);

    // 4. No process hung or crashed.
    for (const [i, r] of results.entries()) {
      expect(r.killed, `w${i} did not exit by itself within ${DURATION + EXIT_MARGIN} ms`).toBe(false);
      expect(r.code, `w${i} exit code; stderr: ${r.stderr}`).toBe(0);
      expect(r.lines.at(-1)?.ev, `w${i} last line`).toBe("exit");
      expect(r.lines.filter((l) => l.ev === "crash")).toEqual([]);
    }
    const lines = results.flatMap((r) => r.lines);

    // Leases: [acquired, aborted] per (process, token).
    const leases = new Map<
      string,
      { id: string; token: number; from: number; to?: number; reason?: string }
    >();
    for (const l of lines) {
      const key = `${l.id}/${l.token}`;
      if (l.ev === "acquired") {
        expect(leases.has(key), `token ${l.token} acquired twice`).toBe(false);
        leases.set(key, { id: l.id, token: l.token!, from: l.t });
      } else if (l.ev === "aborted") {
        const lease = leases.get(key)!;
        expect(lease, `aborted without acquired: ${key}`).toBeDefined();
        lease.to = l.t;
        lease.reason = l.reason;
      }
    }
    const all = [...leases.values()].sort((a, b) => a.from - b.from);
    for (const lease of all) expect(lease.to, `lease ${lease.id}/${lease.token} never closed`).toBeDefined();

    // 1. No overlap, and 3. tokens strictly increase in acquisition order.
    let minGap = Number.POSITIVE_INFINITY;
    const overlaps: string[] = [];
    for (let i = 1; i < all.length; i++) {
      const prev = all[i - 1]!;
      const cur = all[i]!;
      expect(cur.token, `token after ${prev.id}/${prev.token}`).toBeGreaterThan(prev.token);
      const gap = cur.from - prev.to!;
      minGap = Math.min(minGap, gap);
      if (gap < 0)
        overlaps.push(`${prev.id}/${prev.token} [..${prev.to}] and ${cur.id}/${cur.token} [${cur.from}..]`);
    }
    // Sorted by start, a later lease could still overlap an earlier one that is not its
    // predecessor only if the predecessor is nested in it; the token check above rules that out,
    // but check every pair anyway.
    for (let i = 0; i < all.length; i++) {
      for (let j = i + 1; j < all.length && all[j]!.from < all[i]!.to!; j++) {
        overlaps.push(`${all[i]!.id}/${all[i]!.token} overlaps ${all[j]!.id}/${all[j]!.token}`);
      }
    }
    expect([...new Set(overlaps)]).toEqual([]);

    // 2. Fencing: no live holder's write was rejected; stale writes may be.
    const writes = lines.filter((l) => l.ev === "write");
    const live = writes.filter((w) => !w.signalAbortedAtIssue);
    const stale = writes.filter((w) => w.signalAbortedAtIssue);
    const rejectedLive = live.filter((w) => !w.accepted);
    expect(rejectedLive, "fenced writes rejected while the writer's signal was unaborted").toEqual([]);
    // Every live write lies inside its own lease's interval.
    for (const w of live) {
      const lease = leases.get(`${w.id}/${w.token}`)!;
      expect(w.issued!).toBeGreaterThanOrEqual(lease.from);
      expect(w.issued!).toBeLessThanOrEqual(lease.to!);
    }
    expect(lines.filter((l) => l.ev === "writeError")).toEqual([]);

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
      backend,
      seed: SEED,
      durationMs: DURATION,
      processes: PROCESSES,
      ttl: TTL,
      acquisitions: all.length,
      holders: new Set(all.map((l) => l.id)).size,
      leaseEnds: reasons,
      minGapMs: Number(minGap.toFixed(2)),
      faults,
      requestsThroughProxy: Object.values(proxy.requests()).reduce((a, b) => a + b, 0),
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
    };
    console.log(`[invariant ${backend}] ${JSON.stringify(summary, null, 2)}`);

    // The run must have been meaningful: many handovers, every fault kind, fencing exercised.
    expect(all.length).toBeGreaterThanOrEqual(Math.floor(DURATION / 4_000));
    expect(summary.holders).toBeGreaterThanOrEqual(Math.min(PROCESSES, 4));
    for (const kind of [
      "delay",
      "delayResponse",
      "hang",
      "reset",
      "status",
      "truncate",
      "partition",
    ] as const) {
      expect(faults[kind], `faults of kind ${kind}`).toBeGreaterThan(0);
    }
    expect(summary.writes.liveAccepted).toBeGreaterThan(0);
    expect(summary.writes.staleRejected).toBeGreaterThan(0);
  },
);
