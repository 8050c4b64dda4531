// leasehold lead: keep a command running while this process leads.
import type { Backend } from "../src/backend.ts";
import { createElection, isLockError } from "../src/index.ts";
import { aborted } from "../src/signals.ts";
import type { Options } from "./args.ts";
import { EXIT } from "./help.ts";
import { backendFailed, misconfigured, mutexFor } from "./mutex.ts";
import { messageOf, retryReporter, say } from "./output.ts";
import { CommandExited, ended, onSignals, statusOf, supervise } from "./supervise.ts";

export async function lead(o: Options, backend: Backend): Promise<number> {
  const { mutex, grace, beat } = mutexFor(o, backend);
  const stop = new AbortController();
  let status = 0;
  const off = onSignals((signal) => {
    if (!stop.signal.aborted) say(`${signal}: stopping`);
    stop.abort();
  });
  const retrying = retryReporter(`campaigning for "${o.name}": the backend failed`);
  try {
    await createElection(mutex).lead(
      async (signal, lease) => {
        say(`leading "${o.name}" (token ${lease.token}): starting the command`);
        const command = supervise(o.argv, lease, grace, beat);
        const status = await ended(command, o.children, aborted(signal), "leading");
        if (status !== undefined) throw new CommandExited(status);
        if (!stop.signal.aborted) say(`lost leadership of "${o.name}": ${messageOf(signal.reason)}`);
        const described = await statusOf(command);
        say(`the command was stopped${command.killed ? " with SIGKILL" : ""}${described}`);
      },
      {
        signal: stop.signal,
        // Keep the lease (it still renews) until the command is gone, so no follower starts early.
        stopTimeout: grace + 1_000,
        onError(error) {
          if (error instanceof CommandExited) {
            say(`${error.message}; leadership released, campaigning again in about ${o.retryDelay} ms`);
          } else if (isLockError(error) && "retryable" in error && error.retryable === false) {
            // Refused credentials, a missing container: waiting will not fix it.
            say(messageOf(error));
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
    return status;
  } finally {
    off();
  }
}
