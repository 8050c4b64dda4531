// Every example in examples/ is type-checked and run against the real servers of the global setup,
// so none of them can rot:
// - node/server.ts: run as its header says, `node server.ts` on Node 24 and `tsx server.ts` on
//   Node 20 (the package from dist/, as npm users get it), one instance each: they elect one
//   leader that runs the job, and the other takes over after a graceful stop;
// - bun/flock.ts: run by Bun twice at once; the two commands run one after the other;
// - deno/main.ts: `deno check`ed and run twice through its jsr: specifiers: the second skips the hour;
// - cloudflare/: bundled like wrangler does, run in workerd (Miniflare); two overlapping
//   invocations of one tick send one report, two of the next tick one after the other one more;
// - cloudflare/durable-object/: the Worker with the LeaseholdLock object, bound as its
//   wrangler.toml says: three concurrent rebuilds run one at a time in arrival order, and Node
//   takes the same lock through the Worker's /leasehold route.
// The TypeScript of node/, bun/ and cloudflare/ is checked by `npm run typecheck` (tsconfig.test.json).
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { Miniflare } from "miniflare";
import { afterAll, describe, expect, inject, it } from "vitest";
import { durableObject } from "../../src/backends/cloudflare/index.ts";
import { upstash as upstashBackend } from "../../src/backends/upstash/index.ts";
import { createMutex } from "../../src/index.ts";
import { registerSecret } from "../harness/secrets.ts";
import { killAll } from "../harness/servers/children.ts";
import { listenLoopback } from "../harness/servers/listen.ts";
import { NODE24 } from "../harness/servers/runtimes.ts";
import { COMPATIBILITY_DATE, scheduled } from "../harness/smoke/run-workerd.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const upstash = inject("upstash");
const run = Math.random().toString(36).slice(2, 8);
const BUN = `${root}node_modules/.bin/bun`;
const DENO = `${root}node_modules/.bin/deno`;
const serverEnv = {
  UPSTASH_REDIS_REST_URL: upstash.url,
  UPSTASH_REDIS_REST_TOKEN: upstash.token,
  NO_COLOR: "1",
  DENO_NO_UPDATE_CHECK: "1",
  DENO_NO_PROMPT: "1",
};

const children = new Set<ChildProcess>();
afterAll(() => killAll(children));

/** A running child whose output is collected; `exited` resolves with its code. */
function start(command: string, args: string[], env: Record<string, string> = {}) {
  const child = spawn(command, args, { cwd: root, env: { ...process.env, ...serverEnv, ...env } });
  children.add(child);
  let output = "";
  const waiters: { re: RegExp; resolve: (m: RegExpMatchArray) => void }[] = [];
  const onData = (d: Buffer) => {
    output += d;
    for (const w of [...waiters]) {
      const m = output.match(w.re);
      if (m) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(m);
      }
    }
  };
  child.stdout!.on("data", onData);
  child.stderr!.on("data", onData);
  const exited = new Promise<number | null>((resolve) =>
    child.on("close", (code) => {
      children.delete(child);
      resolve(code);
    }),
  );
  return {
    child,
    exited,
    output: () => output,
    /** Resolves when the output matches `re`; rejects after `ms`. */
    waitFor(re: RegExp, ms = 15_000): Promise<RegExpMatchArray> {
      const m = output.match(re);
      if (m) return Promise.resolve(m);
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`no ${re} within ${ms} ms in:\n${output}`)), ms);
        waiters.push({
          re,
          resolve: (x) => {
            clearTimeout(t);
            resolve(x);
          },
        });
      });
    },
  };
}

/** Bundles a Worker the way wrangler would, with the package from dist/. */
async function bundle(entry: string): Promise<string> {
  const out = await build({
    entryPoints: [`${root}${entry}`],
    bundle: true,
    write: false,
    format: "esm",
    target: "es2022",
    platform: "neutral",
    conditions: ["workerd", "worker", "browser"],
    logOverride: { "ignored-bare-import": "silent" },
    logLevel: "error",
  });
  return out.outputFiles[0]!.text;
}

async function getJson(url: string): Promise<{ instance: string; leader: boolean; runs: number }> {
  return (await fetch(url)).json() as Promise<{ instance: string; leader: boolean; runs: number }>;
}

async function until<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> {
  const end = performance.now() + ms;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.concurrent("examples", { timeout: 60_000 }, () => {
  it("node/server.ts: two instances, one runs the job; the other takes over after a graceful stop", async () => {
    // The two commands of its header: Node 24 strips the types, Node 20 runs it through tsx.
    const commands: [string, string[]][] = [
      [`${root}${NODE24}`, ["examples/node/server.ts"]],
      [`${root}node_modules/.bin/tsx`, ["examples/node/server.ts"]],
    ];
    const header = readFileSync(`${root}examples/node/server.ts`, "utf8");
    expect(header).toContain("PORT=3000 node server.ts");
    expect(header).toContain("PORT=3000 npx tsx server.ts");
    const instances = commands.map(([command, args], i) =>
      start(command, args, { INSTANCE: `${"ab"[i]}-${run}`, PORT: "0", JOB_EVERY_MS: "100" }),
    );
    const urls = await Promise.all(
      // tsx compiles at start: a few seconds on a loaded 2-core machine, hence the wide bound.
      instances.map(async (p) => (await p.waitFor(/listening on (http:\/\/\S+)/, 30_000))[1]!),
    );
    // Exactly one leader, whose job runs; the follower's never does.
    const leaderIndex = await until("a leader that ran its job twice", 10_000, async () => {
      const states = await Promise.all(urls.map(getJson));
      const leaders = states.filter((s) => s.leader);
      return leaders.length === 1 && leaders[0]!.runs >= 2 ? states.indexOf(leaders[0]!) : undefined;
    });
    const followerIndex = 1 - leaderIndex;
    expect((await getJson(urls[followerIndex]!)).runs).toBe(0);
    // Graceful stop of the leader: it releases, and the follower leads within about one retry.
    const leader = instances[leaderIndex]!;
    leader.child.kill("SIGTERM");
    expect(await leader.exited, leader.output()).toBe(0);
    await until("the follower to take over and run the job", 5_000, async () => {
      const s = await getJson(urls[followerIndex]!);
      return s.leader && s.runs >= 1 ? s : undefined;
    });
    const follower = instances[followerIndex]!;
    follower.child.kill("SIGTERM");
    // It exits by itself once the lead loop ended: no timer or socket keeps it alive.
    expect(await follower.exited, follower.output()).toBe(0);
  });

  it("bun/flock.ts: two at once run their commands one after the other", async () => {
    const lock = `example-flock-${run}`;
    const script = 'echo "start $LEASEHOLD_TOKEN"; sleep 0.4; echo "end $LEASEHOLD_TOKEN"';
    const t0 = performance.now();
    const runs = [0, 1].map(() => start(BUN, ["examples/bun/flock.ts", lock, "sh", "-c", script]));
    const codes = await Promise.all(runs.map((r) => r.exited));
    const elapsed = performance.now() - t0;
    expect(codes, runs.map((r) => r.output()).join("\n")).toEqual([0, 0]);
    const tokens = runs.map((r) => Number(r.output().match(/^start (\d+)$/m)?.[1]));
    expect(new Set(tokens).size, "two leases, two fencing tokens").toBe(2);
    expect(elapsed, "the second command waited for the first").toBeGreaterThanOrEqual(800);
    // The usage error path.
    const bad = start(BUN, ["examples/bun/flock.ts"]);
    expect(await bad.exited).toBe(64);
  });

  it("deno/main.ts: deno check, then run through the jsr: specifiers", async () => {
    const config = "--config=examples/deno/deno.json";
    const check = start(DENO, ["check", "--no-lock", config, "examples/deno/main.ts"]);
    expect(await check.exited, check.output()).toBe(0);
    const env =
      "--allow-env=UPSTASH_REDIS_REST_URL,UPSTASH_REDIS_REST_TOKEN,KV_REST_API_URL,KV_REST_API_TOKEN";
    const run = ["run", "--no-lock", config, "--allow-net=127.0.0.1", env, "examples/deno/main.ts"];
    const main = start(DENO, run);
    expect(await main.exited, main.output()).toBe(0);
    expect(main.output()).toMatch(/synced with fencing token \d+/);
    // A second host later in the hour skips it, naming the first.
    const again = start(DENO, run);
    expect(await again.exited, again.output()).toBe(0);
    expect(again.output()).toMatch(/skipped: .* ran this hour \(token \d+\)/);
  });

  it("cloudflare/: bundled like wrangler, two overlapping and two skewed invocations of a tick send one report each", async () => {
    const toml = readFileSync(`${root}examples/cloudflare/wrangler.toml`, "utf8");
    const main = toml.match(/^main\s*=\s*"([^"]+)"/m)?.[1];
    const cron = toml.match(/^crons\s*=\s*\["([^"]+)"/m)?.[1];
    const date = toml.match(/^compatibility_date\s*=\s*"([^"]+)"/m)?.[1];
    expect(main).toBe("src/worker.ts");
    expect(cron).toBeTruthy();
    expect(date! >= "2024-01-01", "a recent compatibility_date").toBe(true);

    // The report receiver: counts the POSTs and answers slowly, so the triggers overlap.
    const reports: { token: string | undefined }[] = [];
    const receiver = createServer((req, res) => {
      reports.push({ token: req.headers["x-fencing-token"] as string | undefined });
      req.resume();
      setTimeout(() => res.end("ok"), 500);
    });
    const reportUrl = `${await listenLoopback(receiver)}/reports`;
    const mf = new Miniflare({
      modules: true,
      script: await bundle(`examples/cloudflare/${main}`),
      compatibilityDate: date ?? COMPATIBILITY_DATE,
      bindings: {
        UPSTASH_REDIS_REST_URL: upstash.url,
        UPSTASH_REDIS_REST_TOKEN: upstash.token,
        REPORT_URL: reportUrl,
      },
    });
    try {
      // The lock name is fixed in the example: start from a free lock.
      const mutex = createMutex(upstashBackend({ url: upstash.url, token: upstash.token }), {
        name: "daily-report",
      });
      await until("the daily-report lock to be free", 35_000, async () =>
        (await mutex.holder()) === null ? true : undefined,
      );
      // Miniflare resolves a scheduled event after its ctx.waitUntil promises settled. Two
      // invocations of one tick at once: one report.
      const tick = new Date(Date.UTC(2026, 10, 24) + Math.floor(Math.random() * 1e6) * 300_000);
      const results = await Promise.all([scheduled(mf, cron!, tick), scheduled(mf, cron!, tick)]);
      expect(results.map((r) => r.outcome)).toEqual(["ok", "ok"]);
      expect(reports).toHaveLength(1);
      expect(Number(reports[0]!.token)).toBeGreaterThan(0);
      // Two invocations of the next tick, the second after the first finished (a plain lock,
      // free again by then, would send it twice): one report, with a greater token.
      const next = new Date(tick.getTime() + 300_000);
      expect((await scheduled(mf, cron!, next)).outcome).toBe("ok");
      expect((await scheduled(mf, cron!, next)).outcome).toBe("ok");
      expect(reports).toHaveLength(2);
      expect(Number(reports[1]!.token)).toBeGreaterThan(Number(reports[0]!.token));
      // Both runs ended their leases: the lock name is free.
      expect(await mutex.holder()).toBeNull();
    } finally {
      await mf.dispose();
      receiver.close();
    }
  });

  it("cloudflare/durable-object/: rebuilds run one at a time in arrival order; Node takes the same lock through the route", async () => {
    const dir = "examples/cloudflare/durable-object";
    const toml = readFileSync(`${root}${dir}/wrangler.toml`, "utf8");
    const main = toml.match(/^main\s*=\s*"([^"]+)"/m)?.[1];
    const date = toml.match(/^compatibility_date\s*=\s*"([^"]+)"/m)?.[1];
    const binding = toml.match(
      /\[\[durable_objects\.bindings\]\]\s*name\s*=\s*"([^"]+)"\s*class_name\s*=\s*"([^"]+)"/,
    );
    expect(main).toBe("src/worker.ts");
    expect(binding?.slice(1)).toEqual(["LOCKS", "LeaseholdLock"]);
    expect(toml).toMatch(
      /\[\[migrations\]\]\s*tag\s*=\s*"v1"\s*new_sqlite_classes\s*=\s*\["LeaseholdLock"\]/,
    );

    // The rebuild hook: records each rebuild's interval and token, and answers after 300 ms.
    const rebuilds: { token: number; start: number; end?: number }[] = [];
    const hook = createServer((req, res) => {
      const r = {
        token: Number(req.headers["x-fencing-token"]),
        start: performance.now(),
      } as (typeof rebuilds)[0];
      rebuilds.push(r);
      req.resume();
      setTimeout(() => {
        r.end = performance.now();
        res.end("built");
      }, 300);
    });
    const hookUrl = `${await listenLoopback(hook)}/rebuild`;
    const token = `example-${crypto.randomUUID()}`;
    registerSecret(token);
    const mf = new Miniflare({
      modules: true,
      script: await bundle(`${dir}/${main}`),
      compatibilityDate: date ?? COMPATIBILITY_DATE,
      durableObjects: { [binding![1]!]: binding![2]! },
      bindings: { LEASEHOLD_DO_SECRET: token, REBUILD_HOOK: hookUrl, GEOCODER_URL: hookUrl },
      host: "127.0.0.1",
      port: 0,
    });
    try {
      const origin = (await mf.ready).origin;
      const node = createMutex(durableObject({ url: `${origin}/leasehold`, token }), {
        name: "site-rebuild",
        ttl: 5_000,
      });
      // Node holds the lock first: the three rebuilds queue behind it, in the order they arrive.
      const held = await node.acquire({ timeout: 10_000 });
      const answers: Promise<{ token: number; result: string }>[] = [];
      for (let i = 0; i < 3; i++) {
        answers.push(
          mf.dispatchFetch(`${origin}/rebuild`, { method: "POST" }).then((r) => r.json() as never),
        );
        await until(`rebuild ${i + 1} in line`, 10_000, async () =>
          ((await durableObject({ url: `${origin}/leasehold`, token }).inspect({ key: "site-rebuild" }))
            ?.waiters ?? 0) > i
            ? true
            : undefined,
        );
      }
      expect(rebuilds).toEqual([]);
      await held.release();
      const results = await Promise.all(answers);
      expect(results.map((r) => r.result)).toEqual(["built", "built", "built"]);
      const tokens = results.map((r) => r.token);
      expect(tokens).toEqual([...tokens].sort((a, b) => a - b));
      expect(tokens[0]).toBeGreaterThan(held.token);
      expect(rebuilds.map((r) => r.token)).toEqual(tokens);
      for (let i = 1; i < rebuilds.length; i++)
        expect(rebuilds[i]!.start).toBeGreaterThanOrEqual(rebuilds[i - 1]!.end!);
      expect(await node.holder()).toBeNull();
    } finally {
      await mf.dispose();
      hook.close();
    }
  });

  it("cloudflare/durable-object/: POST /geocode calls the rate-limited API at most 3 at once (a semaphore in the objects)", async () => {
    const dir = "examples/cloudflare/durable-object";
    const toml = readFileSync(`${root}${dir}/wrangler.toml`, "utf8");
    expect(toml).toMatch(/^GEOCODER_URL = "/m);
    // The rate-limited API: counts the calls in flight, answers after 200 ms, 429 above 3.
    let inFlight = 0;
    let most = 0;
    let calls = 0;
    const api = createServer((req, res) => {
      calls++;
      most = Math.max(most, ++inFlight);
      req.resume();
      setTimeout(() => {
        inFlight--;
        res.statusCode = inFlight >= 3 ? 429 : 200;
        res.end("geocoded");
      }, 200);
    });
    const apiUrl = `${await listenLoopback(api)}/geocode`;
    const token = `example-${crypto.randomUUID()}`;
    registerSecret(token);
    const mf = new Miniflare({
      modules: true,
      script: await bundle(`${dir}/src/worker.ts`),
      compatibilityDate: toml.match(/^compatibility_date\s*=\s*"([^"]+)"/m)?.[1] ?? COMPATIBILITY_DATE,
      durableObjects: { LOCKS: "LeaseholdLock" },
      bindings: { LEASEHOLD_DO_SECRET: token, REBUILD_HOOK: apiUrl, GEOCODER_URL: apiUrl },
      host: "127.0.0.1",
      port: 0,
    });
    try {
      const origin = (await mf.ready).origin;
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          mf.dispatchFetch(`${origin}/geocode`, { method: "POST", body: `address ${i}` }).then(async (r) => ({
            status: r.status,
            body: (await r.json()) as { slot: number; result: string },
          })),
        ),
      );
      expect(answers.map((a) => a.status)).toEqual(Array(8).fill(200));
      expect(new Set(answers.map((a) => a.body.slot))).toEqual(new Set([0, 1, 2]));
      expect(calls).toBe(8);
      expect(most).toBe(3);
    } finally {
      await mf.dispose();
      api.close();
    }
  });
});
