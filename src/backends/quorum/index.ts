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
import type { AcquireResult, Backend, HolderInfo } from "../../backend.ts";
import { BackendError } from "../../errors.ts";
import { check, checkSignal, fail, isNumber } from "../../options.ts";
import { linkedSignal, noAnswer, requestSignal } from "../../signals.ts";
import { now, timer } from "../../time.ts";

/** Options of {@link quorum}. */
export interface QuorumOptions {
  /**
   * How many members may have lost their writes while no second holder gets in and no token
   * repeats: members that lost them since the name was last acquired (while it sits idle) or
   * renewed (while it is held), and were not healed by {@link heal} since. Wipes of different
   * members add up on an idle name. An integer from 0 to N − 1; each one more costs a larger
   * quorum (see the table in the module documentation). Default 0: a majority, as Redlock.
   */
  amnesia?: number;
  /**
   * Called with each member's failure (the member's error and its index in `backends`) while the
   * quorum goes on without it. Default: none. A failure that leaves too few members to decide is
   * also the operation's error.
   */
  onMemberError?: (error: unknown, member: number) => void;
}

const NAME = "quorum";
const WHERE = `[${NAME}]`;
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

/** What a quorum remembers of a lease it handed out: what healing a member that forgot it takes. */
interface Held {
  key: string;
  owner: string;
  token: number;
}

/** Heals names on a quorum's members: see {@link heal}. */
type Healer = (
  names: readonly string[],
  ttl: number,
  timeout: number,
  signal: AbortSignal | undefined,
) => Promise<HealReport[]>;
/** The healer of each backend made by {@link quorum}. */
const healers = new WeakMap<Backend, Healer>();

/** The quorum size for `n` members of which `amnesia` may have lost their writes (see {@link QuorumOptions.amnesia}). */
export function quorumSize(n: number, amnesia: number): number {
  return Math.ceil((n + amnesia + 1) / 2);
}

type Answer<T> = { member: number; ok: true; value: T } | { member: number; ok: false; error: unknown };

/**
 * A Backend that decides each operation by a quorum of `backends`.
 *
 * @param backends N ≥ 3 independent backends (distinct databases, accounts or servers; any mix)
 *   that implement `raiseFence`, as every built-in backend does.
 * @param options `amnesia` and `onMemberError`.
 * @returns A backend named `"quorum"` whose ttl range is the intersection of its members'.
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
  check(Array.isArray(backends), WHERE, "backends must be an array of backends");
  const members = [...backends];
  const n = members.length;
  check(n >= 3, WHERE, `needs at least 3 backends, got ${n}`);
  members.forEach((b, i) => {
    const what = `backends[${i}]`;
    check(
      typeof b === "object" &&
        b !== null &&
        ["acquire", "renew", "release", "inspect"].every((m) => typeof b[m as keyof Backend] === "function"),
      WHERE,
      `${what} is not a Backend`,
    );
    check(
      typeof b.raiseFence === "function",
      WHERE,
      `${what} (${String(b.name)}) has no raiseFence, which a quorum needs for fencing tokens that never go back`,
    );
    // A member without expiry of its own needs the contender's observation of each member's
    // version, which a quorum does not make: it could never take over a crashed holder's lock.
    check(
      b.expiry !== "observed",
      WHERE,
      `${what} (${String(b.name)}) expires locks by observation (docs/DESIGN.md §14), which a quorum does not support`,
    );
    check(
      members.indexOf(b) === i,
      WHERE,
      `${what} is backends[${members.indexOf(b)}] again: members must be independent`,
    );
  });
  check(typeof options === "object" && options !== null, WHERE, "options must be an object");
  const { amnesia = 0, onMemberError } = options;
  check(
    Number.isSafeInteger(amnesia) && amnesia >= 0 && amnesia < n,
    WHERE,
    `amnesia must be an integer from 0 to ${n - 1} (the backends - 1), got ${String(amnesia)}`,
    RangeError,
  );
  check(
    onMemberError === undefined || typeof onMemberError === "function",
    WHERE,
    "onMemberError must be a function",
  );
  const q = quorumSize(n, amnesia);
  let min = 0;
  let max = Number.POSITIVE_INFINITY;
  for (const b of members) {
    if (b.ttlRange) {
      min = Math.max(min, b.ttlRange[0]);
      max = Math.min(max, b.ttlRange[1]);
    }
  }
  if (min > max) fail(WHERE, "the backends' ttl ranges do not overlap: no ttl suits them all", RangeError);
  const ttlRange = members.some((b) => b.ttlRange) ? ([min, max] as const) : undefined;

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
      for (const member of to) {
        Promise.resolve()
          .then(() => send(members[member]!, inner.signal, member))
          .then(
            (value) => settle({ member, ok: true, value }),
            (error: unknown) => settle({ member, ok: false, error }),
          );
      }
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

  // Requests left behind by a decision run at most one ttl (the last one asked for), after which
  // the lease they are about has expired on the member anyway.
  let lateMs = STRAGGLER_MS;
  const lateBound = (ttl: number): number => {
    lateMs = Math.min(ttl, STRAGGLER_MS);
    return lateMs;
  };
  /** Hands a member's failure to onMemberError, which may not throw into the quorum. */
  function report(error: unknown, member: number): void {
    try {
      onMemberError?.(error, member);
    } catch {}
  }
  /** A request nobody waits for: bounded by one ttl, its failure reported. */
  const background = (member: number, work: (b: Backend, signal: AbortSignal) => Promise<unknown>): void => {
    work(members[member]!, AbortSignal.timeout(lateMs)).catch((error: unknown) => report(error, member));
  };
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

  /** Runs `step` on every member at once, each bounded by `timeout`; its error (reported) or value. */
  function everyMember<T>(
    op: string,
    timeout: number,
    signal: AbortSignal | undefined,
    step: (b: Backend, signal: AbortSignal, m: number) => Promise<T>,
  ): Promise<({ ok: true; value: T } | { ok: false })[]> {
    return Promise.all(
      members.map(async (b, m) => {
        const bound = requestSignal(NAME, op, timeout, signal);
        try {
          return { ok: true as const, value: await step(b, bound.signal, m) };
        } catch (error) {
          if (!signal?.aborted) report(error, m);
          return { ok: false as const };
        } finally {
          bound.done();
        }
      }),
    );
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

  const backend: Backend = {
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
          if (grants.length + pending >= q) return undefined;
          // No quorum can grant it now. Held, when so many refused that no quorum is free; else
          // wait for the rest, and fail when they leave it undecided.
          const refused = answers.filter((a) => a.ok && !a.value.ok).length;
          if (refused <= n - q) {
            if (pending === 0) throw tooFew("acquire", answers, key);
            return undefined;
          }
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
        (answers, pending) => {
          const yes = answers.filter((a) => a.ok && a.value).length;
          const no = answers.filter((a) => a.ok && !a.value).length;
          if (yes >= q) return true;
          if (no > n - q) return false; // a quorum can no longer renew: the lease is lost
          if (pending === 0) throw tooFew("renew", answers, key);
          return undefined;
        },
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

    async inspect(key, signal): Promise<HolderInfo | null> {
      return fanOut<HolderInfo | null, HolderInfo | null | "none">(
        "inspect",
        signal,
        lateMs,
        (b, s) => b.inspect(key, s),
        (answers, pending) => {
          const groups = new Map<string, HolderInfo[]>();
          for (const a of answers) {
            if (!a.ok || a.value === null) continue;
            groups.set(a.value.owner, [...(groups.get(a.value.owner) ?? []), a.value]);
          }
          let best: HolderInfo[] = [];
          for (const g of groups.values()) if (g.length > best.length) best = g;
          if (best.length >= q) {
            // The lease's token is the one its quorum of grants holds (those below it were raised
            // before it was handed out). A member may hold the lease under another token: a late
            // grant from a member whose counter was ahead, or a renewal's rejoin (higher); a late
            // grant not raised yet (lower). So the token a quorum reports, hearing the rest while
            // fewer agree; when all answered and none has a quorum, the most reported, the lower
            // on a tie (a higher one is a counter that was ahead, which stays; a lower one is
            // raised soon).
            const votes = (t: number) => best.filter((h) => h.token === t).length;
            const token = best
              .map((h) => h.token)
              .reduce((x, y) => (votes(y) > votes(x) || (votes(y) === votes(x) && y < x) ? y : x));
            if (votes(token) < q && pending > 0) return undefined;
            const left = best.map((h) => h.ttlLeft).filter((t): t is number => t !== undefined);
            const { owner } = best[0]!;
            return left.length ? { owner, token, ttlLeft: Math.min(...left) } : { owner, token };
          }
          if (best.length + pending >= q) return undefined;
          // No holder can have a quorum: free, once a quorum answered.
          if (answers.filter((a) => a.ok).length >= q) return "none";
          if (pending === 0) throw tooFew("inspect", answers, key);
          return undefined;
        },
        { cancel: true },
      ).then((holder) => (holder === "none" ? null : holder));
    },

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
  healers.set(backend, healNames);
  return backend;
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
   * Members that refused: the lock is held there. Nothing is taken from a holder; a holder's
   * renewals heal the members that forgot its lease.
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
 * @param backend A backend made by {@link quorum}.
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
