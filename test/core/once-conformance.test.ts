// The conformance suite's checks of `complete` (leasehold/testing, src/testing/once.ts) over memory
// stores broken on purpose, one way each: every one of these passed the checks before they were
// strengthened (a reviewer's wrapper kept the record 1 s whatever `retain` said and hid it from
// inspect). Each must now fail the check that guards that part of the contract, with its message.
import { describe, expect, it } from "vitest";
import type { Backend } from "../../src/backend.ts";
import { memory } from "../../src/backends/memory/index.ts";
import { conformanceChecks } from "../../src/testing/index.ts";

/** Runs the conformance check whose name matches `pattern` on `backend`. */
const run = (backend: () => Backend, pattern: RegExp): Promise<void> => {
  const found = conformanceChecks({ backend }).filter((c) => pattern.test(c.name));
  if (found.length !== 1) throw new Error(`${found.length} checks match ${pattern}`);
  return found[0]!.run();
};
const first = /^complete, where offered: the holder's complete records the fire/;
const expiry = /^complete, where offered: the record lasts retain/;
const expired = /^complete, where offered: a complete after the lease expired/;
const fence = /^complete and raiseFence, where offered/;
const any = /^complete and acquireAny, where offered/;
const queued = /^complete and acquireQueued, where offered/;

/** A memory store with `change` over it; `store` is the memory store underneath. */
const broken = (change: (store: Backend) => Partial<Backend>) => (): Backend => {
  const store = memory();
  return { ...store, ...change(store) };
};

/** The reviewer's wrapper: complete keeps the record 1 s whatever retain says; inspect hides it. */
const reviewers = broken((store) => ({
  complete: (r) => store.complete!({ ...r, retain: 1_000 }),
  inspect: async (r) => {
    const seen = await store.inspect(r);
    return seen?.done ? null : seen;
  },
}));

describe("conformance checks of complete, over stores broken on purpose", () => {
  it("fail the reviewer's wrapper: inspect hides the record, and the record does not last retain", async () => {
    await expect(run(reviewers, first)).rejects.toThrow(/inspect of a completed fire at once answered null/);
    await expect(run(reviewers, expiry)).rejects.toThrow(
      /acquire on a completed fire \d+ ms into its retain of 4500 ms answered \{"ok":true/,
    );
  });

  it("fail a store that grants the runner's own nonce again after complete (as a renewal)", async () => {
    const renewing = broken((store) => {
      const completed = new Set<string>();
      return {
        complete: async (r) => (await store.complete!(r)) && completed.add(r.nonce) !== undefined,
        acquire: async (r) =>
          completed.has(r.nonce) ? { ok: true, token: (await store.inspect(r))!.token } : store.acquire(r),
      };
    });
    await expect(run(renewing, first)).rejects.toThrow(/the runner's own acquire, retried with its nonce/);
  });

  it("fail a store whose complete records a fire whose lease had expired", async () => {
    const late = broken((store) => {
      const leases = new Map<string, { owner: string; ttl: number }>();
      return {
        acquire: async (r) => {
          const got = await store.acquire(r);
          if (got.ok) leases.set(r.nonce, r);
          return got;
        },
        // Takes the key again with the expired lease's nonce instead of answering false.
        complete: async (r) => {
          if (await store.complete!(r)) return true;
          const lease = leases.get(r.nonce);
          return lease !== undefined && (await store.acquire({ ...r, ...lease })).ok && store.complete!(r);
        },
      };
    });
    await expect(run(late, expired)).rejects.toThrow("complete after the lease expired answered true");
  });

  it("fail a store whose raiseFence answers true on a record", async () => {
    const raising = broken((store) => ({
      raiseFence: async (r) => (await store.inspect(r))?.done === true || store.raiseFence!(r),
    }));
    await expect(run(raising, fence)).rejects.toThrow(
      /raiseFence on a record with the runner's nonce answered true/,
    );
  });

  it("fail a store whose acquireAny takes a recorded key", async () => {
    const taking = broken((store) => ({
      acquireAny: async (r) => {
        for (const [index, key] of r.keys.entries())
          if ((await store.inspect({ key }))?.done) return { ok: true, token: 1e9, index };
        return store.acquireAny!(r);
      },
    }));
    await expect(run(taking, any)).rejects.toThrow(/acquireAny on a recorded key alone answered \{"ok":true/);
  });

  it("pass acquireQueued that answers done at once; fail one that answers without done, or not at all", async () => {
    await run(
      broken((store) => ({ acquireQueued: (r) => store.acquire(r) })),
      queued,
    );
    const busy = broken((store) => ({
      acquireQueued: async (r) => {
        const got = await store.acquire(r);
        return got.ok ? got : { ok: false, retryAfter: 0 };
      },
    }));
    await expect(run(busy, queued)).rejects.toThrow(
      /acquireQueued on a recorded key answered \{"ok":false,"retryAfter":0\}/,
    );
    const hanging = broken((store) => ({
      acquireQueued: async (r) => {
        const got = await store.acquire(r);
        return got.ok ? got : new Promise<never>(() => {});
      },
    }));
    await expect(run(hanging, queued)).rejects.toThrow(
      "acquireQueued on a recorded key gave no answer in its hold of 5000 ms",
    );
  }, 30_000);

  it("pass plain memory", async () => {
    for (const pattern of [first, expiry, expired, fence, any, queued]) await run(() => memory(), pattern);
  }, 30_000);
});
