// Closing a quorum: its operations and every request to a member are counted until they settle,
// so that close() can wait for the requests a decision left behind (docs/DESIGN.md §13, "Shutdown").
import { BackendError } from "../../errors.ts";
import { type Bounded, requestSignal } from "../../signals.ts";
import { NEVER, timer } from "../../time.ts";
import { NAME } from "./fan-out.ts";

/** A request's value or its error. */
export type Outcome<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** What a quorum's close() waits for, and what it refuses afterwards; see {@link drainer}. */
export interface Drain {
  /**
   * Runs the operation `op` on `key` (heal: none), counted until it settles; rejects at once,
   * without running it, once close() was called.
   */
  run<T>(op: string, key: string | undefined, operation: () => Promise<T>): Promise<T>;
  /**
   * Sends one request to a member and hands its outcome to `settled`, counted until `settled`
   * returned (so what it sends next is counted before this ends). The request's signal also aborts
   * when close()'s bound passes; once it has passed nothing more is sent (`settled` gets that
   * abort's reason).
   */
  send<T>(
    signal: AbortSignal | undefined,
    request: (signal: AbortSignal) => Promise<T>,
    settled: (outcome: Outcome<T>) => void,
  ): void;
  /** Whether close()'s work is over: a failure from then on is our own abort, not a member's. */
  readonly over: boolean;
  /** Refuses new operations, waits until nothing is counted or `timeout` ms passed, then aborts what is left. */
  close(timeout: number): Promise<void>;
}

/** The error of an operation begun after close(). */
function closed(op: string, key: string | undefined): BackendError {
  const what = key === undefined ? op : `${op} ${JSON.stringify(key)}`;
  return new BackendError(`${what}: this quorum was closed (close()); create a new quorum() to lock again`, {
    backend: NAME,
    retryable: false,
  });
}

/** A quorum's count of work in flight, and its close. */
export function drainer(): Drain {
  let inFlight = 0;
  let closing: Promise<void> | undefined;
  let idle = (): void => {};
  // The requests in flight, each aborted when close()'s bound passes: a set, rather than a
  // listener each on one shared signal (hundreds at once would be a leak warning on Node).
  const live = new Set<Bounded>();
  // Set when close()'s bound passed: the reason of every request aborted or refused from then on.
  let shut: BackendError | undefined;
  const counted = <T>(work: () => Promise<T>): Promise<T> => {
    inFlight++;
    return Promise.resolve()
      .then(work)
      .finally(() => {
        if (--inFlight === 0) idle();
      });
  };
  return {
    run: (op, key, operation) => (closing ? Promise.reject(closed(op, key)) : counted(operation)),
    send(signal, request, settled) {
      if (shut) {
        const error = shut;
        queueMicrotask(() => settled({ ok: false, error }));
        return;
      }
      // No timer (NEVER): the caller's signal bounds the request.
      const bound = requestSignal(NAME, "request", NEVER, signal);
      live.add(bound);
      counted(() =>
        Promise.resolve()
          .then(() => request(bound.signal))
          .finally(() => {
            bound.done();
            live.delete(bound);
          })
          .then(
            (value) => settled({ ok: true, value }),
            (error: unknown) => settled({ ok: false, error }),
          ),
      );
    },
    get over() {
      return shut !== undefined;
    },
    close(timeout) {
      closing ??= new Promise<void>((resolve) => {
        // Kept alive: the caller awaits it.
        const cancel = timer(timeout, () => finish(), true);
        const finish = (): void => {
          idle = () => {};
          cancel();
          shut = new BackendError(
            `request not sent, or aborted: close() ended (its timeout of ${timeout} ms passed first, or nothing was in flight)`,
            { backend: NAME, retryable: false },
          );
          for (const request of live) request.abort(shut);
          resolve();
        };
        idle = finish;
        if (inFlight === 0) finish();
      });
      return closing;
    },
  };
}
