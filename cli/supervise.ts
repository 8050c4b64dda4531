// Running a command under the lease: in its own process group, beside a watchdog process that
// stops it when leasehold cannot (see watchdog.ts), with signals forwarded.
import { spawn } from "node:child_process";
import process from "node:process";
import type { Lease } from "../src/lease.ts";
import { now, sleep, within } from "../src/time.ts";
import { EXIT } from "./help.ts";
import { messageOf, say } from "./output.ts";
import {
  type FromWatchdog,
  GROUP_POLL,
  groupAlive,
  killGroup,
  signalStatus,
  type ToWatchdog,
  watchdogCommand,
} from "./watchdog.ts";

/** The signals leasehold forwards to the command. */
const FORWARDED = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
export type Forwarded = (typeof FORWARDED)[number];

/** Milliseconds between SIGKILL and the lock's earliest expiry, for the kill to land. */
export const killSlack = (ttl: number) => Math.min(250, Math.floor(ttl / 10));

/** A command run under the watchdog (see cli/watchdog.ts), in its own process group. */
export interface Command {
  /** The command's own exit status: 128+n for signal n, 126/127 when it could not start. */
  exited: Promise<number>;
  /** Resolves once no process of the command's group is left. */
  gone: Promise<void>;
  /** Whether processes of the command's group are still running. */
  running(): boolean;
  /** Sends a signal to the command's whole process group. */
  kill(signal: NodeJS.Signals): void;
  /** SIGTERM to the group, SIGKILL after the grace period; resolves once the group is gone. */
  stop(): Promise<void>;
  /** Whether the stop needed SIGKILL. */
  readonly killed: boolean;
  /** Why the watchdog stopped the command on its own (its deadline passed, leasehold was gone), if it did. */
  readonly stoppedBy: string | undefined;
  /** When the command started (the watchdog said so), on the monotonic clock of src/time.ts. */
  readonly startedAt: number | undefined;
}

/** The command ended on its own with a status (lead: the term ends; exec --once: not recorded). */
export class CommandExited extends Error {
  constructor(readonly status: number) {
    super(`the command exited with status ${status}`);
  }
}

/**
 * Starts `argv` under a watchdog process that holds `lease`'s deadline: heartbeats from here move
 * it forward while the lease is valid; if they stop (this process killed or frozen) or the IPC
 * channel closes, the watchdog stops the command's group before the lease can expire on the
 * backend. This process also signals the group itself, so a frozen watchdog cannot keep a
 * command alive either. `env`: variables the command gets besides the lease's (childEnv).
 */
export function supervise(
  argv: string[],
  lease: Lease,
  grace: number,
  beat: number,
  env: Record<string, string> = {},
): Command {
  let pgid: number | undefined;
  let startedAt: number | undefined;
  let killed = false;
  let stoppedBy: string | undefined;
  let stopping: Promise<void> | undefined;
  let settleExit: (status: number) => void = () => {};
  let settleGone: () => void = () => {};
  const exited = new Promise<number>((resolve) => (settleExit = resolve));
  const gone = new Promise<void>((resolve) => (settleGone = resolve));
  const [program, args] = watchdogCommand();
  const watchdog = spawn(program, args, {
    stdio: ["inherit", "inherit", "inherit", "ipc"],
    env: { ...childEnv(lease), ...env },
  });
  watchdog.on("error", () => {});
  const send = (message: ToWatchdog): void => {
    try {
      if (watchdog.connected) watchdog.send(message);
    } catch {
      // The watchdog is gone; its exit handler below takes over.
    }
  };
  const heartbeat = (): void => {
    if (lease.valid) send({ t: "deadline", deadline: lease.expiresAt - Date.now() });
  };
  const beats = setInterval(heartbeat, beat);
  /** Polls until the group has no live process left (the watchdog may be frozen and not tell). */
  const untilGone = async (): Promise<void> => {
    while (pgid !== undefined && groupAlive(pgid)) await sleep(GROUP_POLL);
  };
  const done = (): void => {
    clearInterval(beats);
    settleGone();
    if (watchdog.exitCode === null && watchdog.signalCode === null) watchdog.kill("SIGKILL");
  };
  watchdog.on("message", (raw: unknown) => {
    const m = raw as FromWatchdog;
    if (m.t === "started") {
      pgid = m.pid;
      startedAt = now();
    } else if (m.t === "exit") {
      if (m.error) say(`cannot run ${JSON.stringify(argv[0])}: ${m.error}`);
      settleExit(m.status);
    } else if (m.t === "empty") done();
    else if (m.t === "killed") killed = true;
    else if (m.t === "stopping" && m.why !== "leasehold asked") {
      stoppedBy = m.why;
      say(`the watchdog is stopping the command: ${m.why}`);
    }
  });
  watchdog.once("exit", () => {
    // Normal after "empty". Otherwise the watchdog died: nothing guards the command but us.
    if (pgid === undefined) {
      say("the watchdog could not start the command");
      settleExit(EXIT.cannotRun);
      done();
      return;
    }
    if (groupAlive(pgid)) {
      say("the watchdog died: stopping the command");
      killed = true;
      killGroup(pgid, "SIGKILL");
    }
    untilGone().then(() => {
      settleExit(signalStatus("SIGKILL"));
      done();
    });
  });
  send({ t: "start", argv, grace, deadline: lease.expiresAt - Date.now() });
  return {
    exited,
    gone,
    running: () => pgid !== undefined && groupAlive(pgid),
    // Each signal reaches the group once: from here once the command's group is known (so a
    // frozen watchdog cannot hold it back), through the watchdog before that. A shell's trap
    // would run twice for a signal sent twice.
    kill(signal) {
      if (pgid !== undefined) killGroup(pgid, signal);
      else send({ t: "signal", signal });
    },
    stop() {
      stopping ??= (async () => {
        if (pgid !== undefined) killGroup(pgid, "SIGTERM");
        else send({ t: "stop" });
        const waited =
          (await within(
            gone.then(() => true),
            grace,
          )) === true;
        if (!waited && pgid !== undefined && groupAlive(pgid)) {
          killed = true;
          killGroup(pgid, "SIGKILL");
        }
        await Promise.race([gone, untilGone()]);
        done();
      })();
      return stopping;
    },
    get killed() {
      return killed;
    },
    get stoppedBy() {
      return stoppedBy;
    },
    get startedAt() {
      return startedAt;
    },
  };
}

/**
 * Waits for the command to end for good, unless `interrupted` settles first: its own exit, then
 * (as flock(1) does) every process it left in its group, or, with `children` "kill", their stop.
 * Resolves with the command's exit status, or `undefined` when interrupted or when the watchdog
 * stopped the command on its own (`stoppedBy`): that is the lease's end, not the command's,
 * whichever this process heard of first after a freeze (the command's exit or its own lease's
 * timer).
 */
export async function ended(
  command: Command,
  children: "wait" | "kill",
  interrupted: Promise<unknown>,
  keeping: string,
): Promise<number | undefined> {
  const stopped = interrupted.then(() => undefined);
  const status = await Promise.race([command.exited, stopped]);
  if (status === undefined || command.stoppedBy !== undefined) return undefined;
  if (children === "kill") command.stop();
  else if (command.running())
    say(`the command exited (status ${status}); ${keeping} until the processes it left have ended`);
  return (await Promise.race([command.gone.then(() => true), stopped])) ? status : undefined;
}

/** Why the command's lease ended: the signal's reason, or what the watchdog said when it stopped the command first. */
export function whyEnded(command: Command, signal: AbortSignal): string {
  return signal.aborted || command.stoppedBy === undefined
    ? messageOf(signal.reason)
    : `the watchdog stopped the command: ${command.stoppedBy}`;
}

/** Stops the command and describes its status, when the watchdog could tell it: ` (status N)`. */
export async function statusOf(command: Command): Promise<string> {
  await command.stop();
  const status = await within(command.exited, 1_000);
  return status === undefined ? "" : ` (status ${status})`;
}

/** Calls `handler` for SIGINT, SIGTERM and SIGHUP until the returned function is called. */
export function onSignals(handler: (signal: Forwarded) => void): () => void {
  const listeners = FORWARDED.map((s) => [s, () => handler(s)] as const);
  for (const [s, l] of listeners) process.on(s, l);
  return () => {
    for (const [s, l] of listeners) process.off(s, l);
  };
}

export function childEnv(lease: Lease): Record<string, string | undefined> {
  return {
    ...process.env,
    LEASEHOLD_NAME: lease.name,
    LEASEHOLD_OWNER: lease.owner,
    LEASEHOLD_TOKEN: String(lease.token),
    ...("slot" in lease ? { LEASEHOLD_SLOT: String(lease.slot) } : {}),
  };
}
