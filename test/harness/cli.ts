// Runs the `leasehold` command as real processes from the source (on Node bundled by the global
// setup, test/harness/node-script.ts; or Bun, or Deno) against the shared Upstash bridge, and watches the processes it starts.
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { Redis } from "@upstash/redis";
import { inject } from "vitest";
import { nodeScript } from "./node-script.ts";
import { killAll } from "./servers/children.ts";

export { lockKey } from "./upstash.ts";

export const ctx = inject("upstash");
const root = new URL("../../", import.meta.url);
export const sdk = new Redis({ url: ctx.url, token: ctx.token });
export const unique = (what: string) => `cli-${what}-${crypto.randomUUID()}`;

/** The test runner's environment without any backend configuration. */
export const bare: Record<string, string | undefined> = Object.fromEntries(
  Object.entries(process.env).filter(
    ([k]) =>
      !/^(UPSTASH_|KV_REST_API_|AZURE_STORAGE_|LEASEHOLD_|AWS_)/.test(k) &&
      !["NODE_OPTIONS", "REDIS_URL", "DATABASE_URL"].includes(k),
  ),
);
export const upstashEnv = { ...bare, UPSTASH_REDIS_REST_URL: ctx.url, UPSTASH_REDIS_REST_TOKEN: ctx.token };

const RUNTIMES: Record<"node" | "bun" | "deno", () => [string, ...string[]]> = {
  node: () => nodeScript("cli/main.ts"),
  bun: () => ["node_modules/.bin/bun", "cli/main.ts"],
  deno: () => ["node_modules/.bin/deno", "run", "--allow-all", "cli/main.ts"],
};

export interface Run {
  child: ChildProcess;
  readonly stdout: string;
  readonly stderr: string;
  /** The exit status (128+n for signal n). */
  status: Promise<number>;
  /** Resolves when stdout contains `text` (the n-th time). */
  printed(text: string, times?: number, timeout?: number): Promise<void>;
}

const children: ChildProcess[] = [];
/** Kills every process cli() started and its group: each CLI test file runs it afterEach. */
export const stopChildren = (): Promise<void> => killAll(children.splice(0));

export function cli(
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
  const [bin, ...pre] = RUNTIMES[runtime]();
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

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Whether a process with this pid runs (a zombie waiting to be reaped does not count). */
export function alive(pid: number): boolean {
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
export async function gone(pid: number, timeout = 2_000): Promise<boolean> {
  const end = performance.now() + timeout;
  while (alive(pid)) {
    if (performance.now() > end) return false;
    await new Promise((r) => setTimeout(r, 10));
  }
  return true;
}

/** Runs `leasehold <args> -- sh -c <script>`. */
export function sh(args: string[], script: string, options?: Parameters<typeof cli>[1]): Run {
  return cli([...args, "--", "sh", "-c", script], options);
}

/** A loopback port nothing listens on (it was free a moment ago): a refused connection. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}
