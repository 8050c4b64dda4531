// How a quorum asks its members: one request to each at once, decided by what a quorum of them
// answers (fanOut), the error when too few could (tooFew), and one step on every member,
// waiting for each (everyMember, for heal). Every request goes through the quorum's drain (close()).
import type { Backend } from "../../backend.ts";
import { BackendError } from "../../errors.ts";
import { linkedSignal, noAnswer, requestSignal } from "../../signals.ts";
import { timer } from "../../time.ts";
import type { Drain, Outcome } from "./drain.ts";

export const NAME = "quorum";
export const WHERE: string = `[${NAME}]`;

/** One member's answer: its value or its error. */
export type Answer<T> = { member: number } & Outcome<T>;

/** How a quorum asks its members; see {@link fanOutOver}. */
export interface FanOut {
  fanOut<T, R>(
    op: string,
    signal: AbortSignal | undefined,
    ms: number,
    send: (member: Backend, signal: AbortSignal, index: number) => Promise<T>,
    decide: (answers: Answer<T>[], pending: number) => R | undefined,
    options?: { to?: number[]; late?: (answer: Answer<T>) => void; cancel?: boolean },
  ): Promise<R>;
  tooFew(op: string, answers: Answer<unknown>[], key: string): BackendError;
  everyMember<T>(
    op: string,
    timeout: number,
    signal: AbortSignal | undefined,
    step: (b: Backend, signal: AbortSignal, m: number) => Promise<T>,
  ): Promise<({ ok: true; value: T } | { ok: false })[]>;
}

/**
 * The ways of asking `members`, of which `q` decide; `report` hears each member's failure, and
 * `drain` counts every request (close()).
 */
export function fanOutOver(
  members: readonly Backend[],
  q: number,
  report: (error: unknown, member: number) => void,
  drain: Drain,
): FanOut {
  const n = members.length;

  /**
   * Sends `send` to the members `to` (default: all) at once and resolves with what `decide` makes
   * of the answers as soon as it can tell: it is called after each answer with the answers so far
   * and how many are still out, and must decide once none is. The requests it did not wait for go
   * on for at most `ms` more (or are cancelled when `cancel` is set); their answers go to `late`.
   * Rejects with `signal`'s reason when that aborts first.
   */
  function fanOut<T, R>(
    op: string,
    signal: AbortSignal | undefined,
    ms: number,
    send: (member: Backend, signal: AbortSignal, index: number) => Promise<T>,
    decide: (answers: Answer<T>[], pending: number) => R | undefined,
    {
      to = members.map((_, i) => i),
      late = () => {},
      cancel = false,
    }: {
      to?: number[];
      late?: (answer: Answer<T>) => void;
      cancel?: boolean;
    } = {},
  ): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      // Until the decision the caller's signal bounds the requests; after it, `ms` does.
      const stop = new AbortController();
      const inner = linkedSignal([signal, stop.signal]);
      const answers: Answer<T>[] = [];
      let pending = to.length;
      let decided = false;
      let cancelled = false;
      let unbound = (): void => {};
      const end = (): void => {
        decided = true;
        signal?.removeEventListener("abort", onAbort);
        if (pending === 0) return;
        if (cancel) {
          cancelled = true;
          stop.abort();
        } else unbound = timer(ms, () => stop.abort(noAnswer(NAME, op, ms)));
      };
      const onAbort = (): void => {
        end();
        reject(signal!.reason);
      };
      const settle = (answer: Answer<T>): void => {
        pending--;
        // A member's own failure is reported; the end of a request we stopped waiting for is not.
        if (!answer.ok && !signal?.aborted && !cancelled) report(answer.error, answer.member);
        if (decided) late(answer);
        else {
          answers.push(answer);
          try {
            const result = decide(answers, pending);
            if (result !== undefined) {
              end();
              resolve(result);
            }
          } catch (error) {
            end();
            reject(error);
          }
        }
        if (pending === 0) {
          unbound();
          inner.done();
        }
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      for (const member of to)
        drain.send(
          inner.signal,
          (s) => send(members[member]!, s, member),
          (outcome) => settle({ member, ...outcome }),
        );
    });
  }

  /**
   * The error of an operation that too few members answered to decide. Retryable unless more
   * than N − q members failed for good (non-retryable errors): only then can no quorum form
   * again without someone fixing them. A member that forgot (a wipe, within `amnesia`) or is
   * down for a while (within N − q) leaves it retryable.
   */
  function tooFew(op: string, answers: Answer<unknown>[], key: string): BackendError {
    const errors = answers.flatMap((a) => (a.ok ? [] : [a.error]));
    const answered = answers.length - errors.length;
    const detail = errors.map((e) => (e instanceof Error ? e.message : String(e))).join("; ");
    const retryable = errors.filter((e) => e instanceof BackendError && !e.retryable).length <= n - q;
    return new BackendError(
      `${op} ${JSON.stringify(key)}: ${answered} of ${n} backends answered, a quorum is ${q}: ${detail}`,
      {
        backend: NAME,
        retryable,
        auth: !retryable && errors.every((e) => e instanceof BackendError && e.code === "ERR_BACKEND_AUTH"),
        cause: new AggregateError(errors, "the members' errors"),
      },
    );
  }

  /** Runs `step` on every member at once, each bounded by `timeout`; its error (reported) or value. */
  function everyMember<T>(
    op: string,
    timeout: number,
    signal: AbortSignal | undefined,
    step: (b: Backend, signal: AbortSignal, m: number) => Promise<T>,
  ): Promise<({ ok: true; value: T } | { ok: false })[]> {
    return Promise.all(
      members.map(
        (b, m) =>
          new Promise<{ ok: true; value: T } | { ok: false }>((resolve) => {
            const bound = requestSignal(NAME, op, timeout, signal);
            drain.send(
              bound.signal,
              (s) => step(b, s, m),
              (outcome) => {
                bound.done();
                if (outcome.ok) return resolve(outcome);
                if (!signal?.aborted) report(outcome.error, m);
                resolve({ ok: false });
              },
            );
          }),
      ),
    );
  }

  return { fanOut, tooFew, everyMember };
}
