// Observed expiry on DynamoDB (dynalite): how soon a crashed holder's lock is taken over, and a
// holder whose renewals stall (the fault proxy hangs them) while a contender watches. The
// contender's backend is wrapped only to record when each acquire was sent and answered.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { AcquireResult, Backend } from "../../../src/backend.ts";
import { dynamodb } from "../../../src/backends/dynamodb/index.ts";
import { createMutex, isLockError } from "../../../src/index.ts";
import { observedWait } from "../../../src/timing.ts";
import { dynamodbRenewal } from "../../harness/invariant.ts";
import { type FaultProxy, startFaultProxy } from "../../harness/servers/fault-proxy.ts";

const { endpoint, region, credentials, table } = inject("dynamodb");
const TTL = 2_000; // a renewal on a loaded machine must not lose the holder before the stall begins
const make = (url = endpoint) => dynamodb({ table, region, credentials, endpoint: url });
const unique = (what: string) => `${what}-${crypto.randomUUID().slice(0, 8)}`;

interface Attempt {
  sent: number;
  answered: number;
  takeover: string | undefined;
  result: AcquireResult;
}

/** `backend` with each acquire recorded: sent and answered (performance.now()), takeover asked, result. */
function recorded(backend: Backend): { backend: Backend; attempts: Attempt[] } {
  const attempts: Attempt[] = [];
  return {
    attempts,
    backend: {
      ...backend,
      async acquire(r) {
        const sent = performance.now();
        const result = await backend.acquire(r);
        attempts.push({ sent, answered: performance.now(), takeover: r.takeover, result });
        return result;
      },
    },
  };
}

let proxy: FaultProxy;
beforeAll(() => {
  proxy = startFaultProxy(endpoint);
});
afterAll(() => proxy?.stop());

describe("observed expiry on DynamoDB", () => {
  it(`a crashed holder's lock is taken over no sooner than ttl + margin (${observedWait(TTL)} ms) after the contender first saw it, and not much later`, async () => {
    const name = unique("crash");
    // A holder that wrote once and died: no renewal, no release.
    const crashed = await make().acquire({
      key: name,
      owner: "crashed",
      nonce: crypto.randomUUID(),
      ttl: TTL,
    });
    expect(crashed.ok).toBe(true);
    const { backend, attempts } = recorded(make());
    const lease = await createMutex(backend, { name, ttl: TTL, owner: "contender", retryDelay: 50 }).acquire({
      timeout: 10_000,
    });
    const first = attempts[0]!;
    const last = attempts.at(-1)!;
    expect(first.result.ok).toBe(false);
    expect(last.takeover).toBe((first.result as { version: string }).version);
    const after = last.sent - first.answered;
    expect(after).toBeGreaterThanOrEqual(observedWait(TTL));
    expect(last.answered - first.answered).toBeLessThan(observedWait(TTL) + 750);
    expect(lease.token).toBeGreaterThan((crashed as { token: number }).token);
    await lease.release();
    // Released: free at once, no observation needed.
    const next = recorded(make());
    const again = await createMutex(next.backend, { name, ttl: TTL, owner: "next" }).tryAcquire();
    expect(again).not.toBeNull();
    expect(next.attempts).toHaveLength(1);
    await again!.release();
  });

  it("a holder's renewals stall while a contender observes: no takeover before ttl of unchanged version, and the holder's signal aborted first", async () => {
    const name = unique("stall");
    let stall = false;
    proxy.setRule((req) =>
      req.client === "holder" && stall && dynamodbRenewal(req.body) ? { kind: "hang" } : undefined,
    );
    try {
      const holderUrl = await proxy.client("holder");
      const holder = await createMutex(make(holderUrl), { name, ttl: TTL, owner: "holder" }).acquire({
        timeout: 5_000,
      });
      let abortedAt = Number.NaN;
      holder.signal.addEventListener("abort", () => (abortedAt = performance.now()), { once: true });
      const { backend, attempts } = recorded(make());
      const contending = createMutex(backend, { name, ttl: TTL, owner: "contender", retryDelay: 50 }).acquire(
        {
          timeout: 15_000,
        },
      );
      // Let the contender watch a renewing holder for a while, then stall every renewal.
      await new Promise((r) => setTimeout(r, 1.5 * TTL));
      stall = true;
      const lease = await contending;
      const takeover = attempts.at(-1)!;
      expect(takeover.takeover).toBeDefined();
      expect(takeover.result.ok).toBe(true);

      // The contender saw the version change while the holder renewed (no takeover then).
      const versions = attempts.flatMap((a) => (a.result.ok ? [] : [a.result.version]));
      expect(new Set(versions).size).toBeGreaterThan(1);
      // The version it took over had been unchanged, in its own observation, for ttl + margin.
      const firstSeen = attempts.find((a) => !a.result.ok && a.result.version === takeover.takeover)!;
      expect(takeover.sent - firstSeen.answered).toBeGreaterThanOrEqual(observedWait(TTL));
      // The stalled holder knew first: its signal aborted (deadline passed) before the takeover was sent.
      expect(holder.signal.aborted).toBe(true);
      expect(isLockError(holder.signal.reason) && holder.signal.reason.code).toBe("ERR_LEASE_LOST");
      expect(abortedAt).toBeLessThan(takeover.sent);
      expect(lease.token).toBeGreaterThan(holder.token);
      await lease.release();
      await holder.release().catch(() => {});
    } finally {
      proxy.setRule(undefined);
      proxy.heal();
    }
  });
});
