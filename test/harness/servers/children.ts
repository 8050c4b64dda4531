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
