// Healing a quorum whose members lost writes: heal() and what it reports (docs/DESIGN.md §13).
import type { Backend } from "../../backend.ts";
import { check, checkSignal, isNumber } from "../../options.ts";
import { type FanOut, WHERE } from "./fan-out.ts";

/** Heals names on a quorum's members: see {@link heal}. */
export type Healer = (
  names: readonly string[],
  ttl: number,
  timeout: number,
  signal: AbortSignal | undefined,
) => Promise<HealReport[]>;
/** The healer of each backend made by `quorum()`. */
export const healers: WeakMap<Backend, Healer> = new WeakMap();

/**
 * The healer of the quorum over `members`: each name in turn taken, raised and given back on
 * every member, through `everyMember`.
 */
export function healerOver(members: readonly Backend[], everyMember: FanOut["everyMember"]): Healer {
  /** {@link heal} on this quorum: each name in turn. */
  async function healNames(
    names: readonly string[],
    ttl: number,
    timeout: number,
    signal: AbortSignal | undefined,
  ): Promise<HealReport[]> {
    const reports: HealReport[] = [];
    for (const name of names) reports.push(await healName(name, ttl, timeout, signal));
    return reports;
  }

  /**
   * Takes `name` on every member with a fresh nonce, waiting for each (bounded), raises every
   * member that granted it to the highest token granted, and releases it everywhere. A member
   * that refused holds it for someone else: nothing is taken from it.
   */
  async function healName(
    name: string,
    ttl: number,
    timeout: number,
    signal: AbortSignal | undefined,
  ): Promise<HealReport> {
    const nonce = crypto.randomUUID();
    const owner = "leasehold heal";
    const taken = await everyMember("heal", timeout, signal, (b, s) =>
      b.acquire({ key: name, owner, nonce, ttl, signal: s }),
    );
    const tokens = taken.map((a) => (a.ok && a.value.ok ? a.value.token : 0));
    const token = Math.max(...tokens);
    const raised = await everyMember("heal", timeout, signal, async (b, s, m) => {
      const got = tokens[m]!;
      return got > 0 && (got >= token || b.raiseFence!({ key: name, owner, nonce, token, signal: s }));
    });
    // Given back everywhere, even where the answer was lost: the lock may be ours there.
    await everyMember("release", timeout, undefined, (b, s) => b.release({ key: name, nonce, signal: s }));
    signal?.throwIfAborted();
    const which = (test: (m: number) => boolean) => members.flatMap((_, m) => (test(m) ? [m] : []));
    const healed = which((m) => raised[m]!.ok && raised[m]!.value === true);
    const held = which((m) => taken[m]!.ok && tokens[m] === 0);
    return {
      name,
      token: token > 0 ? token : null,
      healed,
      held,
      unreachable: which((m) => !healed.includes(m) && !held.includes(m)),
    };
  }

  return healNames;
}

/** Options of {@link heal}. */
export interface HealOptions {
  /**
   * How long each member may take for one name, for each step (take, raise, give back), in ms.
   * Default 5 000; a number from 1 to half the ttl of the short lease heal takes (15 000 ms,
   * brought within the members' ttl range).
   */
  timeout?: number;
  /** Stops healing: `heal` gives back what it took and rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** What {@link heal} did for one name. Members are indexes in the quorum's `backends`. */
export interface HealReport {
  /** The lock's name. */
  name: string;
  /** The highest token a member granted, to which the members in `healed` are raised; null when none granted. */
  token: number | null;
  /** Members whose fence counter is now at least `token`. */
  healed: number[];
  /**
   * Members that refused: the lock is held there, or holds a completed fire's record (runOnce).
   * Nothing is taken from a holder, and no record is touched; a holder's renewals heal the
   * members that forgot its lease.
   */
  held: number[];
  /**
   * Members that failed (their errors went to `onMemberError`), did not answer within `timeout`,
   * or whose raise did not take: heal the name again once they are back.
   */
  unreachable: number[];
}

/**
 * Heals lock names on a quorum after members lost writes (a restart without persistence, a
 * failover): for each name in turn, takes it on every member with a fresh nonce and waits for
 * each (every step bounded by `timeout`), raises every member that granted it to the highest
 * token granted, then gives it back everywhere. A member that forgot a name counts against
 * `amnesia` until an acquisition, a renewal or `heal` raises it again (docs/DESIGN.md §13): run
 * this after you restart a member that lost its writes, for the names that sit idle, while the
 * other members are up. A name held by someone (any member refused) is not taken: its holder's
 * renewals heal it.
 *
 * @param backend A backend made by `quorum()`.
 * @param names The lock names (for a semaphore, its slot keys `name:permit:i`).
 * @param options `timeout` and `signal`.
 * @returns One report per name, in order.
 * @throws {TypeError} When `backend` was not made by `quorum()`, `names` is not an array of
 *   non-empty strings, or an option has the wrong type.
 * @throws {RangeError} When `timeout` is out of range.
 *
 * @example After restarting a member without persistence
 * ```ts
 * import type { Backend } from "leasehold";
 * import { heal, quorum } from "leasehold/quorum";
 *
 * declare const members: Backend[]; // four independent stores, one of which just restarted empty
 *
 * const backend = quorum(members, { amnesia: 1 });
 * for (const r of await heal(backend, ["nightly-report", "invoices"])) {
 *   if (r.unreachable.length) console.warn(`${r.name}: members ${r.unreachable} not healed; run heal again`);
 * }
 * ```
 */
export async function heal(
  backend: Backend,
  names: readonly string[],
  options: HealOptions = {},
): Promise<HealReport[]> {
  const healer = typeof backend === "object" && backend !== null ? healers.get(backend) : undefined;
  check(healer !== undefined, `${WHERE} heal:`, "backend must be a backend made by quorum()");
  check(
    Array.isArray(names) && names.every((x) => typeof x === "string" && x !== ""),
    `${WHERE} heal:`,
    "names must be an array of lock names (non-empty strings)",
  );
  check(typeof options === "object" && options !== null, `${WHERE} heal:`, "options must be an object");
  const { timeout = 5_000, signal } = options;
  checkSignal(`${WHERE} heal`, signal);
  // A short lease that outlives every step (timeout ≤ ttl / 2), within every member's ttl range.
  const ttl = Math.min(Math.max(15_000, backend.ttlRange?.[0] ?? 0), backend.ttlRange?.[1] ?? Infinity);
  check(
    isNumber(timeout) && timeout >= 1 && timeout <= ttl / 2,
    `${WHERE} heal:`,
    `timeout must be a number of ms from 1 to ${ttl / 2} (half the ttl of the lease heal takes), got ${String(timeout)}`,
    RangeError,
  );
  return healer(names, ttl, timeout, signal);
}
