/**
 * The watchdog: a small process between `leasehold` and the command it runs, so that the command
 * is stopped before its lease can expire on the backend whatever happens to `leasehold` itself
 * (killed, frozen, crashed). It starts the command in its own process group and holds the lease's
 * local deadline, which only `leasehold`'s heartbeats move forward. It stops the group (SIGTERM,
 * then SIGKILL after the grace period) when that deadline passes or when the IPC channel to
 * `leasehold` closes, and reports the command's exit and the moment its whole group is gone.
 *
 * `leasehold` runs it as a second copy of itself (`leasehold __watchdog`, same runtime); the two
 * talk over Node's IPC channel, which Node, Bun and Deno all provide.
 *
 * @module
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { constants } from "node:os";
import process from "node:process";

/** Messages from `leasehold` to the watchdog. */
export type ToWatchdog =
  /** Start the command; stop it `deadline` ms from now unless a heartbeat moves that. */
  | { t: "start"; argv: string[]; grace: number; deadline: number }
  /** A heartbeat: the lease's local deadline is now `deadline` ms from now. */
  | { t: "deadline"; deadline: number }
  /** Send this signal to the command's process group. */
  | { t: "signal"; signal: NodeJS.Signals }
  /** Stop the group: SIGTERM now, SIGKILL after the grace period. */
  | { t: "stop" };

/** Messages from the watchdog to `leasehold`. */
export type FromWatchdog =
  | { t: "started"; pid: number }
  /** The command's own process ended with `status` (126/127 when it could not start). */
  | { t: "exit"; status: number; error?: string }
  /** Every process of the command's group is gone. */
  | { t: "empty" }
  /** The watchdog stopped the group on its own: `why`. */
  | { t: "stopping"; why: string }
  /** The grace period passed: the watchdog sent SIGKILL to what was left of the group. */
  | { t: "killed" };

/** The argument that makes the `leasehold` entry run as the watchdog. */
export const WATCHDOG_ARG = "__watchdog";

/** How the running `leasehold` starts a copy of itself as the watchdog: [program, args]. */
export function watchdogCommand(): [string, string[]] {
  const deno = (globalThis as { Deno?: { execPath(): string; mainModule: string } }).Deno;
  if (deno) return [deno.execPath(), ["run", "--allow-all", "--quiet", deno.mainModule, WATCHDOG_ARG]];
  // Node: the same flags (a loader such as tsx included); Bun: none.
  return [process.execPath, [...process.execArgv, process.argv[1]!, WATCHDOG_ARG]];
}

const FALLBACK_SIGNALS: Record<string, number> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGKILL: 9,
  SIGTERM: 15,
};

/** The shell's status for a process ended by `signal`: 128 + its number. */
export function signalStatus(signal: string): number {
  const table = constants?.signals as Record<string, number> | undefined;
  return 128 + (table?.[signal] ?? FALLBACK_SIGNALS[signal] ?? 0);
}

/**
 * Whether any live process is left in process group `pgid`. A zombie does not count: on Linux
 * the group is read from /proc, because an orphan that exited stays a zombie in its group for as
 * long as nobody reaps it (a container's init may never do it).
 */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return true; // no /proc: trust kill(2)
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after the last ")".
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(pgrp) === pgid && state !== "Z" && state !== "X") return true;
    } catch {
      // The process ended while we looked.
    }
  }
  return false;
}

/** Sends `signal` to process group `pgid`; false when nothing was there to receive it. */
export function killGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/** How often the group is checked for leftovers once the command's own process has exited, in ms. */
export const GROUP_POLL = 50;

/** The watchdog's main: runs until the command's group is gone. */
export function runWatchdog(): void {
  const tell = (message: FromWatchdog): void => {
    try {
      if (process.connected) process.send?.(message);
    } catch {
      // leasehold is gone: nothing to tell.
    }
  };
  // leasehold forwards the signals meant for the command; the watchdog itself only stops on its own terms.
  for (const s of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(s, () => {});
  // Nothing it writes may end it (a closed stderr), and it writes nothing of its own.
  process.stderr.on?.("error", () => {});

  let pgid: number | undefined;
  let grace = 0;
  let deadline = Number.POSITIVE_INFINITY;
  let deadlineTimer: ReturnType<typeof setTimeout> | undefined;
  let stopping = false;

  const stop = (why: string): void => {
    if (stopping || pgid === undefined) return;
    stopping = true;
    tell({ t: "stopping", why });
    killGroup(pgid, "SIGTERM");
    setTimeout(() => {
      if (groupAlive(pgid!)) tell({ t: "killed" });
      killGroup(pgid!, "SIGKILL");
    }, grace);
  };
  const arm = (ms: number): void => {
    deadline = performance.now() + ms;
    clearTimeout(deadlineTimer);
    deadlineTimer = setTimeout(
      function check() {
        if (performance.now() >= deadline)
          stop("the lease's deadline passed without a heartbeat from leasehold");
        else deadlineTimer = setTimeout(check, deadline - performance.now());
      },
      Math.max(0, ms),
    );
  };
  const finish = (): void => {
    tell({ t: "empty" });
    clearTimeout(deadlineTimer);
    // Let the message leave, then end: nothing is left to guard.
    setTimeout(() => process.exit(0), 20);
  };
  const watchGroup = (): void => {
    if (pgid !== undefined && groupAlive(pgid)) setTimeout(watchGroup, GROUP_POLL);
    else finish();
  };

  process.on("disconnect", () => {
    // leasehold died (or closed the channel): it cannot renew, so the command must go now.
    if (pgid === undefined) process.exit(0);
    // Once the group is gone, watchGroup ends the watchdog.
    stop("leasehold is gone");
  });

  process.on("message", (raw: unknown) => {
    const m = raw as ToWatchdog;
    if (m.t === "start" && pgid === undefined) {
      grace = m.grace;
      const env = { ...process.env };
      for (const k of Object.keys(env)) if (/^(NODE|BUN|DENO)_CHANNEL/.test(k)) delete env[k];
      let child: ReturnType<typeof spawn>;
      try {
        // Its own process group (and session), so that a stop reaches what the command starts too.
        child = spawn(m.argv[0]!, m.argv.slice(1), { stdio: "inherit", env, detached: true });
      } catch (error) {
        tell({ t: "exit", status: 126, error: (error as Error).message });
        return finish();
      }
      child.once("error", (error: NodeJS.ErrnoException) => {
        if (child.pid !== undefined && error.code !== "ENOENT") return; // a failed kill, not a failed start
        tell({
          t: "exit",
          status: error.code === "ENOENT" ? 127 : 126,
          error: error.code === "ENOENT" ? "command not found" : error.message,
        });
        finish();
      });
      if (child.pid === undefined) return;
      pgid = child.pid;
      arm(m.deadline);
      tell({ t: "started", pid: child.pid });
      child.once("exit", (code, signal) => {
        tell({ t: "exit", status: code ?? signalStatus(signal ?? "SIGTERM") });
        watchGroup();
      });
    } else if (m.t === "deadline") {
      if (!stopping) arm(m.deadline);
    } else if (m.t === "signal") {
      if (pgid !== undefined) killGroup(pgid, m.signal);
    } else if (m.t === "stop") {
      stop("leasehold asked");
    }
  });
}
