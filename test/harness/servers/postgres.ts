// Starts a real PostgreSQL server for the tests: a fresh data dir (initdb) in a temp dir, a
// random free loopback port, password authentication (scram-sha-256 unless asked) for the user "postgres".
// Finds the server binaries on PATH or in /usr/lib/postgresql/<version>/bin, and installs the
// Debian package with apt-get when they are missing and we run as root; otherwise fails with a
// message saying how to install them. postgres refuses to run as root: as root, initdb and the
// server run as the "postgres" user (the Debian package creates it). Never skips.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import pg from "pg";
import { freePort } from "./listen.ts";

/** A running PostgreSQL server. */
export interface PostgresServer {
  readonly port: number;
  readonly user: string;
  /** The user's password: register it as a secret in tests. */
  readonly password: string;
  /** `postgres://postgres:<password>@127.0.0.1:<port>/postgres`. */
  readonly url: string;
  /** The server's major version, such as "15". */
  readonly version: string;
  /**
   * Stops the server, by default with a fast shutdown (SIGINT); `"immediate"` (SIGQUIT) stops it
   * as a crash does, and the next start recovers from the WAL. SIGKILL after 10 s. It can be
   * started again with `start`.
   */
  halt(mode?: "fast" | "immediate"): Promise<void>;
  /** Starts the stopped server again on the same port and data dir. */
  start(): Promise<void>;
  /** Stops the server for good and removes its data dir. Idempotent. */
  stop(): Promise<void>;
}

/** The directory holding initdb and postgres: PATH first, then the newest /usr/lib/postgresql/N/bin. */
function findBinDir(): string | null {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir && existsSync(join(dir, "initdb")) && existsSync(join(dir, "postgres"))) return dir;
  }
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((v) => /^\d+$/.test(v) && existsSync(join(root, v, "bin", "initdb")))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? join(root, versions[0], "bin") : null;
}

function apt(args: string[]): boolean {
  const r = spawnSync("apt-get", args, {
    stdio: ["ignore", "ignore", "inherit"],
    env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
  });
  return !r.error && r.status === 0;
}

let binDir: string | null = null;

/** Returns the server binaries' directory, installing the Debian package first when needed and possible. */
export function ensurePostgres(): string {
  binDir ??= findBinDir();
  if (binDir) return binDir;
  const howTo =
    "install it with `sudo apt-get install postgresql` (Debian/Ubuntu) or put initdb and postgres on PATH";
  if (process.getuid?.() !== 0)
    throw new Error(`PostgreSQL (initdb, postgres) is not installed and we are not root: ${howTo}`);
  console.error("[test] PostgreSQL not found: installing the Debian package with apt-get");
  const install = ["install", "-y", "--no-install-recommends", "postgresql"];
  if (!apt(install)) {
    if (!apt(["update"]) || !apt(install)) throw new Error(`apt-get could not install postgresql: ${howTo}`);
  }
  binDir = findBinDir();
  if (!binDir) throw new Error(`PostgreSQL is still not found after apt-get install: ${howTo}`);
  return binDir;
}

/** As root, the uid and gid of the "postgres" user to run as; otherwise nothing (run as ourselves). */
function runAs(): { uid: number; gid: number } | Record<string, never> {
  if (process.getuid?.() !== 0) return {};
  const id = (flag: string) => spawnSync("id", [flag, "postgres"], { encoding: "utf8" });
  const [u, g] = [id("-u"), id("-g")];
  if (u.status !== 0 || g.status !== 0)
    throw new Error(
      "we run as root and there is no 'postgres' user to run PostgreSQL as (postgres refuses root)",
    );
  return { uid: Number(u.stdout.trim()), gid: Number(g.stdout.trim()) };
}

async function waitReady(url: string, child: ChildProcess, deadline: number): Promise<void> {
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`postgres exited early (${child.exitCode ?? child.signalCode})`);
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
    try {
      await client.connect();
      await client.query("SELECT 1");
      return;
    } catch {
      // starting up
    } finally {
      await client.end().catch(() => {});
    }
    if (Date.now() > deadline) throw new Error("postgres did not accept connections within 30 s");
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * initdb in a fresh temp dir, then starts the server on a free loopback port and waits until it
 * answers. `auth`: the pg_hba method (default scram-sha-256; md5 and password, cleartext, for
 * tests of clients that speak them).
 */
export async function startPostgres({
  auth = "scram-sha-256",
}: {
  auth?: "scram-sha-256" | "md5" | "password";
} = {}): Promise<PostgresServer> {
  const bin = ensurePostgres();
  const version =
    /(\d+)/.exec(spawnSync(join(bin, "postgres"), ["--version"], { encoding: "utf8" }).stdout)?.[1] ?? "?";
  const as = runAs();
  const dir = mkdtempSync(join(tmpdir(), "leasehold-postgres-"));
  const data = join(dir, "data");
  const password = `pg-${crypto.randomUUID()}`;
  const pwfile = join(dir, "pwfile");
  writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
  if ("uid" in as) {
    chmodSync(dir, 0o700);
    chownSync(dir, as.uid, as.gid);
    chownSync(pwfile, as.uid, as.gid);
  }
  const init = spawnSync(
    join(bin, "initdb"),
    ["-D", data, "-U", "postgres", `--auth=${auth}`, `--pwfile=${pwfile}`, "-E", "UTF8", "--no-sync"],
    { ...as, encoding: "utf8", cwd: dir },
  );
  rmSync(pwfile, { force: true });
  if (init.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed (${init.status ?? init.error}): ${init.stderr}`);
  }
  const port = await freePort();
  const url = `postgres://postgres:${password}@127.0.0.1:${port}/postgres`;
  let child: ChildProcess | undefined;
  const killOnExit = () => child?.kill("SIGKILL");
  process.once("exit", killOnExit);

  const start = async () => {
    const c = spawn(
      join(bin, "postgres"),
      [
        "-D",
        data,
        "-p",
        String(port),
        "-k",
        dir,
        "-c",
        "listen_addresses=127.0.0.1",
        "-c",
        "fsync=off",
        "-c",
        "full_page_writes=off",
        "-c",
        "max_connections=200",
      ],
      { ...as, cwd: dir, stdio: ["ignore", "ignore", "pipe"] },
    );
    child = c;
    const log: string[] = [];
    c.stderr?.setEncoding("utf8").on("data", (chunk: string) => log.push(chunk));
    try {
      await waitReady(url, c, Date.now() + 30_000);
    } catch (error) {
      await halt();
      throw new Error(`${(error as Error).message}: ${log.join("").slice(-2_000)}`);
    }
  };
  const halt = async (mode: "fast" | "immediate" = "fast") => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise<void>((r) => c.once("exit", () => r()));
    c.kill(mode === "fast" ? "SIGINT" : "SIGQUIT");
    const timer = setTimeout(() => c.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  };
  let stopped: Promise<void> | undefined;
  const stop = () => {
    stopped ??= (async () => {
      await halt("fast");
      process.off("exit", killOnExit);
      rmSync(dir, { recursive: true, force: true });
    })();
    return stopped;
  };
  try {
    await start();
  } catch (error) {
    await stop();
    throw error;
  }
  return { port, user: "postgres", password, url, version, halt, start, stop };
}
