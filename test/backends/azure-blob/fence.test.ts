// The fence step of the azure-blob acquire and raiseFence (src/backends/azure-blob/index.ts):
// after the lease is taken, the token comes from the page blob's sequence number. Faults Azurite cannot produce on
// demand (a failing fence write, a hung give-back, a malformed header) come from a fetch double.
import { describe, expect, it } from "vitest";
import { azureBlob } from "../../../src/backends/azure-blob/index.ts";
import { createMutex, type FetchLike, isLockError } from "../../../src/index.ts";
import { azureFetch, hanging, reply } from "../../harness/doubles.ts";

const azure = (fetch: FetchLike) =>
  azureBlob({ connectionString: "UseDevelopmentStorage=true", container: "locks", fetch });

describe("the fence step of acquire", () => {
  // The give-back release after a failed fence was awaited with its own 5 s timeout, so
  // acquire({ timeout: 200 }) rejected about 5 s late (CHANGELOG.md, Fixed: "An Azure acquire
  // could outlive its timeout").
  it("acquire({ timeout }) is not held up by a hung give-back release", async () => {
    const mutex = createMutex(
      azure(
        azureFetch((what, init) => {
          if (what === "lease:acquire") return reply(201);
          if (what === "HEAD") return reply(200, { "x-ms-blob-type": "PageBlob", etag: '"0x1"' });
          if (what === "properties") return reply(500);
          if (what === "metadata") return reply(200);
          return hanging("", init);
        }),
      ),
      { name: "slow-giveback", ttl: 15_000 },
    );
    const t0 = performance.now();
    await expect(mutex.acquire({ timeout: 200 })).rejects.toMatchObject({ code: "ERR_LOCK_TIMEOUT" });
    // Held up, it would wait for the release's own 5 s bound; a loaded machine took 3.3 s without.
    expect(performance.now() - t0).toBeLessThan(4_500);
  });

  // The sequence number was read with Number(header), so "0x10" or "1e3" became tokens 16 and
  // 1000 (CHANGELOG.md, Fixed: "A fence header that was not decimal became a token").
  it("a sequence number that is not decimal digits is not taken as a fencing token", async () => {
    // (" 7" is not in the list: HTTP trims header whitespace, so it arrives as "7".)
    for (const seq of ["0x10", "1e3", "+7", "7.0", "-7"]) {
      const mutex = createMutex(
        azure(
          azureFetch((what) =>
            what === "properties"
              ? reply(200, { "x-ms-blob-sequence-number": seq })
              : reply(what === "lease:acquire" ? 201 : 200),
          ),
        ),
        { name: "seq", ttl: 15_000 },
      );
      const outcome = await mutex.tryAcquire().then(
        (lease) => `lease with token ${lease?.token}`,
        (e: unknown) => (isLockError(e) ? "LockError" : String(e)),
      );
      expect(outcome, seq).toBe("LockError");
    }
  });
});

describe("raiseFence", () => {
  // It wrote the counter with If-Match "" (and "NaN" for a malformed counter) where acquire's
  // fence step refuses: a HEAD without an ETag (a proxy's answer) comes from a fetch double.
  it("on a block blob whose HEAD has no ETag, is a retryable error and writes nothing", async () => {
    const writes: string[] = [];
    const b = azure(
      azureFetch((what) => {
        if (what === "HEAD") return reply(200, { "x-ms-blob-type": "BlockBlob", "x-ms-meta-fence": "5" });
        writes.push(what);
        return reply(200, { etag: '"0x2"' });
      }),
    );
    const error = await b.raiseFence!({ key: "k", owner: "o", nonce: crypto.randomUUID(), token: 9 }).catch(
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ name: "BackendError", retryable: true });
    expect((error as Error).message).toContain("no usable ETag");
    expect(writes).toEqual([]);
  });
});
