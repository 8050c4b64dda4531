// Observed expiry on Deno KV (through @deno/kv, in memory): a holder whose renewals stall is not
// taken over before its record stayed unchanged for ttl + margin after the contender first saw it,
// and its signal aborts first; a holder that crashed is taken over within that bound plus one
// attempt. The stall is injected by a wrapper whose renew never answers, as if the holder froze.
import { openKv } from "@deno/kv";
import { afterAll, expect, it } from "vitest";
import type { Backend } from "../../../src/backend.ts";
import { denoKv, type KvLike } from "../../../src/backends/deno-kv/index.ts";
import { createMutex } from "../../../src/index.ts";
import { observedWait } from "../../../src/timing.ts";

const kv = await openKv();
afterAll(() => kv.close());
const store = denoKv(kv as unknown as KvLike);

/** The store, with renewals that hang once `frozen` (no answer, ever: a frozen or cut-off holder). */
function stalling(): { backend: Backend; freeze(): void } {
  let frozen = false;
  return {
    backend: {
      ...store,
      renew: (r) => (frozen ? new Promise<boolean>(() => {}) : store.renew(r)),
    },
    freeze: () => {
      frozen = true;
    },
  };
}

it("a holder whose renewals stall: the contender waits for ttl + margin of unchanged version from its first look; the holder's signal aborted first", async () => {
  const ttl = 1_000;
  const name = `stall-${crypto.randomUUID().slice(0, 8)}`;
  const h = stalling();
  const holder = await createMutex(h.backend, { name, ttl, owner: "holder" }).acquire();
  const aborted = new Promise<number>((resolve) =>
    holder.signal.addEventListener("abort", () => resolve(performance.now()), { once: true }),
  );
  await new Promise((r) => setTimeout(r, ttl / 2)); // a renewal or two went through
  h.freeze();
  const contender = createMutex(store, { name, ttl, owner: "contender", retryDelay: 50 });
  const firstLook = performance.now();
  expect(await contender.tryAcquire()).toBeNull();
  const lease = await contender.acquire({ timeout: 5 * ttl });
  const tookOver = performance.now();
  expect(tookOver - firstLook).toBeGreaterThanOrEqual(observedWait(ttl));
  expect(await aborted).toBeLessThan(tookOver);
  expect(lease.token).toBeGreaterThan(holder.token);
  await lease.release();
});

it("a crashed holder is taken over within ttl + margin of the contender's first look, plus one attempt", async () => {
  const ttl = 1_000;
  const name = `crash-${crypto.randomUUID().slice(0, 8)}`;
  // The holder writes its lease and is gone (no renewal, no release).
  const gone = await store.acquire({ key: name, owner: "gone", nonce: crypto.randomUUID(), ttl });
  expect(gone.ok).toBe(true);
  const contender = createMutex(store, { name, ttl, owner: "contender", retryDelay: 1_000 });
  const firstLook = performance.now();
  const lease = await contender.acquire({ timeout: 5 * ttl });
  const took = performance.now() - firstLook;
  expect(took).toBeGreaterThanOrEqual(observedWait(ttl));
  // The bound: the contender sleeps until the version it saw has aged enough (the core's
  // retryAfter), then takes it over in one more attempt.
  expect(took).toBeLessThan(observedWait(ttl) + 500);
  await lease.release();
  expect(await store.inspect({ key: name })).toBeNull();
});
