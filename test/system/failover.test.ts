// Leader election across real OS processes: three candidates (test/harness/fixtures/campaign.ts)
// campaign through the shared Upstash bridge, and again through the Durable Object's route. The leader is SIGKILLed, or stopped with SIGTERM; a
// follower must take over within ttl + retryDelay (crash) or about one retryDelay (graceful), and at no
// instant may two processes run the task with unaborted signals.
import { type ChildProcess, spawn } from "node:child_process";
import { afterEach, describe, expect, inject, it } from "vitest";
import { killAll } from "../harness/servers/children.ts";

/** The backends, by the name the fixture reads from LEASEHOLD_BACKEND. */
const backends = { upstash: inject("upstash"), cloudflare: inject("cloudflare") };
type BackendName = keyof typeof backends;
const root = new URL("../../", import.meta.url);
const fixture = new URL("../harness/fixtures/campaign.ts", import.meta.url).pathname;
const TTL = 1_500;
const RETRY_DELAY = 200;
/** Scheduling slack for the graceful handover: signal delivery, two round trips, a busy machine. */
const SLACK = 100;

interface Event {
  pid: number;
  event: "campaign" | "start" | "deadline" | "stop" | "error" | "exit";
  t: number;
  token?: number;
  deadline?: number;
  message?: string;
}

interface Candidate {
  child: ChildProcess;
  pid: number;
  stderr: string[];
  exited: Promise<number | null>;
}

const children: ChildProcess[] = [];
afterEach(() => killAll(children.splice(0)));

const now = () => performance.timeOrigin + performance.now();

function candidate(backend: BackendName, name: string, events: Event[]): Candidate {
  const ctx = backends[backend];
  const child = spawn(process.execPath, ["--import", "tsx", fixture], {
    cwd: root,
    env: {
      ...process.env,
      LEASEHOLD_URL: ctx.url,
      LEASEHOLD_TOKEN_SECRET: ctx.token,
      LEASEHOLD_BACKEND: backend,
      LOCK_NAME: name,
      TTL: String(TTL),
      RETRY_DELAY: String(RETRY_DELAY),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  const stderr: string[] = [];
  let buffer = "";
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    buffer += chunk;
    const lines = buffer.split("\n");
    buffer = lines.pop()!;
    for (const line of lines) if (line.trim()) events.push(JSON.parse(line));
  });
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => stderr.push(chunk));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, pid: child.pid!, stderr, exited };
}

async function until<T>(what: string, get: () => T | undefined, timeout = 15_000): Promise<T> {
  const end = performance.now() + timeout;
  for (;;) {
    const value = get();
    if (value !== undefined && value !== false) return value;
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** Three candidates, all campaigning, one leading. */
/** Sends the leader `signal`; resolves when and how the next leader started. */
async function replaceLeader(events: Event[], leader: Candidate, signal: NodeJS.Signals) {
  const at = now();
  leader.child.kill(signal);
  const next = await until("a new leader", () =>
    events.find((e) => e.event === "start" && e.pid !== leader.pid && e.t > at),
  );
  return { at, next };
}

async function election(backend: BackendName, name: string) {
  const events: Event[] = [];
  const candidates = [0, 1, 2].map(() => candidate(backend, name, events));
  await until("three campaigns", () => events.filter((e) => e.event === "campaign").length === 3);
  const first = await until("a leader", () => events.find((e) => e.event === "start"));
  // Let the followers poll a few times and the leader renew at least once (every ttl/3).
  await new Promise((r) => setTimeout(r, TTL / 2 + 100));
  const leader = candidates.find((c) => c.pid === first.pid)!;
  return { events, candidates, leader };
}

/**
 * Each term is [start, end]: end is the stop line; for a SIGKILLed process, which logs none, the
 * last local deadline it logged (its signal would have aborted then); a term still running has no
 * end. Checks that no two terms overlap and that tokens increase.
 */
function checkNoOverlap(events: Event[], killed: number[] = []): void {
  const terms = events
    .filter((e) => e.event === "start")
    .map((start) => {
      const later = events.filter((e) => e.pid === start.pid && e.t >= start.t);
      const stop = later.find((e) => e.event === "stop");
      const deadlines = later.filter((e) => e.deadline !== undefined).map((e) => e.deadline!);
      const end = stop?.t ?? (killed.includes(start.pid) ? Math.max(...deadlines) : Infinity);
      return { pid: start.pid, token: start.token!, start: start.t, end };
    })
    .sort((a, b) => a.start - b.start);
  expect(terms.length).toBeGreaterThanOrEqual(2);
  for (let i = 1; i < terms.length; i++) {
    const [prev, next] = [terms[i - 1]!, terms[i]!];
    expect(next.token, "tokens increase from term to term").toBeGreaterThan(prev.token);
    expect(
      next.start,
      `the term of ${next.pid} starts before the term of ${prev.pid} ended`,
    ).toBeGreaterThanOrEqual(prev.end);
  }
}

describe.each(["upstash", "cloudflare"] as const)("failover across processes (%s)", (backend) => {
  it(`a SIGKILLed leader is replaced within ttl + retryDelay (${TTL} + ${RETRY_DELAY} ms), without overlap`, async () => {
    const name = `failover-kill-${crypto.randomUUID()}`;
    const { events, candidates, leader } = await election(backend, name);
    const { at: killedAt, next } = await replaceLeader(events, leader, "SIGKILL");
    const takeover = next.t - killedAt;
    const lastDeadline = Math.max(
      ...events.filter((e) => e.pid === leader.pid && e.deadline !== undefined).map((e) => e.deadline!),
    );
    console.log(
      `crash takeover: ${takeover.toFixed(1)} ms after SIGKILL (ttl ${TTL}, retryDelay ${RETRY_DELAY}); ` +
        `the killed leader's local deadline was ${(lastDeadline - killedAt).toFixed(1)} ms after the kill, ` +
        `the new term began ${(next.t - lastDeadline).toFixed(1)} ms after it`,
    );
    expect(events.some((e) => e.pid === leader.pid && e.event === "stop")).toBe(false);
    expect(takeover).toBeLessThanOrEqual(TTL + RETRY_DELAY);
    checkNoOverlap(events, [leader.pid]);
    expect(events.filter((e) => e.event === "error")).toEqual([]);
    for (const c of candidates) c.child.kill("SIGTERM");
    await Promise.all(candidates.filter((c) => c !== leader).map((c) => c.exited));
  });

  it(`a leader stopped with SIGTERM hands over within about one retryDelay (${RETRY_DELAY} + ${SLACK} ms), without overlap`, async () => {
    const name = `failover-term-${crypto.randomUUID()}`;
    const { events, candidates, leader } = await election(backend, name);
    const { at: stoppedAt, next } = await replaceLeader(events, leader, "SIGTERM");
    expect(await leader.exited).toBe(0);
    const stop = events.find((e) => e.pid === leader.pid && e.event === "stop")!;
    const handover = next.t - stoppedAt;
    console.log(
      `graceful handover: ${handover.toFixed(1)} ms after SIGTERM (retryDelay ${RETRY_DELAY}); ` +
        `the old task stopped ${(stop.t - stoppedAt).toFixed(1)} ms after SIGTERM, the new one started ${(next.t - stop.t).toFixed(1)} ms after that`,
    );
    expect(handover).toBeLessThanOrEqual(RETRY_DELAY + SLACK);
    checkNoOverlap(events);
    expect(events.filter((e) => e.event === "error")).toEqual([]);
    for (const c of candidates) c.child.kill("SIGTERM");
    expect(await Promise.all(candidates.map((c) => c.exited))).toEqual([0, 0, 0]);
  });
});
