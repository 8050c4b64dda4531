// The `leasehold` command, run as real processes from the source (node --import tsx cli/main.ts)
// against the shared Upstash bridge, and once each on Bun, Deno and Azurite.
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { type AddressInfo, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "@upstash/redis";
import { afterEach, describe, expect, inject, it } from "vitest";
import { upstash } from "../../src/backends/upstash/index.ts";
import { createMutex } from "../../src/index.ts";
import { killAll } from "../harness/servers/children.ts";

const ctx = inject("upstash");
const az = inject("azurite");
const root = new URL("../../", import.meta.url);
const sdk = new Redis({ url: ctx.url, token: ctx.token });
const unique = (what: string) => `cli-${what}-${crypto.randomUUID()}`;
const lockKey = (name: string) => `leasehold:{${name}}`;

/** The test runner's environment without any backend configuration. */
const bare: Record<string, string | undefined> = Object.fromEntries(
  Object.entries(process.env).filter(
    ([k]) => !/^(UPSTASH_|KV_REST_API_|AZURE_STORAGE_|LEASEHOLD_)/.test(k) && k !== "NODE_OPTIONS",
  ),
);
const upstashEnv = { ...bare, UPSTASH_REDIS_REST_URL: ctx.url, UPSTASH_REDIS_REST_TOKEN: ctx.token };

const RUNTIMES = {
  node: [process.execPath, "--import", "tsx", "cli/main.ts"],
  bun: ["node_modules/.bin/bun", "cli/main.ts"],
  deno: ["node_modules/.bin/deno", "run", "--allow-all", "cli/main.ts"],
} as const;

interface Run {
  child: ChildProcess;
  readonly stdout: string;
  readonly stderr: string;
  /** The exit status (128+n for signal n). */
  status: Promise<number>;
  /** Resolves when stdout contains `text` (the n-th time). */
  printed(text: string, times?: number, timeout?: number): Promise<void>;
}

const children: ChildProcess[] = [];
afterEach(() => killAll(children.splice(0)));

function cli(
  args: string[],
  {
    env = upstashEnv,
    runtime = "node",
    deadStderr = false,
  }: {
    env?: Record<string, string | undefined>;
    runtime?: keyof typeof RUNTIMES;
    /** Close the reading end of the CLI's stderr at once, as a `| logger` that exited does. */
    deadStderr?: boolean;
  } = {},
): Run {
  const [bin, ...pre] = RUNTIMES[runtime];
  const child = spawn(bin, [...pre, ...args], {
    cwd: root,
    env: { ...env, DENO_NO_PROMPT: "1", NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let stdout = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8").on("data", (c: string) => (stdout += c));
  if (deadStderr) child.stderr!.destroy();
  else child.stderr!.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  const status = new Promise<number>((resolve) =>
    child.once("close", (code, signal) => resolve(code ?? 128 + (signal === "SIGKILL" ? 9 : 15))),
  );
  return {
    child,
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    status,
    async printed(text, times = 1, timeout = 15_000) {
      const end = performance.now() + timeout;
      while (stdout.split(text).length - 1 < times) {
        if (performance.now() > end || child.exitCode !== null) {
          throw new Error(
            `${JSON.stringify(text)} not printed ${times}x; stdout: ${stdout}; stderr: ${stderr}`,
          );
        }
        await new Promise((r) => setTimeout(r, 10));
      }
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Whether a process with this pid runs (a zombie waiting to be reaped does not count). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/** Whether the process is gone within `timeout` ms (a signal takes a moment to land). */
async function gone(pid: number, timeout = 2_000): Promise<boolean> {
  const end = performance.now() + timeout;
  while (alive(pid)) {
    if (performance.now() > end) return false;
    await new Promise((r) => setTimeout(r, 10));
  }
  return true;
}

describe("leasehold --help and usage errors", () => {
  it("--help documents every command, flag, default, exit status and variable, and exits 0", async () => {
    const runs = [[], ["--help"], ["exec", "--help"], ["lead", "-h"], ["status", "--help"]].map((a) =>
      cli(a, { env: bare }),
    );
    expect(await Promise.all(runs.map((r) => r.status))).toEqual([0, 0, 0, 0, 0]);
    const [, main, exec, lead, status] = runs.map((r) => r.stdout);
    for (const text of [main, exec, lead, status]) {
      for (const v of [
        "UPSTASH_REDIS_REST_URL",
        "UPSTASH_REDIS_REST_TOKEN",
        "AZURE_STORAGE_CONNECTION_STRING",
        "LEASEHOLD_AZURE_CONTAINER",
        "--container",
        "--create-container",
        "--backend",
        "--name",
      ]) {
        expect(text).toContain(v);
      }
    }
    for (const flag of [
      "--wait",
      "--timeout",
      "--ttl",
      "--grace",
      "--retry-delay",
      "--owner",
      "--quiet",
      "15000",
      " 75 ",
      " 76 ",
    ]) {
      expect(exec).toContain(flag);
    }
    for (const flag of ["--ttl", "--grace", "--retry-delay", "--owner", "SIGTERM"])
      expect(lead).toContain(flag);
    expect(status).toContain("--json");
    for (const code of ["75", "76", "69", "126", "127"]) expect(main).toContain(code);
  });

  it("exits 2 with a usage message for unknown options, a missing --name or command, bad numbers", async () => {
    const cases: [string[], RegExp][] = [
      [["exec", "--name", "x", "--bogus", "--", "true"], /unknown option --bogus/],
      [["exec", "--", "true"], /--name is required/],
      [["exec", "--name", "x"], /needs a command/],
      [["lead", "--name", "x", "--"], /needs a command/],
      [["status", "--name", "x", "--wait"], /--wait is not an option of "status"/],
      [["exec", "--name", "x", "--ttl", "soon", "--", "true"], /--ttl must be a whole number of ms/],
      [["frobnicate"], /unknown command/],
      [["exec", "--name", "bad//name", "--", "true"], /name .* is invalid/],
      [["exec", "--name", "x", "--ttl", "1000", "--grace", "900", "--", "true"], /--grace must be less than/],
    ];
    const runs = cases.map(([args]) => cli(args));
    const statuses = await Promise.all(runs.map((r) => r.status));
    cases.forEach(([args, message], i) => {
      expect(statuses[i], args.join(" ")).toBe(2);
      expect(runs[i]!.stderr, args.join(" ")).toMatch(message);
      expect(runs[i]!.stderr).toMatch(/--help/);
    });
  });
});

describe("backend configuration", () => {
  it("without configuration exits 2 and names the variables to set", async () => {
    const runs = [
      cli(["status", "--name", "x"], { env: bare }),
      cli(["exec", "--name", "x", "--", "true"], { env: bare }),
      cli(["status", "--name", "x", "--backend", "azure-blob"], { env: upstashEnv }),
      cli(["status", "--name", "x"], { env: { ...bare, UPSTASH_REDIS_REST_URL: ctx.url } }),
      cli(["status", "--name", "x", "--backend", "redis"], { env: upstashEnv }),
    ];
    expect(await Promise.all(runs.map((r) => r.status))).toEqual([2, 2, 2, 2, 2]);
    for (const r of runs.slice(0, 2)) {
      expect(r.stderr).toMatch(/UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN/);
      expect(r.stderr).toMatch(
        /AZURE_STORAGE_CONNECTION_STRING and --container \(or LEASEHOLD_AZURE_CONTAINER\)/,
      );
    }
    expect(runs[2]!.stderr).toMatch(/needs AZURE_STORAGE_CONNECTION_STRING and --container/);
    expect(runs[3]!.stderr).toMatch(/needs UPSTASH_REDIS_REST_TOKEN/);
    expect(runs[4]!.stderr).toMatch(/--backend must be upstash or azure-blob/);
  });

  it("a wrong token or URL exits non-zero and never prints the secret", async () => {
    const secret = `wrong-${crypto.randomUUID()}`;
    const wrong = { ...upstashEnv, UPSTASH_REDIS_REST_TOKEN: secret };
    const redisUrl = `redis://default:${secret}@127.0.0.1:6379`;
    const runs = [
      cli(["status", "--name", "x"], { env: wrong }),
      cli(["exec", "--name", "x", "--", "true"], { env: wrong }),
      cli(["lead", "--name", "x", "--", "true"], { env: wrong }),
      cli(["status", "--name", "x"], { env: { ...upstashEnv, UPSTASH_REDIS_REST_URL: redisUrl } }),
    ];
    expect(await Promise.all(runs.map((r) => r.status))).toEqual([2, 2, 2, 2]);
    for (const r of runs.slice(0, 3)) expect(r.stderr).toMatch(/authentication failed \(HTTP 401\)/);
    expect(runs[3]!.stderr).toMatch(/http\(s\) URL.*REST URL/);
    for (const r of runs) {
      expect(r.stdout + r.stderr).not.toContain(secret);
      expect(r.stdout).not.toContain("leasehold:");
    }
  });

  it('a token with " and \\ in an unexpected reply is redacted on stderr in every form', async () => {
    const odd = `tok"en\\cli${crypto.randomUUID().slice(0, 8)}`;
    const quoting = createHttpServer((req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ result: { echo: `${req.headers.authorization}`, odd } }));
    });
    await new Promise<void>((r) => quoting.listen(0, "127.0.0.1", r));
    try {
      const url = `http://127.0.0.1:${(quoting.address() as AddressInfo).port}`;
      const run = cli(["status", "--name", unique("odd")], {
        env: { ...bare, UPSTASH_REDIS_REST_URL: url, UPSTASH_REDIS_REST_TOKEN: odd },
      });
      expect(await run.status).toBe(69);
      expect(run.stderr).toMatch(/unexpected reply: .*\[redacted\]/);
      for (const form of [odd, JSON.stringify(odd).slice(1, -1), encodeURIComponent(odd)]) {
        expect(run.stderr).not.toContain(form);
      }
    } finally {
      quoting.close();
    }
  });

  it("an unreachable backend exits 69", async () => {
    const r = cli(["status", "--name", "x"], {
      env: { ...upstashEnv, UPSTASH_REDIS_REST_URL: "http://127.0.0.1:9" },
    });
    expect(await r.status).toBe(69);
    expect(r.stderr).toMatch(/request failed/);
    expect(r.stderr).not.toContain(ctx.token);
  });
});

describe("leasehold status", () => {
  it("prints free, or the holder's owner, token and ttl left; --json for machines", async () => {
    const name = unique("status");
    const free = [cli(["status", "--name", name]), cli(["status", "--name", name, "--json"])];
    expect(await Promise.all(free.map((r) => r.status))).toEqual([0, 0]);
    expect(free[0]!.stdout).toBe(`"${name}" is free\n`);
    expect(JSON.parse(free[1]!.stdout)).toEqual({ name, holder: null });

    const lease = await createMutex(upstash({ url: ctx.url, token: ctx.token }), {
      name,
      ttl: 5_000,
      owner: "status-owner",
    }).acquire({ timeout: 5_000 });
    try {
      const held = [cli(["status", "--name", name]), cli(["status", "--name", name, "--json"])];
      expect(await Promise.all(held.map((r) => r.status))).toEqual([0, 0]);
      expect(held[0]!.stdout).toMatch(
        new RegExp(`^"${name}" is held by status-owner \\(token ${lease.token}, ttl left \\d+ ms\\)\\n$`),
      );
      const json = JSON.parse(held[1]!.stdout);
      expect(json).toMatchObject({ name, holder: { owner: "status-owner", token: lease.token } });
      expect(json.holder.ttlLeft).toBeGreaterThan(0);
      expect(json.holder.ttlLeft).toBeLessThanOrEqual(5_000);
    } finally {
      await lease.release();
    }
  });
});

describe("leasehold exec", () => {
  it("passes the command's exit status through (128+n for a signal; 127 not found) and gives it the lease", async () => {
    const name = unique("exit");
    const seven = cli([
      "exec",
      "--name",
      name,
      "--",
      "sh",
      "-c",
      'echo "$LEASEHOLD_NAME $LEASEHOLD_TOKEN"; exit 7',
    ]);
    expect(await seven.status).toBe(7);
    expect(seven.stdout).toMatch(new RegExp(`^${name} \\d+\\n$`));
    const runs = [
      cli(["exec", "--name", `${name}-a`, "--", "sh", "-c", "kill -TERM $$"]),
      cli(["exec", "--name", `${name}-b`, "--", "true"]),
      cli(["exec", "--name", `${name}-c`, "--", "leasehold-no-such-command"]),
    ];
    expect(await Promise.all(runs.map((r) => r.status))).toEqual([143, 0, 127]);
    expect(runs[2]!.stderr).toMatch(/command not found/);
    // released afterwards
    expect(await sdk.exists(lockKey(name), lockKey(`${name}-a`), lockKey(`${name}-b`))).toBe(0);
  });

  it("two at once: one runs, the other exits 75 at once without running; --timeout gives up with 75, --wait runs after", async () => {
    const name = unique("flock");
    const first = cli([
      "exec",
      "--name",
      name,
      "--ttl",
      "1500",
      "--owner",
      "first",
      "--",
      "sh",
      "-c",
      "echo started; sleep 2; echo done",
    ]);
    await first.printed("started");
    const started = performance.now();
    const second = cli(["exec", "--name", name, "--", "sh", "-c", "echo SECOND-RAN"]);
    const timed = cli(["exec", "--name", name, "--timeout", "300", "--", "sh", "-c", "echo TIMED-RAN"]);
    const quiet = cli(["exec", "--name", name, "-q", "--", "sh", "-c", "echo QUIET-RAN"]);
    const waiter = cli([
      "exec",
      "--name",
      name,
      "--wait",
      "--retry-delay",
      "100",
      "--",
      "sh",
      "-c",
      "echo WAITER-RAN",
    ]);
    expect(await second.status).toBe(75);
    expect(await timed.status).toBe(75);
    expect(await quiet.status).toBe(75);
    expect(quiet.stdout + quiet.stderr).toBe("");
    expect(performance.now() - started).toBeLessThan(1_900); // while the first still runs
    expect(first.child.exitCode).toBeNull();
    expect(second.stdout).toBe("");
    expect(second.stderr).toMatch(new RegExp(`"${name}" is taken by first \\(token \\d+\\)`));
    expect(timed.stdout).toBe("");
    expect(timed.stderr).toMatch(/still taken after 300 ms/);
    expect(await first.status).toBe(0);
    expect(first.stdout).toBe("started\ndone\n");
    expect(await waiter.status).toBe(0);
    expect(waiter.stdout).toBe("WAITER-RAN\n");
  });

  it("on lease loss stops the command's process group with SIGTERM and exits 76 with a message", async () => {
    const name = unique("lost");
    const script = 'trap "echo got-term; exit 0" TERM; sleep 30 & echo "started $!"; wait';
    const run = cli(["exec", "--name", name, "--ttl", "1500", "--", "sh", "-c", script]);
    await run.printed("started");
    const grandchild = Number(/started (\d+)/.exec(run.stdout)![1]);
    expect(alive(grandchild)).toBe(true);
    const deleted = performance.now();
    expect(await sdk.del(lockKey(name))).toBe(1); // behind the holder's back
    expect(await run.status).toBe(76);
    // noticed at the next renewal (every ttl/3 ± 10 %)
    expect(performance.now() - deleted).toBeLessThan(1_500);
    expect(run.stdout).toContain("got-term");
    expect(run.stderr).toMatch(new RegExp(`lost the lock "${name}" \\(token \\d+\\) while the command ran`));
    expect(run.stderr).toMatch(/exiting 76/);
    expect(await gone(grandchild)).toBe(true); // the whole group got the SIGTERM
  });

  it.each([
    ["", false],
    [" (also when its stderr reader is gone: writing a message never ends supervision)", true],
  ])("on lease loss SIGKILLs a command that ignores SIGTERM after --grace%s", async (_, deadStderr) => {
    const name = unique("lost-kill");
    const run = cli(
      [
        "exec",
        "--name",
        name,
        "--ttl",
        "1500",
        "--grace",
        "300",
        "--",
        "sh",
        "-c",
        'trap "" TERM; echo started; sleep 30; echo SURVIVED',
      ],
      { deadStderr },
    );
    await run.printed("started");
    await sdk.del(lockKey(name));
    expect(await run.status).toBe(76);
    expect(run.stdout).not.toContain("SURVIVED");
    if (deadStderr) return;
    expect(run.stderr).toMatch(/SIGKILL after 300 ms/);
    expect(run.stderr).toMatch(/stopped with SIGKILL \(status 137\)/);
  });

  it("forwards SIGTERM to the command, waits for it, releases, and exits with its status", async () => {
    const name = unique("forward");
    const run = cli([
      "exec",
      "--name",
      name,
      "--",
      "sh",
      "-c",
      'trap "echo got-term; exit 3" TERM; echo started; sleep 30 & wait',
    ]);
    await run.printed("started");
    run.child.kill("SIGTERM");
    expect(await run.status).toBe(3);
    expect(run.stdout).toBe("started\ngot-term\n");
    expect(await sdk.exists(lockKey(name))).toBe(0);
  });
});

describe("leasehold lead", () => {
  it("runs the command on one leader; SIGTERM hands over; after a loss it stops and restarts the command", async () => {
    const name = unique("lead");
    const args = (who: string) => [
      "lead",
      "--name",
      name,
      "--ttl",
      "1500",
      "--retry-delay",
      "200",
      "--owner",
      who,
      "--",
      "sh",
      "-c",
      `echo "run ${who} $LEASEHOLD_TOKEN"; exec sleep 30`,
    ];
    const a = cli(args("a"));
    await a.printed("run a");
    const b = cli(args("b"));
    await sleep(1_500); // b campaigns, a keeps leading
    expect(b.stdout).toBe("");
    a.child.kill("SIGTERM");
    expect(await a.status).toBe(0);
    expect(a.stderr).toMatch(/SIGTERM: stopping/);
    await b.printed("run b", 1, 3_000);

    await sdk.del(lockKey(name)); // b loses its lease behind its back
    await b.printed("run b", 2, 5_000);
    expect(b.stderr).toMatch(new RegExp(`lost leadership of "${name}"`));
    const tokens = [...`${a.stdout}${b.stdout}`.matchAll(/run \w (\d+)/g)].map((m) => Number(m[1]));
    expect(tokens).toHaveLength(3);
    expect(tokens).toEqual([...tokens].sort((x, y) => x - y));
    b.child.kill("SIGINT");
    expect(await b.status).toBe(0);
    expect(await sdk.exists(lockKey(name))).toBe(0);
  });

  it("a command that exits on its own ends the term and is started again after about --retry-delay", async () => {
    const name = unique("lead-exit");
    const run = cli([
      "lead",
      "--name",
      name,
      "--ttl",
      "1500",
      "--retry-delay",
      "200",
      "--",
      "sh",
      "-c",
      'echo "run $LEASEHOLD_TOKEN"; exit 3',
    ]);
    await run.printed("run", 3, 5_000);
    run.child.kill("SIGTERM");
    expect(await run.status).toBe(0);
    expect(run.stderr).toMatch(/the command exited with status 3; leadership released/);
  });
});

describe("other runtimes and backends", () => {
  it.each(["bun", "deno"] as const)(
    "runs on %s: status, and exec passing the status through",
    async (runtime) => {
      const name = unique(runtime);
      const status = cli(["status", "--name", name], { runtime });
      expect(await status.status, status.stderr).toBe(0);
      expect(status.stdout).toBe(`"${name}" is free\n`);
      const exec = cli(["exec", "--name", name, "--", "sh", "-c", 'echo "token $LEASEHOLD_TOKEN"; exit 7'], {
        runtime,
      });
      expect(await exec.status, exec.stderr).toBe(7);
      expect(exec.stdout).toMatch(/^token \d+\n$/);
      const none = cli(["status", "--name", name], { runtime, env: bare });
      expect(await none.status).toBe(2);
      expect(none.stderr).toMatch(/UPSTASH_REDIS_REST_URL/);
    },
  );

  it("works on Azure Blob (Azurite): status, exec, the ttl range, a wrong key", async () => {
    const name = unique("azure");
    const container = `cli-${crypto.randomUUID().slice(0, 8)}`;
    const env = {
      ...bare,
      AZURE_STORAGE_CONNECTION_STRING: az.connectionString,
      LEASEHOLD_AZURE_CONTAINER: container,
    };
    const exec = cli(["exec", "--name", name, "--create-container", "--", "sh", "-c", "exit 5"], { env });
    expect(await exec.status, exec.stderr).toBe(5);
    const wrongKey = btoa(crypto.randomUUID());
    const runs = [
      cli(["status", "--name", name], { env }),
      cli(["exec", "--name", name, "--ttl", "2000", "--", "true"], { env }),
      cli(["exec", "--name", name, "--container", "missing-container", "--", "true"], { env }),
      cli(["status", "--name", name], {
        env: {
          ...env,
          AZURE_STORAGE_CONNECTION_STRING: az.connectionString.replace(az.accountKey, wrongKey),
        },
      }),
    ];
    expect(await Promise.all(runs.map((r) => r.status))).toEqual([0, 2, 69, 2]);
    expect(runs[0]!.stdout).toBe(`"${name}" is free\n`);
    expect(runs[1]!.stderr).toMatch(
      /ttl must be from 15000 to 60000 ms for the azure-blob backend, got 2000/,
    );
    expect(runs[2]!.stderr).toMatch(/does not exist.*--create-container/s);
    expect(runs[3]!.stderr).toMatch(/HTTP 403/);
    for (const r of runs) {
      expect(r.stdout + r.stderr).not.toContain(az.accountKey);
      expect(r.stdout + r.stderr).not.toContain(wrongKey);
    }
  });
});

/** Nanosecond wall-clock stamps a shell command appends to `file`, one per line. */
function stamps(file: string): bigint[] {
  let text = "";
  try {
    text = readFileSync(file, "utf8");
  } catch {}
  return text
    .split("\n")
    .filter((l) => /^\d+$/.test(l))
    .map((l) => BigInt(l));
}

const tmp = (what: string) => join(tmpdir(), `leasehold-${what}-${crypto.randomUUID()}`);

/** A shell command that prints "started", then stamps `file` every 20 ms until stopped. */
const ticking = (file: string) => `echo started; while :; do date +%s%N >> ${file}; sleep 0.02; done`;

describe("the command never outlives the lease", () => {
  // Two "hosts" (two leasehold processes) on one lock: the second one's command stamps the time it
  // started; every stamp of the first command must come before it, whatever happened to the first
  // leasehold process.
  async function handover(
    disturb: (first: Run) => Promise<void>,
  ): Promise<{ first: Run; a: bigint[]; b: bigint }> {
    const name = unique("handover");
    const fileA = tmp("a");
    const fileB = tmp("b");
    const first = cli(["exec", "--name", name, "--ttl", "2000", "--", "sh", "-c", ticking(fileA)]);
    await first.printed("started");
    const second = cli(["exec", "--name", name, "--wait", "--", "sh", "-c", `date +%s%N > ${fileB}`]);
    await disturb(first);
    expect(await second.status).toBe(0);
    const b = stamps(fileB)[0]!;
    await sleep(300); // a command still running would stamp again meanwhile
    const a = stamps(fileA);
    rmSync(fileA, { force: true });
    rmSync(fileB, { force: true });
    return { first, a, b };
  }

  it("kill -9 of leasehold exec: the watchdog stops the command before the lock can pass on", async () => {
    const { a, b } = await handover(async (first) => {
      await sleep(500);
      first.child.kill("SIGKILL");
    });
    expect(a.length).toBeGreaterThan(5);
    expect(a.at(-1)! < b).toBe(true);
  });

  it("SIGSTOP of leasehold exec for 4 s: the command is stopped before the lock can pass on; exec then exits 76", async () => {
    const { first, a, b } = await handover(async (run) => {
      await sleep(500);
      run.child.kill("SIGSTOP");
      setTimeout(() => run.child.kill("SIGCONT"), 4_000);
    });
    expect(a.length).toBeGreaterThan(5);
    expect(a.at(-1)! < b).toBe(true);
    expect(await first.status).toBe(76);
    expect(first.stderr).toMatch(/the watchdog is stopping the command: the lease's deadline passed/);
  });

  it("a dead stderr reader: lead keeps supervising, and stops the command when asked", async () => {
    const name = unique("lead-epipe");
    const run = cli(["lead", "--name", name, "--", "sh", "-c", "echo started; exec sleep 30"], {
      deadStderr: true,
    });
    await run.printed("started");
    await sleep(1_000); // "leading ..." went to the dead pipe meanwhile
    expect(run.child.exitCode).toBeNull();
    expect((await sdk.get<string>(lockKey(name)))?.split("|")[1]).toBeDefined();
    run.child.kill("SIGTERM");
    expect(await run.status).toBe(0);
    expect(await sdk.exists(lockKey(name))).toBe(0);
  });

  it("background children keep the lock until they end (flock's way); --children kill stops them", async () => {
    const name = unique("bg");
    const file = tmp("bg");
    const run = cli([
      "exec",
      "--name",
      name,
      "--",
      "sh",
      "-c",
      `(sleep 1.5; echo bg-done > ${file}) & exit 5`,
    ]);
    await sleep(800);
    // the command itself has exited; its background job still runs, so the lock stays taken
    expect(run.child.exitCode).toBeNull();
    const status = cli(["status", "--name", name]);
    expect(await status.status).toBe(0);
    expect(status.stdout).toMatch(/is held by/);
    expect(await run.status).toBe(5);
    expect(readFileSync(file, "utf8")).toBe("bg-done\n"); // released only after the job ended
    rmSync(file, { force: true });
    expect(await sdk.exists(lockKey(name))).toBe(0);

    const killing = cli([
      "exec",
      "--name",
      `${name}-kill`,
      "--children",
      "kill",
      "--",
      "sh",
      "-c",
      "sleep 30 & echo bg $!; exit 4",
    ]);
    const started = performance.now();
    expect(await killing.status).toBe(4);
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(await gone(Number(/bg (\d+)/.exec(killing.stdout)![1]))).toBe(true);
    expect(await sdk.exists(lockKey(`${name}-kill`))).toBe(0);
  });

  it("lead: a command that exits leaving a background job leads until the job ends", async () => {
    const name = unique("lead-bg");
    const run = cli([
      "lead",
      "--name",
      name,
      "--retry-delay",
      "5000",
      "--",
      "sh",
      "-c",
      "sleep 1.2 & echo started; exit 0",
    ]);
    await run.printed("started");
    await sleep(600);
    expect(await sdk.exists(lockKey(name))).toBe(1); // the job still runs: still leading
    await sleep(1_500);
    expect(await sdk.exists(lockKey(name))).toBe(0); // job done: term over, lock released
    expect(run.stderr).toMatch(/the command exited with status 0; leadership released/);
  });
});

describe("an unreachable backend is not a taken lock", () => {
  const closedPort = async () => {
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const { port } = server.address() as AddressInfo;
    await new Promise((r) => server.close(r));
    return port;
  };
  const deadEnv = async () => ({
    ...upstashEnv,
    UPSTASH_REDIS_REST_URL: `http://127.0.0.1:${await closedPort()}`,
  });

  it("exec --wait --timeout on a refused connection exits 69 and says why, even with --quiet", async () => {
    const run = cli(["exec", "--name", unique("dead"), "--quiet", "--timeout", "500", "--", "true"], {
      env: await deadEnv(),
    });
    expect(await run.status).toBe(69);
    expect(run.stderr).toMatch(/could not reach the backend within 500 ms: .*request failed/);
    expect(run.stderr).not.toMatch(/still taken/);
  });

  it("exec --wait --timeout on a server that never answers exits 69: no answer", async () => {
    const sockets: Socket[] = [];
    const server = createServer((s) => sockets.push(s));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const run = cli(["exec", "--name", unique("silent"), "--timeout", "500", "--", "true"], {
        env: { ...upstashEnv, UPSTASH_REDIS_REST_URL: url },
      });
      expect(await run.status).toBe(69);
      expect(run.stderr).toMatch(/could not reach the backend within 500 ms: .*no answer/);
    } finally {
      for (const s of sockets) s.destroy();
      server.close();
    }
  });

  it("exec --wait and lead report failures while they wait, at most one line per 10 s", async () => {
    const env = await deadEnv();
    const waiting = cli(["exec", "--name", unique("dead-wait"), "--wait", "--", "true"], { env });
    const leading = cli(["lead", "--name", unique("dead-lead"), "--", "true"], { env });
    await sleep(2_500);
    for (const run of [waiting, leading]) {
      expect(run.child.exitCode).toBeNull();
      expect(run.stderr.match(/the backend failed: .*request failed.*; retrying/g)).toHaveLength(1);
    }
  });

  it("--timeout 0 takes a free lock", async () => {
    const run = cli(["exec", "--name", unique("zero"), "--timeout", "0", "--", "sh", "-c", "echo ran"]);
    expect(await run.status).toBe(0);
    expect(run.stdout).toBe("ran\n");
  });
});
