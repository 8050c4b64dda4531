// Child processes started by tests: every one is killed by the test that started it.
import type { ChildProcess } from "node:child_process";

/** SIGKILLs every child still running and resolves once all of them have exited. */
export function killAll(children: Iterable<ChildProcess>): Promise<void> {
  return Promise.all(
    [...children].map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once("exit", () => resolve());
          child.kill("SIGKILL");
        }),
    ),
  ).then(() => {});
}

/**
 * Waits for every server of `starting`; when one failed to start, stops those that started and
 * rejects with the first failure, so that nothing is left running.
 */
export async function startedAll<T extends { stop(): unknown }>(starting: Promise<T>[]): Promise<T[]> {
  const started = await Promise.allSettled(starting);
  const servers = started.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  const failed = started.find((r) => r.status === "rejected");
  if (!failed) return servers;
  await Promise.all(servers.map((s) => s.stop()));
  throw failed.reason;
}
