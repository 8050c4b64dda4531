// One long file for one closure: the operations share one quorum's state (its leases, releases, stragglers).
// (Asking the members is in fan-out.ts, healing in heal.ts, the checks in options.ts.)
/**
 * A Backend over N ≥ 3 independent backends that keeps its guarantees while some of them are
 * unreachable, and while up to `amnesia` of them have lost their writes (a failover of an
 * asynchronously replicated database, a restart without persistence) and not been healed.
 *
 * Every operation goes to all members at once and is decided by a quorum of
 * q = ceil((N + amnesia + 1) / 2) members, so that any two quorums share at least `amnesia + 1`
 * members: even if `amnesia` of those forgot, one still remembers the lease (no second holder)
 * and its fence counter (no repeated token). Up to N − q members may be unreachable at once.
 *
 * Wipes count per name until healed, not "at once": every acquisition raises the members that
 * granted it to its token, and every renewal takes the lease again on a member that forgot it
 * (and raises it), but nothing reaches a name that sits idle. Two members restarted a month
 * apart count as two for a name nobody took in between. After restarting a member that lost its
 * writes, run {@link heal} for the names that may sit idle (docs/DESIGN.md §13).
 *
 * | N | amnesia | q | unreachable at once |
 * | - | ------- | - | ------------------- |
 * | 3 | 0       | 2 | 1                   |
 * | 3 | 1       | 3 | 0                   |
 * | 4 | 1       | 3 | 1                   |
 * | 5 | 0       | 3 | 2                   |
 * | 5 | 1       | 4 | 1                   |
 * | 5 | 2       | 4 | 1                   |
 * | 7 | 1       | 5 | 2                   |
 * | 7 | 2       | 5 | 2                   |
 *
 * Fencing: the token of a lease is T, the largest token among its grants. Before the lease is
 * handed out, the fence counter of a quorum of the members that granted it is at least T (those
 * that answered T already are; the others are raised to T with the members' `raiseFence`, one
 * more round trip, only when their counters had drifted apart). The next holder's quorum shares
 * `amnesia + 1` members with that one, one of which remembers a counter ≥ T, so its grant, and so
 * the next token, is greater than T (docs/DESIGN.md §13).
 *
 * @example Three Upstash databases in different regions
 * ```ts
 * import { createMutex } from "leasehold";
 * import { quorum } from "leasehold/quorum";
 * import { upstash } from "leasehold/upstash";
 *
 * declare const regions: { url: string; token: string }[]; // three databases
 *
 * const backend = quorum(regions.map((r) => upstash(r)));
 * const mutex = createMutex(backend, { name: "nightly-report" });
 * ```
 *
 * @module
 */
import type { AcquireResult, Backend, FireHolder, HolderInfo } from "../../backend.ts";
import { BackendError } from "../../errors.ts";
import { checkMs, optionsOf } from "../../options.ts";
import { now } from "../../time.ts";
import { drainer } from "./drain.ts";
import { type Answer, fanOutOver, NAME, WHERE } from "./fan-out.ts";
import { healerOver, healers } from "./heal.ts";
import { checkQuorum, type QuorumOptions } from "./options.ts";

export { type HealOptions, type HealReport, heal } from "./heal.ts";
export type { QuorumOptions } from "./options.ts";

/** The longest a request left behind by its decision may still run, in ms. */
const STRAGGLER_MS = 10_000;
/** How many leases, and how many nonces released lately, a quorum remembers (the oldest dropped). */
const REMEMBERED = 4_096;

/** Sets `key` in `map` as its newest entry, dropping the oldest beyond {@link REMEMBERED}. */
function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > REMEMBERED) map.delete(map.keys().next().value as string);
}

/** Of members' answers about one key (leases, or fire records), those of the owner most report (the first on a tie). */
function mostOwned<H extends FireHolder>(holders: readonly H[]): H[] {
  const groups = new Map<string, H[]>();
  for (const h of holders) groups.set(h.owner, [...(groups.get(h.owner) ?? []), h]);
  let best: H[] = [];
  for (const g of groups.values()) if (g.length > best.length) best = g;
  return best;
}

/**
 * The token that `group` (one owner's answers, {@link mostOwned}) holds, or undefined to hear the
 * rest: the token `q` of them report, else, once none is `pending`, the one most report, the
 * lower on a tie. A member may hold a lease, or the record it became, under another token than the
 * lease's T, which its quorum of grants holds (those below it were raised before it was handed
 * out): a late grant from a member whose counter was ahead, or a renewal's rejoin (higher); a late
 * grant not raised yet (lower). A counter that was ahead stays so; a lagging one is raised soon.
 */
function agreedToken(group: readonly FireHolder[], q: number, pending: number): number | undefined {
  const votes = (t: number) => group.filter((h) => h.token === t).length;
  const token = group
    .map((h) => h.token)
    .reduce((x, y) => (votes(y) > votes(x) || (votes(y) === votes(x) && y < x) ? y : x));
  return votes(token) < q && pending > 0 ? undefined : token;
}

/** What a quorum remembers of a lease it handed out: what healing a member that forgot it takes. */
interface Held {
  key: string;
  owner: string;
  token: number;
}

/**
 * A Backend that decides each operation by a quorum of `backends`.
 *
 * @param backends N ≥ 3 independent backends (distinct databases, accounts or servers; any mix)
 *   that implement `raiseFence`, as every built-in backend does.
 * @param options `amnesia` and `onMemberError`.
 * @returns A backend named `"quorum"` whose ttl range is the intersection of its members'. It has
 *   `complete` (for `runOnce`) when every member has it and their retain ranges overlap (its own
 *   is their intersection): a fire is recorded once q members hold its record, and done for a
 *   late call once more than N − q do (docs/DESIGN.md §17). Its `close()` waits for the requests
 *   its operations left running to its slower members: call it after the last release, before
 *   closing the members' clients (docs/backends/quorum.md, "Shutting down").
 * @throws {TypeError} When `backends` is not an array of at least 3 distinct backends with
 *   `raiseFence`, or an option has the wrong type.
 * @throws {RangeError} When `amnesia` is not an integer from 0 to N − 1, or the members' ttl
 *   ranges do not overlap.
 *
 * @example Five members that survive one losing its writes and one more being unreachable
 * ```ts
 * import { quorum } from "leasehold/quorum";
 * import type { Backend } from "leasehold";
 *
 * declare const members: Backend[]; // five independent stores
 *
 * const backend = quorum(members, { amnesia: 1, onMemberError: (e, i) => console.warn(i, e) });
 * ```
 */
export function quorum(backends: readonly Backend[], options: QuorumOptions = {}): Backend {
  const { members, n, q, onMemberError, ttlRange, complete, retainRange } = checkQuorum(backends, options);
  const drain = drainer();
  const { fanOut, tooFew, everyMember } = fanOutOver(members, q, report, drain);
  const healNames = healerOver(members, everyMember);

  // Requests left behind by a decision run at most one ttl (the last one asked for), after which
  // the lease they are about has expired on the member anyway.
  let lateMs = STRAGGLER_MS;
  const lateBound = (ttl: number): number => {
    lateMs = Math.min(ttl, STRAGGLER_MS);
    return lateMs;
  };
  /**
   * Hands a member's failure to onMemberError, which may not throw into the quorum. Once close()'s
   * bound passed, the requests it aborted are not the members' failures.
   */
  function report(error: unknown, member: number): void {
    if (drain.over) return;
    try {
      onMemberError?.(error, member);
    } catch {}
  }
  /** A request nobody waits for: bounded by one ttl, its failure reported. */
  const background = (member: number, work: (b: Backend, signal: AbortSignal) => Promise<unknown>): void =>
    drain.send(
      AbortSignal.timeout(lateMs),
      (s) => work(members[member]!, s),
      (outcome) => {
        if (!outcome.ok) report(outcome.error, member);
      },
    );
  const giveBack = (member: number, key: string, nonce: string): void =>
    background(member, (b, signal) => b.release({ key, nonce, signal }));
  const raiseLate = (member: number, key: string, owner: string, nonce: string, token: number): void =>
    background(member, (b, signal) => b.raiseFence!({ key, owner, nonce, token, signal }));

  // The leases this quorum handed out and that are not yet released or lost, by nonce: a renewal
  // heals a member that forgot one with them (docs/DESIGN.md §13). Most recent last.
  const leases = new Map<string, Held>();
  // The nonces released lately, with the time of their release: a grant for one that lands after
  // it (a straggler of its acquire or of a renewal's heal) is given back. Each is kept
  // STRAGGLER_MS, which outlasts every request left behind by a decision made before the release.
  const released = new Map<string, number>();
  function forget(nonce: string): void {
    leases.delete(nonce);
    const t = now();
    for (const [old, at] of released) {
      if (t - at < STRAGGLER_MS) break;
      released.delete(old);
    }
    remember(released, nonce, t);
  }

  /**
   * Heals member `m`, whose renewal answered that `lease` (under `nonce`) is not its own: it
   * forgot it (a restart or failover that lost writes), or never granted it. Takes the lock there
   * again with the lease's nonce when it is free and raises its fence to the lease's token, so it
   * holds the lease and remembers the token like a member that never forgot; true only then
   * (docs/DESIGN.md §13). A grant that lands after the lease's release is given back.
   */
  async function rejoin(m: number, b: Backend, lease: Held, nonce: string, ttl: number, signal: AbortSignal) {
    const { key, owner, token } = lease;
    try {
      const r = await b.acquire({ key, owner, nonce, ttl, signal });
      return r.ok && (r.token >= token || (await b.raiseFence!({ key, owner, nonce, token, signal })));
    } finally {
      if (released.has(nonce)) giveBack(m, key, nonce);
    }
  }

  /**
   * How renew and complete decide: `true` once q members answered true, `false` once more than
   * N − q answered false (a quorum can no longer: the lease is lost), else an error once all answered.
   */
  const byQuorum =
    (op: string, key: string) =>
    (answers: Answer<boolean>[], pending: number): boolean | undefined => {
      const yes = answers.filter((a) => a.ok && a.value).length;
      const no = answers.filter((a) => a.ok && !a.value).length;
      if (yes >= q) return true;
      if (no > n - q) return false;
      if (pending === 0) throw tooFew(op, answers, key);
      return undefined;
    };

  const operations: Backend = {
    name: NAME,
    ...(ttlRange ? { ttlRange } : {}),

    async acquire({ key, owner, nonce, ttl, signal }): Promise<AcquireResult> {
      const grants: { member: number; token: number }[] = [];
      let granted = false;
      let lateToken = 0;
      released.delete(nonce); // a nonce used again (the core never does) is no longer released
      // Gives back every grant, and from now on every grant that lands late.
      const release = (): void => {
        granted = false;
        for (const g of grants) giveBack(g.member, key, nonce);
      };
      // Handed out: remembered for healing members on renewal (rejoin).
      const handOut = (outcome: { ok: true; token: number }): AcquireResult => {
        remember(leases, nonce, { key, owner, token: outcome.token });
        return outcome;
      };
      const outcome = await fanOut<AcquireResult, AcquireResult>(
        "acquire",
        signal,
        lateBound(ttl),
        (b, s) => b.acquire({ key, owner, nonce, ttl, signal: s }),
        (answers, pending) => {
          const last = answers.at(-1)!;
          if (last.ok && last.value.ok) grants.push({ member: last.member, token: last.value.token });
          if (grants.length >= q) {
            granted = true;
            lateToken = Math.max(...grants.map((g) => g.token));
            return { ok: true, token: lateToken };
          }
          // A fire's record (runOnce) on more than N − q members: no quorum can grant the key
          // before those expire, so the fire is done; by the runner most of them name.
          const records = answers.flatMap((a) => (a.ok && !a.value.ok && a.value.done ? [a.value.done] : []));
          if (records.length > n - q) {
            const runner = mostOwned(records);
            const token = agreedToken(runner, q, pending);
            return token === undefined ? undefined : { ok: false, done: { owner: runner[0]!.owner, token } };
          }
          if (grants.length + pending >= q) return undefined;
          // No quorum can grant it now. Held, when so many refused that no quorum is free; else
          // wait for the rest, and fail when they leave it undecided.
          const refused = answers.filter((a) => a.ok && !a.value.ok).length;
          if (refused <= n - q) {
            if (pending === 0) throw tooFew("acquire", answers, key);
            return undefined;
          }
          // Records on fewer: hear the rest while they may yet make it done.
          if (pending > 0 && records.length > 0 && records.length + pending > n - q) return undefined;
          // When could a quorum be free? Our grants are given back at once.
          const free = answers
            .map((a) =>
              !a.ok
                ? Number.POSITIVE_INFINITY
                : a.value.ok
                  ? 0
                  : (a.value.retryAfter ?? Number.POSITIVE_INFINITY),
            )
            .sort((x, y) => x - y);
          const after = free[q - 1] ?? Number.POSITIVE_INFINITY;
          return Number.isFinite(after) ? { ok: false, retryAfter: after } : { ok: false };
        },
        {
          // Grants that land after the decision: part of our lease when granted and not yet
          // released, else given back.
          late: (a) => {
            if (!(a.ok && a.value.ok)) return;
            if (!granted || released.has(nonce)) return giveBack(a.member, key, nonce);
            // Part of our lease, but its counter may lag: raise it too, in the background, so the
            // members stay in step (the lease did not wait for it).
            grants.push({ member: a.member, token: a.value.token });
            if (a.value.token < lateToken) raiseLate(a.member, key, owner, nonce, lateToken);
          },
        },
      ).catch((error: unknown) => {
        release();
        throw error;
      });
      if (!outcome.ok) {
        release();
        return outcome;
      }
      const { token } = outcome;
      let raised = grants.filter((g) => g.token === token).length;
      // A token past the safe range is not raised to (no member takes it): the core refuses it as
      // an exhausted fence counter and gives the lease back (docs/DESIGN.md §5.1).
      if (!Number.isSafeInteger(token)) return outcome;
      if (raised >= q) return handOut(outcome);
      // Some counters drifted apart (a member was down, or forgot): raise those that granted
      // below the token until a quorum of the grants has a counter of at least the token.
      const behind = grants.filter((g) => g.token < token).map((g) => g.member);
      const done = await fanOut<boolean, boolean>(
        "raise fence",
        signal,
        lateBound(ttl),
        (b, s) => b.raiseFence!({ key, owner, nonce, token, signal: s }),
        (answers, pending) => {
          const last = answers.at(-1)!;
          if (last.ok && last.value) raised++;
          if (raised >= q) return true;
          return raised + pending < q ? false : undefined;
        },
        { to: behind },
      ).catch((error: unknown) => {
        release();
        throw error;
      });
      if (done) return handOut(outcome);
      release();
      throw new BackendError(
        `acquire ${JSON.stringify(key)}: granted by a quorum, but its fence counter could not be raised to ${token} on ${q} members`,
        { backend: NAME, retryable: true },
      );
    },

    async renew({ key, nonce, ttl, signal }): Promise<boolean> {
      const lease = leases.get(nonce);
      const held = lease?.key === key ? lease : undefined;
      const ours = await fanOut<boolean, boolean>(
        "renew",
        signal,
        lateBound(ttl),
        // A member that says the lease is not its own is healed when it forgot it (rejoin).
        async (b, s, m) =>
          (await b.renew({ key, nonce, ttl, signal: s })) ||
          (held !== undefined && rejoin(m, b, held, nonce, ttl, s)),
        byQuorum("renew", key),
      );
      if (!ours) leases.delete(nonce);
      return ours;
    },

    async release({ key, nonce, signal }): Promise<void> {
      forget(nonce);
      await fanOut<void, true>(
        "release",
        signal,
        lateMs,
        (b, s) => b.release({ key, nonce, signal: s }),
        (answers, pending) => {
          const ok = answers.filter((a) => a.ok).length;
          if (ok >= q) return true;
          if (ok + pending < q) throw tooFew("release", answers, key);
          return undefined;
        },
      );
    },

    async inspect({ key, signal }): Promise<HolderInfo | null> {
      /** The holder `group` (one owner's answers) agrees on, or undefined to hear the rest. */
      const holder = (group: HolderInfo[], pending: number, done: boolean): HolderInfo | undefined => {
        const token = agreedToken(group, q, pending);
        if (token === undefined) return undefined;
        const left = group.map((h) => h.ttlLeft).filter((t): t is number => t !== undefined);
        return {
          owner: group[0]!.owner,
          token,
          ...(left.length ? { ttlLeft: Math.min(...left) } : {}),
          ...(done ? { done } : {}),
        };
      };
      return fanOut<HolderInfo | null, HolderInfo | null | "none">(
        "inspect",
        signal,
        lateMs,
        (b, s) => b.inspect({ key, signal: s }),
        (answers, pending) => {
          const held = answers.flatMap((a) => (a.ok && a.value !== null ? [a.value] : []));
          // A fire's record on more than N − q members: done, as acquire answers.
          const records = held.filter((h) => h.done === true);
          if (records.length > n - q) return holder(mostOwned(records), pending, true);
          const best = mostOwned(held.filter((h) => h.done !== true));
          if (best.length >= q) return holder(best, pending, false);
          if (best.length + pending >= q || (records.length > 0 && records.length + pending > n - q))
            return undefined;
          // No holder can have a quorum: free, once a quorum answered.
          if (answers.filter((a) => a.ok).length >= q) return "none";
          if (pending === 0) throw tooFew("inspect", answers, key);
          return undefined;
        },
        { cancel: true },
      ).then((holder) => (holder === "none" ? null : holder));
    },

    // Only when every member records fires, for a retain each of them can keep.
    ...(complete
      ? {
          ...(retainRange ? { retainRange } : {}),
          // Replaces the lease with the fire's record on every member that holds it: recorded
          // once q did (docs/DESIGN.md §17). The lease ends here as with a release: a grant of its
          // nonce that lands later is given back.
          async complete({ key, nonce, retain, signal }): Promise<boolean> {
            forget(nonce);
            return fanOut<boolean, boolean>(
              "complete",
              signal,
              lateMs,
              (b, s) => b.complete!({ key, nonce, retain, signal: s }),
              byQuorum("complete", key),
            );
          },
        }
      : {}),

    async raiseFence(r): Promise<boolean> {
      const raised = await fanOut<boolean, boolean>(
        "raise fence",
        r.signal,
        lateMs,
        (b, s) => b.raiseFence!({ ...r, signal: s }),
        (answers, pending) => {
          const yes = answers.filter((a) => a.ok && a.value).length;
          if (yes >= q) return true;
          return yes + pending < q ? false : undefined;
        },
      );
      const lease = leases.get(r.nonce);
      if (raised && lease?.key === r.key) lease.token = Math.max(lease.token, r.token);
      return raised;
    },
  };
  // Each operation is refused once close() was called, and counted until it settles: close()
  // waits for it, and for every request it left behind (docs/DESIGN.md §13, "Shutdown").
  const guarded =
    <R extends { key: string }, T>(op: string, f: (r: R) => Promise<T>) =>
    (r: R): Promise<T> =>
      drain.run(op, r.key, () => f(r));
  const { complete: completeFire, raiseFence } = operations;
  const backend: Backend = {
    ...operations,
    acquire: guarded("acquire", operations.acquire),
    renew: guarded("renew", operations.renew),
    release: guarded("release", operations.release),
    inspect: guarded("inspect", operations.inspect),
    ...(completeFire ? { complete: guarded("complete", completeFire) } : {}),
    raiseFence: guarded("raise fence", raiseFence!),
    async close(options) {
      const { timeout = STRAGGLER_MS } = optionsOf(`${WHERE} close`, options);
      checkMs(`${WHERE} close`, "timeout", timeout);
      const t = now();
      await drain.close(timeout);
      // Then the members that have requests of their own (a quorum inside a quorum), in what is left.
      const left = Math.max(0, timeout - (now() - t));
      await Promise.all(members.map((m) => m.close?.({ timeout: left })));
    },
  };
  healers.set(backend, (...args) => drain.run("heal", undefined, () => healNames(...args)));
  return backend;
}
