// Batched renewal: the background renewals of one backend object's leases that come due in one
// cell of the renewal grid go out in one `renewMany` request of up to 512 (docs/DESIGN.md §4.3).
import type { Backend } from "./backend.ts";
import { noAnswer, requestSignal } from "./signals.ts";
import { now, timer } from "./time.ts";
import { renewalBound } from "./timing.ts";

/** One lease's renewal, waiting for its batch. @internal */
export interface Pending {
  key: string;
  nonce: string;
  ttl: number;
  /** The lease's deadline (monotonic ms). */
  deadline: number;
  /** Settles the lease's renewal: the batch's send time, and whether the key was still ours. */
  resolve(answer: [tSend: number, ours: boolean]): void;
  /** The batch failed, or the renewal was left out of it: the lease retries as after a failed renew. */
  reject(error: unknown): void;
}

/**
 * The most renewals one request carries: more than a cell of the grid holds at 10 000 leases of
 * ttl 15 s (about 400), so that they go in one request (docs/DESIGN.md §4.3).
 */
const MOST = 512;

const open = new WeakMap<Backend, Pending[]>();

/**
 * Adds `p` to the next batch of `backend` (which has `renewMany`): sent min(20 ms, ttl / 50)
 * after its first renewal was added, or as soon as it holds 512. @internal
 */
export function renewInBatch(backend: Backend, p: Pending): void {
  let batch = open.get(backend);
  if (!batch) {
    const b: Pending[] = [];
    open.set(backend, b);
    batch = b;
    // Unref'ed, as the leases' own timers: held leases never keep a process alive.
    timer(Math.min(20, p.ttl / 50), () => send(backend, b));
  }
  if (batch.push(p) >= MOST) send(backend, batch);
}

/**
 * Sends `batch` (once: its timer may come after it filled up). Each lease's new deadline counts
 * from this send time (§4.2); the request is bounded by the earliest member's min(ttl / 5, time
 * left) (§4.3). A member whose deadline has come is left out (its lease is lost by its own timer).
 * An answer that is not `true` counts as refused: a key is never renewed unconfirmed. A failed
 * request fails every member, and each lease retries on its own schedule.
 */
async function send(backend: Backend, batch: Pending[]): Promise<void> {
  if (open.get(backend) === batch) open.delete(backend);
  const tSend = now();
  const members = batch.splice(0).filter((p) => {
    if (p.deadline > tSend) return true;
    p.reject(noAnswer(backend.name, "renew", 0));
    return false;
  });
  if (!members.length) return;
  const bounded = requestSignal(
    backend.name,
    "renew",
    Math.min(...members.map((p) => renewalBound(p.ttl, p.deadline - tSend))),
  );
  try {
    // Settled within the bound even by a backend that ignores the signal: each lease counts on it.
    const answers = await bounded.race(
      backend.renewMany!({ requests: members, signal: bounded.signalFor(backend) }),
      true,
    );
    members.forEach((p, i) => {
      p.resolve([tSend, answers[i] === true]);
    });
  } catch (error) {
    for (const p of members) p.reject(error);
  } finally {
    bounded.done();
  }
}
