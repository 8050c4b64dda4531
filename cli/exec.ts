// leasehold exec: run a command while holding the lock, like flock(1) across hosts; with --once,
// once per fire across hosts (runOnce).
import type { Backend } from "../src/backend.ts";
import {
  BackendError,
  capabilities,
  createMutex,
  isLockError,
  type Lease,
  LeaseLostError,
  nearestTick,
  runOnce,
} from "../src/index.ts";
import { fireKey } from "../src/once.ts";
import { aborted } from "../src/signals.ts";
import type { Once, Options } from "./args.ts";
import { EXIT } from "./help.ts";
import { backendFailed, execLockFor, mutexFor } from "./mutex.ts";
import { messageOf, retryReporter, say, UsageError } from "./output.ts";
import {
  type Command,
  CommandExited,
  ended,
  type Forwarded,
  onSignals,
  statusOf,
  supervise,
  whyEnded,
} from "./supervise.ts";
import { signalStatus } from "./watchdog.ts";

export function exec(o: Options, backend: Backend): Promise<number> {
  return o.once ? once(o, o.once, backend) : locked(o, backend);
}

/** exec without --once: one attempt (or a wait), the command under the lease, then the release. */
async function locked(o: Options, backend: Backend): Promise<number> {
  if (o.shared && !capabilities(backend).shared)
    throw new UsageError(
      `--shared: the ${backend.name} backend cannot hold shared leases (docs/readers-writers.md lists those that can); leave out --shared, or use one of those`,
    );
  const { mutex, grace, beat } = execLockFor(o, backend);
  const mode = o.shared ? ({ mode: "shared" } as const) : {};
  const run = running(o, grace, beat, () => mutex.holder());
  try {
    let lease: Lease | null;
    try {
      lease = o.wait
        ? await mutex.acquire({
            ...mode,
            signal: run.waiting,
            onError: retryReporter(`waiting for "${o.name}": the backend failed`),
            ...(o.timeout === undefined ? {} : { timeout: o.timeout }),
          })
        : await mutex.tryAcquire({ ...mode, signal: run.waiting });
    } catch (error) {
      return run.interrupted() ?? timedOut(o, error, `"${o.name}" is still taken`);
    }
    if (!lease) {
      if (o.quiet) return EXIT.taken;
      const holder = await mutex.holder().catch(() => null);
      // Held shared: a shared attempt was refused because an exclusive one waits for the readers.
      const readers = holder && "readers" in holder ? holder.readers : undefined;
      const why = !readers
        ? by(holder)
        : ` by ${readers === 1 ? "1 shared holder" : `${readers} shared holders`}${o.shared ? ", and an exclusive holder waits for them" : ""}`;
      say(`"${o.name}" is taken${why}; not running the command`);
      return EXIT.taken;
    }
    const status = await run.command(lease);
    await lease
      .release()
      .catch((error: unknown) => say(`could not release "${o.name}": ${messageOf(error)}`));
    return status;
  } finally {
    run.close();
  }
}

/**
 * exec --once: runOnce on the fire, the command under its lease. The command's exit 0 records the
 * fire as done; any other status (or a lost lease) records nothing, and is the exit status.
 */
async function once(o: Options, options: Once, backend: Backend): Promise<number> {
  const { mutex, grace, beat } = mutexFor(o, backend);
  const fire = options.fire ?? String(nearestTick(options.every!));
  const what = `fire ${fire}${options.every === undefined ? "" : ` (${new Date(Number(fire)).toISOString()})`} of "${o.name}"`;
  const run = running(o, grace, beat, async () =>
    createMutex(backend, { name: await fireKey(o.name, fire) }).holder(),
  );
  let succeeded = false;
  try {
    const result = await runOnce(
      mutex,
      fire,
      async (_signal, lease) => {
        const status = await run.command(lease, { LEASEHOLD_NAME: o.name, LEASEHOLD_FIRE: fire });
        if (status !== 0) throw new CommandExited(status);
        succeeded = true;
        return lease.token;
      },
      {
        standby: options.standby,
        signal: run.waiting,
        // A standby's retried failures, reported as exec --wait's are (else the library prints them).
        onError: retryReporter(`waiting for ${what}: the backend failed`),
        ...(options.retain === undefined ? {} : { retain: options.retain }),
        ...(o.timeout === undefined ? {} : { timeout: o.timeout }),
      },
    );
    if (result.ran) return 0;
    if (result.reason === "done") {
      if (!o.quiet) say(`${what} is already done${by(result.by)}; not running the command`);
      return 0;
    }
    if (!o.quiet) {
      const holder = await createMutex(backend, { name: await fireKey(o.name, fire) })
        .holder()
        .catch(() => null);
      say(`${what} is running${holder ? ` elsewhere${by(holder)}` : ""}; not running the command`);
    }
    return EXIT.taken;
  } catch (error) {
    if (error instanceof CommandExited) return error.status;
    if (succeeded) {
      // The command succeeded, but its fire is not recorded as done: it may run again.
      say(
        `the command succeeded but ${what} could not be recorded as done, so it may run again: ${messageOf(error)}`,
      );
      // A record that kept failing until the lease's deadline is the backend's failure (69).
      return error instanceof LeaseLostError && !(error.cause instanceof BackendError)
        ? EXIT.lost
        : EXIT.unavailable;
    }
    if (
      (error instanceof TypeError || error instanceof RangeError) &&
      error.message.startsWith("[leasehold] runOnce: ")
    ) {
      // An argument runOnce refused (--fire, --retain), or a backend without `complete`.
      const text = error.message.slice("[leasehold] runOnce: ".length);
      throw new UsageError(
        text
          .replace(/^fire must be .*? or a string of/, "--fire must be a string of")
          .replace(/^retain\b/, "--retain")
          .replace(/^the /, "--once: the "),
      );
    }
    return run.interrupted() ?? timedOut(o, error, `${what} is still running elsewhere`);
  } finally {
    run.close();
  }
}

/** ` by OWNER (token T)` (the token only for one holder), or nothing without a holder. */
const by = (holder: { owner: string; token?: number } | null | undefined): string =>
  holder ? ` by ${holder.owner}${holder.token === undefined ? "" : ` (token ${holder.token})`}` : "";

/** The exit status of a wait that ended with `error`: 69 while the backend failed, 75 at --timeout; else rethrown. */
function timedOut(o: Options, error: unknown, taken: string): number {
  if (!(isLockError(error) && error.code === "ERR_LOCK_TIMEOUT")) throw error;
  // --timeout 0 is one attempt, not a wait: no "after 0 ms".
  const waited = o.timeout ? ` within ${o.timeout} ms` : "";
  // The wait ended while the backend was failing or silent: that is not "taken".
  if (backendFailed(error.cause)) {
    say(`could not reach the backend${waited}: ${messageOf(error.cause)}`);
    return EXIT.unavailable;
  }
  if (!o.quiet)
    say(
      `${taken}${o.timeout ? ` after ${o.timeout} ms` : " (--timeout 0: one attempt)"}; not running the command`,
    );
  return EXIT.taken;
}

/**
 * What runs the command under a lease, with SIGINT, SIGTERM and SIGHUP forwarded to it (SIGKILL
 * after the grace period); before it starts, a signal aborts `waiting` (taking the lock).
 */
function running(
  o: Options,
  grace: number,
  beat: number,
  holder: () => Promise<{ owner: string; token?: number } | null>,
) {
  let received: Forwarded | undefined;
  let command: Command | undefined;
  const waiting = new AbortController();
  let escalation: ReturnType<typeof setTimeout> | undefined;
  const off = onSignals((signal) => {
    received ??= signal;
    if (!command) return waiting.abort();
    command.kill(signal);
    escalation ??= setTimeout(() => command?.kill("SIGKILL"), grace);
  });
  return {
    waiting: waiting.signal,
    /** The status for a signal received while the lock was being taken, if one was. */
    interrupted: (): number | undefined => (received ? signalStatus(received) : undefined),
    /**
     * Runs the command under `lease`: its status once it (and, per --children, what it left)
     * ended; 76 once it was stopped after the lease was lost; a signal's status when one came
     * before it started.
     */
    async command(lease: Lease, env?: Record<string, string>): Promise<number> {
      if (received) return signalStatus(received);
      const run = supervise(o.argv, lease, grace, beat, env);
      command = run;
      const status = await ended(run, o.children, aborted(lease.signal), "keeping the lock");
      if (status !== undefined) return status;
      say(
        `lost the lock "${lease.name}" (token ${lease.token}) while the command ran: ${whyEnded(run, lease.signal)}`,
      );
      say("stopping the command: SIGTERM" + (grace > 0 ? `, SIGKILL after ${grace} ms` : ""));
      const stopped = await statusOf(run);
      // What the backend says now, so a lock that expired or was deleted is not taken for
      // someone else's (the renewal only learns that the lease is no longer this process's).
      const now = await holder().then(
        (h) => (h ? `held${by(h)}` : "free"),
        () => undefined,
      );
      if (now !== undefined) say(`"${lease.name}" is now ${now} on the backend`);
      say(`the command was stopped${run.killed ? " with SIGKILL" : ""}${stopped}; exiting ${EXIT.lost}`);
      return EXIT.lost;
    },
    close(): void {
      off();
      clearTimeout(escalation);
    },
  };
}
