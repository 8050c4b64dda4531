// leasehold/node-cron against the real node-cron package, across OS processes (docs/DESIGN.md §17):
// four processes (test/harness/fixtures/node-cron.ts) schedule the same node-cron task every second
// with `distributed: true` and onceCoordinator on a real store (redis-server through ioredis, and
// the Upstash bridge). Every fire runs exactly once across them and the others are skipped; a fire
// whose job threw is not recorded as done (a later runOnce runs it), a completed one is (a later
// runOnce answers done, with the runner and its token). Margins for a loaded 2-core machine: the
// processes start when they start, and only the fires that all of them could see are counted.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import IORedis from "ioredis";
import { afterAll, afterEach, describe, expect, inject, it } from "vitest";
import type { Backend } from "../../src/backend.ts";
import { redis } from "../../src/backends/redis/index.ts";
import { upstash } from "../../src/backends/upstash/index.ts";
import { createMutex, runOnce } from "../../src/index.ts";
import { nodeScript } from "../harness/node-script.ts";
import { registerSecret } from "../harness/secrets.ts";
import { killAll } from "../harness/servers/children.ts";

const redisCtx = inject("redis");
const upstashCtx = inject("upstash");
registerSecret(redisCtx.password);

const root = new URL("../../", import.meta.url);
const PROCESSES = 4;
/** How long the processes fire once all of them are scheduled. */
const FIRING = 9_000;
/** A fire this close to the kill is not counted: its runner may not have finished (a 100 ms job). */
const SETTLE = 3_000;

const children: ChildProcess[] = [];
afterEach(() => killAll(children.splice(0)));
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
const closers: (() => Promise<unknown>)[] = [];
afterAll(() => Promise.all(closers.map((close) => close())));

interface Line {
  pid: number;
  event: string;
  fire?: string;
  reason?: string;
  level?: string;
  message?: string;
}
interface Run {
  pid: number;
  owner: string;
  fire: string;
  event: "ran" | "failed";
  token: number;
}

const stores: [string, { env: NodeJS.ProcessEnv; backend: () => Backend }][] = [
  [
    "redis (ioredis)",
    {
      env: { LEASEHOLD_BACKEND: "redis", LEASEHOLD_URL: redisCtx.url },
      backend: () => {
        const client = new IORedis(redisCtx.url);
        closers.push(() => client.quit());
        return redis(client);
      },
    },
  ],
  [
    "upstash",
    {
      env: {
        LEASEHOLD_BACKEND: "upstash",
        LEASEHOLD_URL: upstashCtx.url,
        LEASEHOLD_TOKEN_SECRET: upstashCtx.token,
      },
      backend: () => upstash({ url: upstashCtx.url, token: upstashCtx.token }),
    },
  ],
];

function instance(env: NodeJS.ProcessEnv, lines: Line[], stderr: string[]): void {
  const [node, ...args] = nodeScript("test/harness/fixtures/node-cron.ts");
  const child = spawn(node, args, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let buffer = "";
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    buffer += chunk;
    const parts = buffer.split("\n");
    buffer = parts.pop()!;
    for (const line of parts) if (line.trim()) lines.push(JSON.parse(line));
  });
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => stderr.push(chunk));
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(stores)("%s", (_label, store) => {
  it("four processes scheduling one node-cron task run each fire once; a failed fire is not recorded", {
    timeout: 90_000,
  }, async () => {
    const id = crypto.randomUUID().slice(0, 8);
    const dir = mkdtempSync(join(tmpdir(), "leasehold-node-cron-"));
    dirs.push(dir);
    const records = join(dir, "records.jsonl");
    const lockName = `cron-${id}`;
    const taskName = `every-second-${id}`;
    const lines: Line[] = [];
    const stderr: string[] = [];
    for (let i = 0; i < PROCESSES; i++) {
      instance(
        { ...store.env, LOCK_NAME: lockName, TASK_NAME: taskName, OWNER: `p${i}`, RECORDS: records },
        lines,
        stderr,
      );
    }
    const readyBy = performance.now() + 45_000;
    while (lines.filter((l) => l.event === "ready").length < PROCESSES) {
      if (performance.now() > readyBy)
        throw new Error(`the processes did not start within 45 s: ${stderr.join("")}`);
      await sleep(50);
    }
    // The first fire every process scheduled before it came, and the last that had time to end.
    const from = Math.ceil(Date.now() / 1000) * 1000 + 1000;
    await sleep(FIRING);
    const until = Date.now() - SETTLE;
    await killAll(children.splice(0));

    const all: Run[] = readFileSync(records, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line));
    const fires: string[] = [];
    for (let t = from; t <= until; t += 1000) fires.push(new Date(t).toISOString());
    expect(fires.length).toBeGreaterThanOrEqual(5);

    let lastToken = 0;
    const done: Run[] = [];
    const failed: string[] = [];
    for (const fire of fires) {
      const runs = all.filter((r) => r.fire === fire);
      const skipped = lines.filter((l) => l.event === "skipped" && l.fire === fire);
      const failing = new Date(fire).getTime() % 3000 === 0;
      // Exactly one run of a fire that succeeded; a fire whose job threw is not recorded, so a
      // process that fired it after the failure (late by more than the 100 ms job) may run it again.
      if (failing) {
        expect(runs.length, `runs of ${fire}`).toBeGreaterThanOrEqual(1);
        expect(runs.every((r) => r.event === "failed")).toBe(true);
        failed.push(fire);
      } else {
        expect(runs, `runs of ${fire}`).toHaveLength(1);
        expect(runs[0]!.event).toBe("ran");
        done.push(runs[0]!);
      }
      // The others were told not to run it (a completed fire: at least one other process), each
      // process once per fire.
      const who = [...runs, ...skipped].map((e) => e.pid);
      expect(new Set(who).size, `processes seen on ${fire}`).toBe(who.length);
      expect(who.length, `processes seen on ${fire}`).toBeGreaterThanOrEqual(2);
      if (!failing) expect(skipped.length, `skips of ${fire}`).toBeGreaterThanOrEqual(1);
      expect(skipped.every((l) => l.reason === "not-elected")).toBe(true);
      // Tokens grow fire after fire (one counter per mutex name).
      expect(runs[0]!.token).toBeGreaterThan(lastToken);
      lastToken = Math.max(...runs.map((r) => r.token));
    }
    expect(failed.length).toBeGreaterThanOrEqual(1);
    expect(done.length).toBeGreaterThanOrEqual(2);
    // node-cron logged no error but the jobs' own failures (no coordinator or onComplete error; a
    // warning of a fire missed by a late timer is the machine's load, not the coordinator's).
    const logged = lines.filter(
      (l) => l.event === "log" && l.level === "error" && !/job failed on purpose/.test(l.message ?? ""),
    );
    expect(logged).toEqual([]);

    // The records, as another instance sees them later: a completed fire is done (by its runner,
    // with its token); a failed one was not recorded and runs.
    const late = createMutex(store.backend(), { name: lockName, owner: "late" });
    for (const run of done) {
      expect(await runOnce(late, `${taskName}:${run.fire}`, () => "again")).toEqual({
        ran: false,
        reason: "done",
        by: { owner: run.owner, token: run.token },
      });
    }
    for (const fire of failed) {
      expect(await runOnce(late, `${taskName}:${fire}`, () => "again")).toMatchObject({
        ran: true,
        value: "again",
      });
    }
  });
});
