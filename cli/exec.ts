// leasehold exec: run a command while holding the lock, like flock(1) across hosts.
import type { Backend } from "../src/backend.ts";
import { isLockError, type Lease } from "../src/index.ts";
import { aborted } from "../src/signals.ts";
import type { Options } from "./args.ts";
import { EXIT } from "./help.ts";
import { backendFailed, execLockFor } from "./mutex.ts";
import { messageOf, retryReporter, say } from "./output.ts";
import { type Command, ended, type Forwarded, onSignals, statusOf, supervise } from "./supervise.ts";
import { signalStatus } from "./watchdog.ts";

export async function exec(o: Options, backend: Backend): Promise<number> {
  const { mutex, grace, beat } = execLockFor(o, backend);
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
  try {
    let lease: Lease | null;
    try {
      lease = o.wait
        ? await mutex.acquire({
            signal: waiting.signal,
            onError: retryReporter(`waiting for "${o.name}": the backend failed`),
            ...(o.timeout === undefined ? {} : { timeout: o.timeout }),
          })
        : await mutex.tryAcquire({ signal: waiting.signal });
    } catch (error) {
      if (received) return signalStatus(received);
      if (isLockError(error) && error.code === "ERR_LOCK_TIMEOUT") {
        // The wait ended while the backend was failing or silent: that is not "taken".
        if (backendFailed(error.cause)) {
          say(`could not reach the backend within ${o.timeout} ms: ${messageOf(error.cause)}`);
          return EXIT.unavailable;
        }
        if (!o.quiet) say(`"${o.name}" is still taken after ${o.timeout} ms; not running the command`);
        return EXIT.taken;
      }
      throw error;
    }
    if (!lease) {
      if (o.quiet) return EXIT.taken;
      const holder = await mutex.holder().catch(() => null);
      say(
        `"${o.name}" is taken${holder ? ` by ${holder.owner} (token ${holder.token})` : ""}; not running the command`,
      );
      return EXIT.taken;
    }
    if (received) {
      await lease.release().catch(() => {});
      return signalStatus(received);
    }
    const running = supervise(o.argv, lease, grace, beat);
    command = running;
    const status = await ended(running, o.children, aborted(lease.signal), "keeping the lock");
    if (status !== undefined) {
      await lease
        .release()
        .catch((error: unknown) => say(`could not release "${o.name}": ${messageOf(error)}`));
      return status;
    }
    say(
      `lost the lock "${o.name}" (token ${lease.token}) while the command ran: ${messageOf(lease.signal.reason)}`,
    );
    say("stopping the command: SIGTERM" + (grace > 0 ? `, SIGKILL after ${grace} ms` : ""));
    const stopped = await statusOf(running);
    say(`the command was stopped${running.killed ? " with SIGKILL" : ""}${stopped}; exiting ${EXIT.lost}`);
    await lease.release().catch(() => {});
    return EXIT.lost;
  } finally {
    off();
    clearTimeout(escalation);
  }
}
