// leasehold lead: keep a command running while this process leads.
import type { Backend } from "../src/backend.ts";
import { createElection, isLockError } from "../src/index.ts";
import { aborted, linkedSignal } from "../src/signals.ts";
import { jitter, now, sleep } from "../src/time.ts";
import type { Options } from "./args.ts";
import { EXIT } from "./help.ts";
import { backendFailed, describe, misconfigured, mutexFor } from "./mutex.ts";
import { messageOf, retryReporter, say } from "./output.ts";
import { CommandExited, ended, onSignals, statusOf, supervise, whyEnded } from "./supervise.ts";

/** The longest pause before a restart, and the run that counts as stable: this many --restart-delay. */
const RESTART_CAP = 60;

/**
 * Pauses before campaigning again after the command exited on its own: --restart-delay, doubled
 * with each exit in a row up to RESTART_CAP times it, jittered by up to 25 %; a run that lasted at
 * least that cap starts the count over.
 */
function restarts(first: number): (ran: number) => number {
  const cap = first * RESTART_CAP;
  let inRow = 0;
  return (ran) => {
    inRow = ran >= cap ? 1 : inRow + 1;
    return Math.round(jitter(Math.min(cap, first * 2 ** (inRow - 1)), 0.25));
  };
}

export async function lead(o: Options, backend: Backend, label: string): Promise<number> {
  const { mutex, grace, beat } = mutexFor(o, backend);
  const election = createElection(mutex);
  const stop = new AbortController();
  let status = 0;
  const off = onSignals((signal) => {
    if (!stop.signal.aborted) say(`${signal}: stopping`);
    stop.abort();
  });
  const retrying = retryReporter(`campaigning for "${o.name}": the backend failed`);
  const delay = restarts(o.restartDelay);
  try {
    // One election loop per run of the command: when the command exits on its own, the loop ends
    // (the lease is released, so a standby may lead), and this one campaigns again after the pause.
    while (!stop.signal.aborted) {
      const term = new AbortController();
      const both = linkedSignal([stop.signal, term.signal]);
      let exited: { error: CommandExited; ran: number } | undefined;
      try {
        await election.lead(
          async (signal, lease) => {
            say(`leading "${o.name}" (token ${lease.token}): starting the command`);
            const command = supervise(o.argv, lease, grace, beat);
            const status = await ended(command, o.children, aborted(signal), "leading");
            if (status !== undefined) {
              // Timed from the command's start, not its watchdog's (seconds on a loaded machine).
              exited = { error: new CommandExited(status), ran: now() - (command.startedAt ?? now()) };
              term.abort();
              return;
            }
            if (!stop.signal.aborted) say(`lost leadership of "${o.name}": ${whyEnded(command, signal)}`);
            const described = await statusOf(command);
            say(`the command was stopped${command.killed ? " with SIGKILL" : ""}${described}`);
          },
          {
            signal: both.signal,
            // Keep the lease (it still renews) until the command is gone, so no follower starts early.
            stopTimeout: grace + 1_000,
            onError(error) {
              if (isLockError(error) && "retryable" in error && error.retryable === false) {
                // Refused credentials, a missing container: waiting will not fix it.
                say(`${describe(error)} (${label})`);
                status = misconfigured(error) ? EXIT.usage : EXIT.unavailable;
                stop.abort();
              } else if (backendFailed(error)) {
                retrying(error);
              } else {
                say(messageOf(error));
              }
            },
          },
        );
      } finally {
        both.done();
      }
      if (exited === undefined || stop.signal.aborted) break;
      const pause = delay(exited.ran);
      say(
        `${exited.error.message} after ${Math.round(exited.ran)} ms; leadership released, campaigning again in ${pause} ms`,
      );
      await sleep(pause, stop.signal).catch(() => {});
    }
    return status;
  } finally {
    off();
  }
}
