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
  /**
   * Whether the quorum records fires (runOnce, docs/DESIGN.md §17): every member has `complete`
   * and their retain ranges overlap.
   */
  complete: boolean;
  /** The intersection of the members' retain ranges, when any declares one. */
  retainRange: readonly [number, number] | undefined;
}

type Range = readonly [number, number];

/** The intersection of the ranges some members declare: undefined when none does, null when they do not overlap. */
function overlap(ranges: readonly (Range | undefined)[]): Range | undefined | null {
  const declared = ranges.filter((r): r is Range => r !== undefined);
  if (declared.length === 0) return undefined;
  const min = Math.max(...declared.map((r) => r[0]));
  const max = Math.min(...declared.map((r) => r[1]));
  return min <= max ? [min, max] : null;
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
  const ttlRange = overlap(members.map((b) => b.ttlRange));
  if (ttlRange === null)
    fail(WHERE, "the backends' ttl ranges do not overlap: no ttl suits them all", RangeError);
  // Records fires only when every member can, for a retain every member can keep.
  const retainRange = overlap(members.map((b) => b.retainRange));
  const complete = retainRange !== null && members.every((b) => typeof b.complete === "function");
  return { members, n, q, onMemberError, ttlRange, complete, retainRange: retainRange ?? undefined };
}
