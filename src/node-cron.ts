/**
 * node-cron 4.6's run coordinator on a leasehold mutex: each fire of a `distributed` node-cron
 * task runs once across every process that schedules it, with {@link runOnce}'s guarantees (the
 * fire runs under a renewed, fenced lease; it is recorded as done only when the task succeeded;
 * a crash or a failed task leaves it runnable). This module does not import node-cron: it fits its
 * `RunCoordinator` interface (`shouldRun(key, ttlMs)`, `onComplete(key)`) by shape.
 *
 * node-cron calls `onComplete` after a run whether the task succeeded or threw, so the coordinator
 * alone cannot tell a failed fire from a completed one: wrap the task with {@link
 * OnceCoordinator.task}, which also hands it the fire's lease.
 *
 * @example Every instance of the app schedules the same task; each fire runs on one of them
 * ```ts
 * import cron from "node-cron";
 * import { createMutex } from "leasehold";
 * import { onceCoordinator } from "leasehold/node-cron";
 * import { fromEnv } from "leasehold/upstash";
 *
 * declare function sendDigest(signal: AbortSignal, fence: number): Promise<void>; // your job
 *
 * const once = onceCoordinator(createMutex(fromEnv(), { name: "cron" }));
 * cron.schedule(
 *   "0 * * * *",
 *   once.task((_context, lease) => sendDigest(lease.signal, lease.token)),
 *   { name: "hourly-digest", distributed: true, runCoordinator: once },
 * );
 * ```
 *
 * @module
 */
import { check, fail } from "./errors.ts";
import type { Lease } from "./lease.ts";
import type { Mutex } from "./mutex.ts";
import { type OnceOptions, runOnce } from "./once.ts";
import { cores, kind, optionsOf } from "./options.ts";

/** The fields of node-cron's task context (`TaskContext`) the coordinator reads. */
export interface CronContext {
  /** The fire time (node-cron's slot), the same on every instance. */
  readonly date: Date;
  /** The scheduled task; its `name` is the first part of node-cron's coordination key. */
  readonly task?: { readonly name?: string } | undefined;
}

/** Options of {@link onceCoordinator}: {@link runOnce}'s, for every fire. */
export type CoordinatorOptions = Omit<OnceOptions, "signal">;

/**
 * A node-cron `RunCoordinator` (pass it as a task's `runCoordinator`, or to `setRunCoordinator`)
 * that runs each fire once across processes, and the wrapper its tasks need.
 */
export interface OnceCoordinator {
  /**
   * node-cron asks, before a fire of a `distributed` task, whether this process runs it. Starts
   * {@link runOnce} on the fire (the mutex's name and node-cron's key `<task name>:<ISO time>`)
   * and answers `true` once this process holds the fire's lease, `false` when the fire is done or
   * running elsewhere. Rejects when the store fails (node-cron then skips the fire here and logs
   * it). node-cron's `ttlMs` (the task's `distributedLease`) is not used: the lease has the
   * mutex's ttl and is renewed while the task runs.
   */
  shouldRun(key: string, ttlMs?: number): Promise<boolean>;
  /**
   * node-cron tells that a fire this process ran has ended (it does so whether the task succeeded
   * or threw). Resolves once the fire is recorded as done (the task succeeded) or its lease
   * released (the task threw: the fire stays runnable). Rejects when the record could not be
   * written (the lease was lost: the fire may run again), and when the task was not wrapped with
   * {@link OnceCoordinator.task} (nothing is recorded then); node-cron logs the error.
   */
  onComplete(key: string): Promise<void>;
  /**
   * Wraps a node-cron task function so that the coordinator learns whether the fire succeeded, and
   * the task gets the fire's lease: `lease.signal` aborts when it is lost, `lease.token` fences its
   * writes. The wrapped task resolves what `fn` resolves and rethrows what it throws (node-cron's
   * `execution:finished` and `execution:failed` see them). Called outside a fire this
   * coordinator let run (a task not `distributed` or with another coordinator, `task.execute()`),
   * it throws a TypeError and `fn` does not run.
   */
  task<C extends CronContext, T>(
    fn: (context: C, lease: Lease) => T | Promise<T>,
  ): (context: C) => Promise<Awaited<T>>;
  /**
   * Gives back every fire this process holds whose task has not started (nothing is recorded: the
   * fire stays runnable elsewhere), and resolves once every fire it holds has ended. Call it after
   * node-cron's `task.stop()` or `task.destroy()`: a stop during a task's random start delay
   * (`maxRandomDelay`) ends node-cron's wait without running the task or calling `onComplete`, and
   * the fire's lease would otherwise be renewed for as long as the process lives.
   */
  close(): Promise<void>;
}

/** A fire this process holds the lease of, from `shouldRun` to `onComplete`. */
interface Held {
  lease: Lease;
  /** Whether the wrapped task ran. */
  started: boolean;
  /** The task's own error, when it threw (runOnce rethrows it; onComplete does not). */
  failure?: { error: unknown };
  /** Ends runOnce's fn: resolves (runOnce records the fire) or rejects (it only releases). */
  end(error?: { error: unknown }): void;
  /** What runOnce settles with, once the record is written or the lease released. */
  outcome: Promise<unknown>;
}

const AT = "onceCoordinator:";

/**
 * A node-cron (4.6 or later) run coordinator on `mutex`: each fire of a task scheduled with
 * `distributed: true` and this coordinator runs on one process of those that schedule it, once,
 * through {@link runOnce}. Wrap the task with {@link OnceCoordinator.task}.
 *
 * Its limits: a fire is named by node-cron's key `<task name>:<ISO time>`, at most 128 characters
 * (a task name up to 103); every process must give the task the same name and schedule. A process
 * whose timer fires more than node-cron's `missedExecutionTolerance` late skips that fire itself,
 * and a store that fails skips the fire on that process (node-cron is fail-closed): when every
 * process skips it, nobody runs it. A fire whose task threw is not recorded, but node-cron does not
 * retry it; with `standby: true`, a process that finds the fire running waits for it and runs it
 * if its runner's lease is lost. Background tasks (a file path instead of a function) cannot be
 * wrapped: run {@link runOnce} inside the task file instead.
 *
 * @param mutex Whose name and store hold the fires' leases and records, and whose ttl and owner
 *   the leases take. One mutex serves every task: the task's name is part of each fire.
 * @param options {@link runOnce}'s `retain`, `standby` and `timeout`, for every fire. Set `retain`
 *   to the spread of your processes' fires with room to spare (a minute for a schedule in
 *   seconds): a record is kept that long per fire.
 */
export function onceCoordinator(mutex: Mutex, options?: CoordinatorOptions): OnceCoordinator {
  check(cores.has(mutex as object), AT, `mutex must be a Mutex made by createMutex, got ${kind(mutex)}`);
  const once = { ...optionsOf("onceCoordinator", options) };
  const held = new Map<string, Held>();

  return {
    shouldRun(key) {
      return new Promise<boolean>((answer, refuse) => {
        let end!: Held["end"];
        const job = new Promise<void>((resolve, reject) => {
          end = (failed) => (failed ? reject(failed.error) : resolve());
        });
        const outcome = runOnce(
          mutex,
          key,
          (_signal, lease) => {
            held.set(key, { lease, started: false, end, outcome });
            answer(true);
            return job;
          },
          once,
        );
        // Before the lease: the answer. After it: onComplete awaits `outcome` and reports it.
        outcome.then((result) => {
          if (!result.ran) answer(false);
        }, refuse);
      });
    },

    async onComplete(key) {
      const fire = held.get(key);
      if (fire === undefined) return;
      held.delete(key);
      if (!fire.started) {
        fire.end({
          error: new TypeError(
            `[leasehold] ${AT} the fire ${key} ended without its task wrapped by once.task(fn), so the coordinator cannot tell whether it succeeded; it is not recorded as done. Schedule once.task(fn) instead of fn`,
          ),
        });
      }
      try {
        await fire.outcome;
      } catch (error) {
        if (fire.failure && error === fire.failure.error) return; // node-cron reports the task's error
        throw error;
      }
    },

    async close() {
      const fires = [...held.entries()];
      for (const [key, fire] of fires) {
        if (fire.started) continue;
        held.delete(key);
        fire.end({ error: new Error(`[leasehold] ${AT} closed before the task of ${key} started`) });
      }
      await Promise.all(fires.map(([, fire]) => fire.outcome.catch(() => {})));
    },

    task<C extends CronContext, T>(fn: (context: C, lease: Lease) => T | Promise<T>) {
      check(typeof fn === "function", AT, `task(fn): fn must be a function, got ${kind(fn)}`);
      return async (context: C): Promise<Awaited<T>> => {
        const key = `${context?.task?.name}:${context?.date?.toISOString?.()}`;
        const fire = held.get(key);
        if (fire === undefined || fire.started) {
          fail(
            AT,
            `the task ran for ${key} without this coordinator's lease on that fire: schedule it with { distributed: true, runCoordinator: once } (or cron.setRunCoordinator(once)); task.execute() runs outside any coordinator`,
          );
        }
        fire.started = true;
        try {
          const value: Awaited<T> = await fn(context, fire.lease);
          fire.end();
          return value;
        } catch (error) {
          fire.failure = { error };
          fire.end(fire.failure);
          throw error;
        }
      };
    },
  };
}
