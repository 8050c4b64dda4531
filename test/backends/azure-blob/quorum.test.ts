// A quorum of three Azure Blob members (each its own container on the Azurite the harness
// starts) running a fire of runOnce: the quorum's raiseFence must raise a fire's mutex name's
// counter on a member, not only the fire's own token (docs/DESIGN.md §13 step 2, §17). A member
// goes down through its fetch (a network failure), the one fault Azurite cannot produce on demand.
import { describe, expect, inject, it } from "vitest";
import { azureBlob } from "../../../src/backends/azure-blob/index.ts";
import { quorum } from "../../../src/backends/quorum/index.ts";
import { fireKey } from "../../../src/once.ts";

const az = inject("azurite");
const ttl = 15_000;

describe("azure-blob members of a quorum", () => {
  it("a fire's tokens strictly increase when the member that drew the highest one is down next time", async () => {
    const run = crypto.randomUUID().slice(0, 8);
    let down = false;
    const members = [0, 1, 2].map((i) =>
      azureBlob({
        connectionString: az.connectionString,
        container: `q-${run}-${i}`,
        createContainer: true,
        fetch: (url, init) =>
          i === 2 && down ? Promise.reject(new TypeError("fetch failed")) : fetch(url, init),
      }),
    );
    // Member 2's counter for "job" runs ahead (5 plain leases there alone).
    for (let n = 1; n <= 5; n++) {
      const nonce = crypto.randomUUID();
      expect(await members[2]!.acquire({ key: "job", owner: "plain", nonce, ttl })).toEqual({
        ok: true,
        token: n,
      });
      await members[2]!.release({ key: "job", nonce });
    }
    const q = quorum(members, { onMemberError: () => {} });
    const key = await fireKey("job", "tick");
    const first = crypto.randomUUID();
    // Members 0 and 1 draw 1, member 2 draws 6: the quorum's token is 6, raised on 0 and 1.
    expect(await q.acquire({ key, owner: "runner", nonce: first, ttl })).toEqual({ ok: true, token: 6 });
    await q.release({ key, nonce: first }); // the fire failed: no record, the next tick retries it
    down = true;
    const second = await q.acquire({ key, owner: "runner", nonce: crypto.randomUUID(), ttl });
    expect(second.ok).toBe(true);
    expect(second.ok && second.token).toBeGreaterThan(6);
  });
});
