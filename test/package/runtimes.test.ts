// The smoke suite (test/harness/smoke/suite.ts) on every runtime leasehold supports, each one against the
// real servers of the global setup (redis-server behind the Upstash bridge, Azurite, the
// LeaseholdLock Durable Object in workerd through its lockHandler route, and dynalite):
// - Node 20 (the Node running vitest): built dist/ by package name, suite lowered by esbuild;
// - Node 24 (test/harness/runtimes, installed by the test setup): built dist/, native `await using`;
// - Bun (npm `bun`): built dist/ by package name, native TypeScript and `await using`;
// - Deno (npm `deno`): the .ts sources through `jsr:@leasehold/leasehold` specifiers, --check;
// - workerd (npm `miniflare`): a bundled scheduled Worker; two overlapping cron triggers run the
//   job once and leave no timer pending.
// And the backend conformance suite (waiting checks included) through the Durable Object's
// route on Node 24, Bun and Deno (test/harness/smoke/conformance.ts).
// Every child gets the servers' coordinates in environment variables and must print a
// SMOKE_REPORT line with every check passed and then exit by itself.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, inject, it } from "vitest";
import { BACKENDS } from "../../scripts/backends.mjs";
import { memory } from "../../src/backends/memory/index.ts";
import { conformanceChecks } from "../../src/testing/index.ts";
import { NODE24 } from "../harness/servers/runtimes.ts";
import { OPTIONS } from "../harness/smoke/conformance.ts";
import { restCommand, SMOKE_CHECKS } from "../harness/smoke/suite.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const upstash = inject("upstash");
const azurite = inject("azurite");
const cloudflare = inject("cloudflare");
const ddb = inject("dynamodb");
const run = Math.random().toString(36).slice(2, 8);

const BUN = "node_modules/.bin/bun";
const DENO = "node_modules/.bin/deno";

/** The coordinates every runner reads (test/harness/smoke/suite.ts: smokeEnv). */
function smokeVars(runtime: string): Record<string, string> {
  return {
    SMOKE_RUNTIME: runtime,
    SMOKE_ID: `${runtime}-${run}`,
    SMOKE_AZURE_CONTAINER: "leasehold-smoke",
    UPSTASH_REDIS_REST_URL: upstash.url,
    UPSTASH_REDIS_REST_TOKEN: upstash.token,
    AZURE_STORAGE_CONNECTION_STRING: azurite.connectionString,
    LEASEHOLD_DO_URL: cloudflare.url,
    LEASEHOLD_DO_TOKEN: cloudflare.token,
    SMOKE_DYNAMODB_ENDPOINT: ddb.endpoint,
    SMOKE_DYNAMODB_TABLE: "leasehold-smoke",
    AWS_REGION: ddb.region,
    AWS_ACCESS_KEY_ID: ddb.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: ddb.credentials.secretAccessKey,
  };
}

/** Deno's arguments for a runner: type-checked, the JSR map, loopback only, the smoke variables. */
const denoRun = (script: string): string[] => [
  "run",
  "--check",
  "--no-lock",
  "--config=test/harness/smoke/deno.json",
  "--allow-net=127.0.0.1",
  `--allow-env=${Object.keys(smokeVars("deno")).join(",")}`,
  script,
];

interface Report {
  runtime: string;
  passed: string[];
  ms: number;
  [key: string]: unknown;
}

/** Spawns a runner; resolves its report, or rejects with its output when it fails or hangs. */
function runSmoke(
  runtime: string,
  command: string,
  args: string[],
  timeout = 60_000,
  marker = "SMOKE_REPORT",
  extraEnv: Record<string, string> = {},
): Promise<Report> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: root,
      env: {
        ...process.env,
        ...smokeVars(runtime),
        ...extraEnv,
        NO_COLOR: "1",
        DENO_NO_UPDATE_CHECK: "1",
        DENO_NO_PROMPT: "1",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
    });
    child.stderr.on("data", (d) => {
      out += d;
    });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(
        new Error(
          `${runtime}: no exit after ${timeout} ms (a hung check, or a timer or socket keeping the runtime alive):\n${out}`,
        ),
      );
    }, timeout);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(new Error(`${runtime}: cannot start ${command}: ${error.message}`));
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const line = out.split("\n").find((l) => l.startsWith(`${marker} `));
      if (code !== 0 || !line) {
        reject(new Error(`${runtime}: exited with ${code ?? signal}:\n${out}`));
      } else {
        resolve(JSON.parse(line.slice(marker.length + 1)) as Report);
      }
    });
  });
}

function expectComplete(report: Report, runtime: string): void {
  expect(report.runtime).toBe(runtime);
  expect([...report.passed].sort()).toEqual([...SMOKE_CHECKS].sort());
}

describe.concurrent("the smoke suite on every runtime", { timeout: 90_000 }, () => {
  it(`Node ${process.versions.node} (vitest's own, meant to be 20): built dist/, await using lowered`, async () => {
    const major = Number(process.versions.node.split(".")[0]);
    // The oldest supported Node is the point of this runner; on a newer one it still runs, and
    // the name of this test says which Node it was.
    expect(major, "engines: node >= 20").toBeGreaterThanOrEqual(20);
    const report = await runSmoke("node20", process.execPath, ["test/harness/smoke/run-node.mjs"]);
    expectComplete(report, "node20");
    expect(report.node).toBe(process.versions.node);
    if (major === 20) expect(report.nativeAwaitUsing, "Node 20 has no `await using` of its own").toBe(false);
  });

  it("Node 24 (test/harness/runtimes): built dist/, native await using", async () => {
    if (!existsSync(`${root}${NODE24}`)) {
      throw new Error(
        `Node 24 is missing at ${NODE24}: test/harness/setup/runtimes.ts installs it (\`npm ci --prefix test/harness/runtimes\`)`,
      );
    }
    const report = await runSmoke("node24", NODE24, ["test/harness/smoke/run-node24.mjs"]);
    expectComplete(report, "node24");
    expect(String(report.node)).toMatch(/^24\./);
    expect(report.nativeAwaitUsing).toBe(true);
  });

  it("Bun: built dist/ by package name, native TypeScript and await using", async () => {
    const report = await runSmoke("bun", BUN, ["run", "test/harness/smoke/run-bun.ts"]);
    expectComplete(report, "bun");
    expect(String(report.bun)).toMatch(/^1\./);
  });

  it("Deno: the .ts sources through jsr:@leasehold/leasehold, type-checked, net 127.0.0.1 only", async () => {
    const report = await runSmoke("deno", DENO, denoRun("test/harness/smoke/run-deno.ts"));
    expectComplete(report, "deno");
    expect(String(report.deno)).toMatch(/^2\./);
  });

  it("workerd (Miniflare): the suite, and two overlapping cron triggers run the job once", async () => {
    const { scheduled, startWorker } = await import("../harness/smoke/run-workerd.ts");
    const jobMs = 1_500;
    const mf = await startWorker({ ...smokeVars("workerd"), SMOKE_JOB_MS: String(jobMs) });
    let disposed = false;
    try {
      // 1. The shared suite inside workerd.
      const res = await mf.dispatchFetch("http://smoke.local/smoke");
      const body = await res.text();
      expect(res.status, body).toBe(200);
      const report = JSON.parse(body) as Report;
      expectComplete(report, "workerd");

      // 2. Two scheduled events at once. Each one tries the lock once; only the holder runs the
      // job, which holds the lease for jobMs, so the second trigger finds it taken.
      const fire = async () => {
        const t0 = performance.now();
        const result = await scheduled(mf, "*/5 * * * *");
        return { ...result, ms: performance.now() - t0 };
      };
      const triggers = await Promise.all([fire(), fire()]);
      expect(triggers.map((t) => t.outcome)).toEqual(["ok", "ok"]);
      const log = (await redis(["LRANGE", `smoke:workerd-${run}:cron-log`, 0, -1])) as string[];
      expect(
        log.filter((l) => l.startsWith("ran ")),
        JSON.stringify(log),
      ).toHaveLength(1);
      expect(
        log.filter((l) => l.startsWith("skipped ")),
        JSON.stringify(log),
      ).toHaveLength(1);
      // The skipper returned at once, while the job was still running: the triggers overlapped.
      const [quick, slow] = triggers.map((t) => t.ms).sort((a, b) => a - b) as [number, number];
      expect(slow).toBeGreaterThanOrEqual(jobMs - 50);
      expect(quick).toBeLessThan(jobMs);

      // 3. After both handlers returned, no timer is pending in the isolate: `await using` released
      // the lease and with it its timer (the next renewal or the deadline; ttl 10 s: still due).
      const timers = await (await mf.dispatchFetch("http://smoke.local/timers")).json();
      expect(timers).toEqual({ pending: 0 });
      // Negative control: the same count sees a lease that was not released (its one timer).
      expect(await (await mf.dispatchFetch("http://smoke.local/leak")).json()).toEqual({ token: 1 });
      const leaked = (await (await mf.dispatchFetch("http://smoke.local/timers")).json()) as {
        pending: number;
      };
      expect(leaked.pending).toBeGreaterThanOrEqual(1);
      await mf.dispose();
      disposed = true;
    } finally {
      if (!disposed) await mf.dispose();
    }
  });
});

// The conformance suite (with its waiting checks) through the Durable Object's lockHandler route
// on the other runtimes; Node 20 runs it in test/backends/cloudflare/conformance.test.ts, and the
// binding mode runs inside workerd there too. One runtime at a time: together they would load
// the shared workerd three times over.
// The table of backends (scripts/backends.mjs) says where each runs; the smoke suite checks on
// every runtime exactly the backends said to run on all of them.
it("the smoke suite covers every backend the table says runs on every runtime, and no other", () => {
  const everywhere = BACKENDS.filter((row) =>
    (["node", "bun", "deno", "workerd"] as const).every((r) => row.runtimes.includes(r)),
  );
  const smoked = new Set(SMOKE_CHECKS.map((check) => check.slice(0, check.indexOf(":"))));
  expect([...smoked].sort()).toEqual(everywhere.map((row) => row.name).sort());
});

describe("the conformance suite through durableObject({ url, token })", {
  timeout: 120_000,
}, () => {
  const names = conformanceChecks({ ...OPTIONS, backend: () => memory() }).map((c) => c.name);
  const conformance = (runtime: string, command: string, args: string[]) =>
    runSmoke(runtime, command, args, 110_000, "CONFORMANCE_REPORT");

  it("Node 24: built dist/ by package name", async () => {
    const report = await conformance("node24", NODE24, ["test/harness/smoke/run-conformance-node24.mjs"]);
    expect(report.passed).toEqual(names);
  });

  it("Bun: built dist/ by package name", async () => {
    const report = await conformance("bun", BUN, ["run", "test/harness/smoke/run-conformance-bun.ts"]);
    expect(report.passed).toEqual(names);
  });

  it("Deno: the .ts sources through jsr:@leasehold/leasehold, type-checked", async () => {
    const report = await conformance("deno", DENO, denoRun("test/harness/smoke/run-conformance-deno.ts"));
    expect(report.passed).toEqual(names);
  });
});

describe("workerd before compatibility date 2024-11-11", () => {
  it("fetch refuses the cache field there: the suite passes with the requests sent without it", async () => {
    const { OLD_COMPATIBILITY_DATE, startWorker } = await import("../harness/smoke/run-workerd.ts");
    const mf = await startWorker({ ...smokeVars("workerd-old"), SMOKE_JOB_MS: "0" }, OLD_COMPATIBILITY_DATE);
    try {
      // The control: on this date workerd's own fetch throws on `cache: "no-store"`.
      const probe = await mf.dispatchFetch("http://smoke.local/cache-probe");
      expect(await probe.text()).toMatch(/'cache' field .* is not implemented/);
      const res = await mf.dispatchFetch("http://smoke.local/smoke");
      const body = await res.text();
      expect(res.status, body).toBe(200);
      expectComplete(JSON.parse(body) as Report, "workerd-old");
    } finally {
      await mf.dispose();
    }
  });
});

describe("Deno without --allow-net", { timeout: 60_000 }, () => {
  it("acquire fails at once with a non-retryable error naming --allow-net (upstash over fetch, postgres over postgres.js), not retried until its timeout", async () => {
    // Type-checked, the environment only (postgres.js reads many variables), no --allow-net: Deno
    // refuses the connections (NotCapable). postgres.js from the repository's node_modules.
    const args = ["run", "--check", "--no-lock", "--node-modules-dir=manual"];
    args.push(
      "--config=test/harness/smoke/deno.json",
      "--allow-env",
      "test/harness/smoke/run-deno-no-net.ts",
    );
    const report = await runSmoke("deno", DENO, args, 50_000, "NONET_REPORT", {
      SMOKE_POSTGRES_URL: inject("postgres").url,
    });
    for (const backend of ["upstash", "postgres"]) {
      const run = report[backend] as Record<string, unknown>;
      expect(run, backend).toMatchObject({ name: "BackendError", code: "ERR_BACKEND", retryable: false });
      expect(run.message).toMatch(
        new RegExp(`^\\[leasehold\\] \\[${backend}\\] .*Requires net access to "127\\.0\\.0\\.1:\\d+"`),
      );
      expect(run.message).toMatch(/no retry can grant it: run Deno with --allow-net/);
      // At once, against the acquire's timeout of 60 s: measured under 50 ms (one refused connection).
      expect(run.ms, backend).toBeLessThan(5_000);
    }
    expect(report.printed, "a failure that ends the wait is not also printed").toEqual([]);
    expect(JSON.stringify(report)).not.toContain(upstash.token);
    expect(JSON.stringify(report)).not.toContain(inject("postgres").password);
  });
});

function redis(command: (string | number)[]): Promise<unknown> {
  return restCommand(upstash.url, upstash.token, command);
}
