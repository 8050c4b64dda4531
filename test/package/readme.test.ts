// The README's JavaScript examples run as written: each ```js / ```mjs block is saved as an .mjs
// file in a fresh directory whose node_modules/leasehold is this package (dist/, as npm installs
// it) and run with `node FILE.mjs` on Node 20 (the Node running vitest) and Node 24
// (test/harness/runtimes), with the Upstash bridge's variables set for an example that reads them.
// Each must exit 0 by itself. And the README's note on `await using` holds: plain JavaScript runs
// it on Node 24 and is a SyntaxError on Node 20. The crontab recipe runs as cron would run it:
// the packed package installed with `npm install -g` (into a prefix of the test's own, which
// stands for /usr/local), a minimal environment, and the crontab's PATH line.
import { execFileSync, spawnSync } from "node:child_process";
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, inject, it } from "vitest";
import { registerSecret } from "../harness/secrets.ts";
import { NODE24 } from "../harness/servers/runtimes.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const upstash = inject("upstash");
const redis = inject("redis");
registerSecret(redis.password);
const NODES = { "Node 20": process.execPath, "Node 24": join(root, NODE24) };

/** The README's blocks fenced with a language that `info` matches, with the line each starts on. */
function readmeBlocks(info: RegExp): { line: number; code: string }[] {
  const lines = readFileSync(join(root, "README.md"), "utf8").split("\n");
  const blocks: { line: number; code: string }[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!info.test(lines[i]!.replace(/^```/, "")) || !lines[i]!.startsWith("```")) continue;
    const end = lines.indexOf("```", i + 1);
    if (end < 0) throw new Error(`README.md:${i + 1}: unclosed code fence`);
    blocks.push({ line: i + 2, code: lines.slice(i + 1, end).join("\n") });
    i = end;
  }
  return blocks;
}

// A user's project: no package.json, leasehold in node_modules.
const project = mkdtempSync(join(tmpdir(), "leasehold-readme-"));
mkdirSync(join(project, "node_modules"));
symlinkSync(root, join(project, "node_modules", "leasehold"), "dir");
afterAll(() => rmSync(project, { recursive: true, force: true }));

/** Runs `code` saved as `file` in the project with `node`; its status and output. */
function run(node: string, file: string, code: string): { status: number | null; output: string } {
  writeFileSync(join(project, file), code);
  const r = spawnSync(node, [file], {
    cwd: project,
    encoding: "utf8",
    timeout: 20_000,
    env: {
      ...process.env,
      UPSTASH_REDIS_REST_URL: upstash.url,
      UPSTASH_REDIS_REST_TOKEN: upstash.token,
      NODE_OPTIONS: "",
    },
  });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

const blocks = readmeBlocks(/^(js|mjs|javascript)\s*$/);

describe("README.md's JavaScript examples, as written", () => {
  it("there are some: the first example is plain JavaScript", () => {
    expect(blocks.length).toBeGreaterThanOrEqual(2);
    expect(blocks[0]!.code).toContain("mutex.run(");
  });

  for (const [runtime, node] of Object.entries(NODES)) {
    it.each(blocks)(`README.md:$line runs on ${runtime} as an .mjs file`, ({ line, code }) => {
      const { status, output } = run(node, `readme-${line}.mjs`, code);
      expect(status, output).toBe(0);
      expect(output).not.toMatch(/Error|Warning/);
      // An example whose last line shows what it prints (`// done`) prints it.
      const shown = /^console\.log\(.*\); \/\/ (\S+)$/m.exec(code)?.[1];
      if (shown) expect(output.trim().split("\n").at(-1)).toBe(shown);
    });
  }

  it("`await using` in plain JavaScript: Node 24 runs it and releases the lease; Node 20 reads a SyntaxError", () => {
    const code = `
      import { createMutex } from "leasehold";
      import { memory } from "leasehold/memory";
      const mutex = createMutex(memory(), { name: "nightly-report" });
      {
        await using lease = await mutex.acquire();
        console.log("held", lease.token, (await mutex.holder())?.token);
      }
      console.log("after", await mutex.holder());
    `;
    const on24 = run(NODES["Node 24"], "await-using.mjs", code);
    expect(on24.status, on24.output).toBe(0);
    expect(on24.output.trim()).toBe("held 1 1\nafter null");
    const on20 = run(NODES["Node 20"], "await-using.mjs", code);
    expect(on20.status).toBe(1);
    expect(on20.output).toMatch(/SyntaxError/);
  });

  it("the crontab recipe: a global install run by its absolute path with cron's environment, twice in the hour: one run", () => {
    const block = readmeBlocks(/^sh\s*$/).find((b) => b.code.includes("crontab"));
    expect(block, "a ```sh block with the crontab lines").toBeDefined();
    const path = /^PATH=(\S+)$/m.exec(block!.code)?.[1];
    const line = /^0 \* \* \* \*\s+(.+)$/m.exec(block!.code)?.[1];
    expect(path).toBe("/usr/local/bin:/usr/bin:/bin");
    expect(line).toMatch(/^\. \/etc\/leasehold\.env; \/usr\/local\/bin\/leasehold exec /);
    // The host: /usr/local is a prefix of the test's own, with Node in its bin/ as a system Node
    // has it; the package goes in with `npm install -g` from its packed tarball.
    const host = join(project, "host");
    mkdirSync(join(host, "bin"), { recursive: true });
    symlinkSync(process.execPath, join(host, "bin", "node"));
    execFileSync("npm", ["pack", "--pack-destination", host, "--loglevel=error"], { cwd: root });
    const tarball = readdirSync(host).find((f) => f.endsWith(".tgz"))!;
    execFileSync(
      "npm",
      [
        "install",
        "-g",
        "--prefix",
        host,
        "--offline",
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        join(host, tarball),
      ],
      { cwd: host },
    );
    // /etc/leasehold.env exports the store's variables; the report appends a line per run.
    const envFile = join(host, "leasehold.env");
    writeFileSync(envFile, `export REDIS_URL='${redis.url}'\n`);
    const report = join(host, "report.sh");
    const ran = join(host, "ran");
    writeFileSync(report, `#!/bin/sh\necho "ran with token $LEASEHOLD_TOKEN" >> '${ran}'\n`);
    chmodSync(report, 0o755);
    const command = line!
      .replace("/etc/leasehold.env", envFile)
      .replace("/usr/local/bin/", `${host}/bin/`)
      .replace("/opt/app/report.sh", report)
      .replace("--name hourly-report", `--name hourly-report-${Math.random().toString(36).slice(2)}`);
    // cron's environment: the crontab's PATH (its /usr/local/bin being the host's), HOME, SHELL.
    const cronEnv = { PATH: path!.replace("/usr/local/bin", `${host}/bin`), HOME: host, SHELL: "/bin/sh" };
    for (const _fire of [1, 2]) {
      const r = spawnSync("/bin/sh", ["-c", command], { env: cronEnv, encoding: "utf8", timeout: 30_000 });
      expect(r.status, `${r.stdout}${r.stderr}`).toBe(0);
    }
    // The second fire of the hour found it done: the report ran once.
    expect(readFileSync(ran, "utf8")).toMatch(/^ran with token \d+\n$/);
  });
});
