// The conformance suite's own exclusivity checks (leasehold/testing), over memory stores that
// misbehave on purpose: a split vote is a fault of a quorum that real servers produce only under
// load, so it is simulated here (every attempt that overlaps another on the same key is refused,
// as when no contender reaches a quorum). With `splitVotes` the checks accept a contended lock
// or slot that nobody won, provided the next attempt takes it; without, they do not; and a store
// that grants one lock twice fails them either way.
import { describe, expect, it } from "vitest";
import type { Backend } from "../../src/backend.ts";
import { memory } from "../../src/backends/memory/index.ts";
import { type ConformanceOptions, conformanceChecks } from "../../src/testing/index.ts";

/** A memory store on which attempts that overlap on one key all lose (a split vote). */
function splitting(): Backend {
  const store = memory();
  const open = new Map<string, { split: boolean }[]>();
  return {
    name: "splitting",
    async acquire(r) {
      const mine = { split: false };
      const list = open.get(r.key) ?? [];
      open.set(r.key, list);
      list.push(mine);
      if (list.length > 1) for (const c of list) c.split = true;
      await new Promise((resolve) => setTimeout(resolve, 5));
      list.splice(list.indexOf(mine), 1);
      return mine.split ? { ok: false, retryAfter: 0 } : store.acquire(r);
    },
    renew: store.renew,
    release: store.release,
    inspect: store.inspect,
    raiseFence: store.raiseFence!,
  };
}

/** A memory store that grants every attempt, held or not. */
function granting(): Backend {
  const store = memory();
  let token = 0;
  return {
    ...store,
    name: "granting",
    acquireAny: undefined,
    acquire: async () => ({ ok: true, token: ++token }),
  };
}

/** Runs the conformance check whose name matches `pattern`. */
const run = (options: ConformanceOptions, pattern: RegExp): Promise<void> => {
  const found = conformanceChecks(options).find((c) => pattern.test(c.name));
  if (!found) throw new Error(`no check matches ${pattern}`);
  return found.run();
};
const mutex = (o: ConformanceOptions) => run(o, /^(exactly|at most) one of \d+ concurrent/);
const semaphore = (o: ConformanceOptions) => run(o, /^semaphore: of \d+ concurrent/);

describe("conformance exclusivity checks", () => {
  it("with splitVotes, pass when the contenders split the vote and the next attempt wins", async () => {
    await mutex({ backend: splitting, splitVotes: true });
    await semaphore({ backend: splitting, splitVotes: true });
  });
  it("without splitVotes, fail when contention leaves the lock or a slot to nobody", async () => {
    await expect(mutex({ backend: splitting })).rejects.toThrow("expected exactly 1 lease, got 0");
    await expect(semaphore({ backend: splitting })).rejects.toThrow(/expected 3 permits, got [0-2]$/);
  });
  it("fail a store that grants one lock to several contenders, with splitVotes or not", async () => {
    for (const splitVotes of [false, true]) {
      await expect(mutex({ backend: granting, splitVotes })).rejects.toThrow(
        "expected exactly 1 lease, got 100",
      );
      await expect(semaphore({ backend: granting, splitVotes })).rejects.toThrow(
        "expected 3 permits, got 20",
      );
    }
  });
});
