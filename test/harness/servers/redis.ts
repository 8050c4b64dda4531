// Starts a real redis-server (the Debian package) for the tests: unix socket in a fresh temp
// dir, no TCP listener, no persistence. Installs the package with apt-get when it is missing
// and we run as root; otherwise fails with a message saying how to install it. Never skips.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./listen.ts";
import { connectResp, RedisReplyError } from "./resp.ts";

/** A running redis-server. */
export interface RedisServer {
  /** Path of its unix socket. */
  readonly socket: string;
  /** Its TCP port on 127.0.0.1, when started with one (`port`); 0 when it listens on no TCP port. */
  readonly port: number;
  /** The server's version, such as "7.0.15". */
  readonly version: string;
  /** Stops the server (SIGTERM, then SIGKILL after 5 s) and removes its temp dir. Idempotent. */
  stop(): Promise<void>;
}

function redisVersion(): string | null {
  const r = spawnSync("redis-server", ["--version"], { encoding: "utf8" });
  if (r.error || r.status !== 0) return null;
  return /v=(\S+)/.exec(r.stdout)?.[1] ?? "unknown";
}

function apt(args: string[]): boolean {
  const r = spawnSync("apt-get", args, {
    stdio: ["ignore", "ignore", "inherit"],
    env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
  });
  return !r.error && r.status === 0;
}

let installed: string | null = null;

/** Returns the redis-server version, installing the Debian package first when needed and possible. */
export function ensureRedis(): string {
  installed ??= redisVersion();
  if (installed) return installed;
  const howTo =
    "install it with `sudo apt-get install redis-server` (Debian/Ubuntu) or put redis-server on PATH";
  if (process.getuid?.() !== 0) throw new Error(`redis-server is not on PATH and we are not root: ${howTo}`);
  console.error("[test] redis-server not found: installing the Debian package with apt-get");
  // Debian may try to start the packaged service; "--no-install-recommends" keeps the install small.
  const install = ["install", "-y", "--no-install-recommends", "redis-server"];
  if (!apt(install)) {
    if (!apt(["update"]) || !apt(install))
      throw new Error(`apt-get could not install redis-server: ${howTo}`);
  }
  installed = redisVersion();
  if (!installed) throw new Error(`redis-server is still not runnable after apt-get install: ${howTo}`);
  return installed;
}

async function waitForPing(
  socket: string,
  child: ChildProcess,
  deadline: number,
  log: () => string,
): Promise<void> {
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(
        `redis-server exited early (${child.exitCode ?? child.signalCode}): ${log() || "no log"}`,
      );
    try {
      const conn = await connectResp(socket);
      try {
        const reply = await conn.send(["PING"]);
        if (reply && typeof reply === "object" && "text" in reply && reply.text === "PONG") return;
        // With --requirepass it answers, but only NOAUTH: up all the same.
        if (reply instanceof RedisReplyError && reply.message.startsWith("NOAUTH")) return;
      } finally {
        conn.close();
      }
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error("redis-server did not answer PING within 10 s");
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** How to start a redis-server: by default a unix socket only. */
export interface RedisStart {
  /** Also listen on this TCP port of 127.0.0.1 (see `freePort`). */
  port?: number;
  /** Further arguments, such as `["--cluster-enabled", "yes"]`. */
  args?: string[];
  /** The data dir to use (kept on stop); default a fresh temp dir, removed on stop. */
  dir?: string;
}

/**
 * {@link startRedis} on a free TCP port, and `args(...)` with any further ports it asks for
 * (`more()`, as a cluster's bus port): started again on fresh ports, up to 3 times, when it exits
 * at start, as when another process took a port between freePort() and its bind (a clean-clone
 * run saw a cluster node exit 1 so).
 */
export async function startRedisOnFreePort(
  args: (more: () => Promise<number>) => Promise<string[]> | string[] = () => [],
): Promise<RedisServer> {
  let last: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await startRedis({ port: await freePort(), args: await args(freePort) });
    } catch (error) {
      last = error;
      if (!/exited early/.test(String(error))) throw error;
    }
  }
  throw last;
}

/** Starts a fresh redis-server on a unix socket in a new temp dir and waits until it answers PING. */
export async function startRedis(start: RedisStart = {}): Promise<RedisServer> {
  const version = ensureRedis();
  const dir = start.dir ?? mkdtempSync(join(tmpdir(), "leasehold-redis-"));
  const socket = join(dir, "redis.sock");
  const child = spawn(
    "redis-server",
    [
      "--port",
      String(start.port ?? 0),
      "--bind",
      "127.0.0.1",
      "--unixsocket",
      socket,
      "--unixsocketperm",
      "700",
      "--save",
      "",
      "--appendonly",
      "no",
      "--daemonize",
      "no",
      "--dir",
      dir,
      "--loglevel",
      "warning",
      ...(start.args ?? []),
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  // Its log (warnings only), the last lines: why it exited, if it does at start.
  let log = "";
  child.stdout?.on("data", (d) => {
    log = (log + d).slice(-1_000);
  });
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);
  let stopped: Promise<void> | undefined;
  const stop = () => {
    stopped ??= (async () => {
      process.off("exit", killOnExit);
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise<void>((r) => child.once("exit", () => r()));
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
        await exited;
        clearTimeout(timer);
      }
      if (!start.dir) rmSync(dir, { recursive: true, force: true });
    })();
    return stopped;
  };
  try {
    await waitForPing(socket, child, Date.now() + 10_000, () => log.trim().split("\n").slice(-3).join(" | "));
  } catch (error) {
    await stop();
    throw error;
  }
  return { socket, port: start.port ?? 0, version, stop };
}
