// Leader election across real OS processes: three candidates (test/harness/fixtures/campaign.ts)
// campaign through the shared Upstash bridge, and again through the Durable Object's route. The leader is SIGKILLed, or stopped with SIGTERM; a
// follower must take over within about ttl + retryDelay (crash), or long before the lease could have
// expired (graceful: the stopped leader released it), and at no instant may two processes run the
// task with unaborted signals. The bounds leave a loaded 2-core machine room (processes that start
// late, requests answered late); bench/failover.ts measures the hand-over times themselves.
import { type ChildProcess, spawn } from "node:child_process";
import { afterEach, describe, expect, inject, it } from "vitest";
import { machineMs } from "../harness/clock.ts";
import { nodeScript } from "../harness/node-script.ts";
import { killAll } from "../harness/servers/children.ts";

/** The backends, by the name the fixture reads from LEASEHOLD_BACKEND. */
const backends = { upstash: inject("upstash"), cloudflare: inject("cloudflare") };
type BackendName = keyof typeof backends;
const root = new URL("../../", import.meta.url);
const TTL = 3_000;
const RETRY_DELAY = 200;
/**
 * Slack for the crash takeover on a loaded machine: the follower's request that finds the lock
 * free, and the processes being scheduled late. Well below a ttl, so a takeover that waited for
 * another expiry still fails.
 */
const SLACK = TTL / 2;

interface Event {
  pid: number;
  event: "campaign" | "start" | "deadline" | "stop" | "sigterm" | "error" | "exit";
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

function candidate(backend: BackendName, name: string, events: Event[]): Candidate {
  const ctx = backends[backend];
  const [node, ...args] = nodeScript("test/harness/fixtures/campaign.ts");
  const child = spawn(node, args, {
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

/** How each candidate ended: its exit status, its events (times from the first) and its stderr. */
function exits(candidates: Candidate[], codes: (number | null)[], events: Event[]): string {
  const t0 = events[0]?.t ?? 0;
  return candidates
    .map((c, i) => {
      const own = events
        .filter((e) => e.pid === c.pid && e.event !== "deadline")
        .map((e) => `${e.event}@${(e.t - t0).toFixed(0)}${e.message ? ` (${e.message})` : ""}`);
      return `candidate ${i} (pid ${c.pid}) exited ${codes[i]}: ${own.join(", ")}; stderr: ${c.stderr.join("").slice(-500)}`;
    })
    .join("\n");
}

/** Sends the leader `signal`; resolves when and how the next leader started. */
async function replaceLeader(events: Event[], leader: Candidate, signal: NodeJS.Signals) {
  const at = machineMs();
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
 * No candidate reported an error, except a request answered later than its bound ("no answer
 * within N ms"), which a loaded machine can cause and lead() retries.
 */
function expectOnlyLateAnswers(events: Event[]): void {
  const errors = events.filter((e) => e.event === "error" && !/got no answer within \d+ ms/.test(e.message!));
  expect(errors).toEqual([]);
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
  it(`a SIGKILLed leader is replaced within ttl + retryDelay (${TTL} + ${RETRY_DELAY} ms, + ${SLACK} ms of slack), without overlap`, async () => {
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
    expect(takeover).toBeLessThanOrEqual(TTL + RETRY_DELAY + SLACK);
    checkNoOverlap(events, [leader.pid]);
    expectOnlyLateAnswers(events);
    for (const c of candidates) c.child.kill("SIGTERM");
    await Promise.all(candidates.filter((c) => c !== leader).map((c) => c.exited));
  });

  it(`a leader stopped with SIGTERM hands over long before its lease could expire (under ttl/2 = ${TTL / 2} ms after it stopped), without overlap`, async () => {
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
    // The leader renews every ttl/3, so a lease it did not release would still be held on the
    // backend for about 2/3 of a ttl after it stopped: a hand-over under ttl/2 after the stop
    // shows the release, with room for a loaded machine (it takes about one retryDelay).
    expect(next.t - stop.t).toBeLessThan(TTL / 2);
    checkNoOverlap(events);
    expectOnlyLateAnswers(events);
    for (const c of candidates) c.child.kill("SIGTERM");
    const codes = await Promise.all(candidates.map((c) => c.exited));
    expect(codes, exits(candidates, codes, events)).toEqual([0, 0, 0]);
  });
});
