// The options of quorum() and the checks of its members: what a quorum of them is.
import { type Backend, checkBackend } from "../../backend.ts";
import { check, fail } from "../../options.ts";
import { WHERE } from "./fan-out.ts";

/** Options of `quorum()`. */
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

/** The quorum size for `n` members of which `amnesia` may have lost their writes (see {@link QuorumOptions.amnesia}). */
export function quorumSize(n: number, amnesia: number): number {
  return Math.ceil((n + amnesia + 1) / 2);
}

/** A quorum's members and settings, checked. */
export interface Checked {
  members: Backend[];
  n: number;
  q: number;
  onMemberError: QuorumOptions["onMemberError"];
  ttlRange: readonly [number, number] | undefined;
}

/** Checks `backends` and `options` of `quorum()`: what the factory throws. */
export function checkQuorum(backends: readonly Backend[], options: QuorumOptions): Checked {
  check(Array.isArray(backends), WHERE, "backends must be an array of backends");
  const members = [...backends];
  const n = members.length;
  check(n >= 3, WHERE, `needs at least 3 backends, got ${n}`);
  members.forEach((b, i) => {
    const what = `backends[${i}]`;
    checkBackend(b, WHERE, what);
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
  return { members, n, q, onMemberError, ttlRange };
}
