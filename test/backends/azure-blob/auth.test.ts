// Bearer tokens from a TokenCredential (src/backends/azure-blob/auth.ts): one shared refresh for
// every concurrent caller, and how a failing getToken is reported. The fetch double answers 404
// to everything: these tests are about the token, not the blob.
import { describe, expect, it } from "vitest";
import { azureBlob } from "../../../src/backends/azure-blob/index.ts";
import { type FetchLike, isLockError } from "../../../src/index.ts";
import { sleep } from "../../../src/time.ts";
import { reply } from "../../harness/doubles.ts";

const notFound: FetchLike = () => reply(404);

describe("bearer tokens", () => {
  // The shared refresh carried the first caller's signal: its timeout failed every concurrent
  // caller with a non-retryable ERR_BACKEND_AUTH (CHANGELOG.md, Fixed: "One caller's timeout
  // failed everyone's Azure token").
  it("one caller's abort does not fail another caller waiting for the same token", async () => {
    const credential = {
      getToken: async () => {
        await sleep(100);
        return { token: "token-for-tests-0123456789", expiresOnTimestamp: Date.now() + 3_600_000 };
      },
    };
    const backend = azureBlob({
      accountUrl: "https://acct.blob.core.windows.net",
      credential,
      container: "locks",
      fetch: notFound,
    });
    const hurried = backend.inspect({ key: "x", signal: AbortSignal.timeout(10) }).catch((e: unknown) => e);
    const patient = backend.inspect({ key: "y" });
    expect(isLockError(await hurried) || (await hurried) instanceof Error).toBe(true);
    await expect(patient).resolves.toBeNull();
  });

  it("a getToken that timed out is retryable; any other failure is an auth error", async () => {
    const failing = (name: string) => ({
      getToken: async () => {
        const error = new Error("no token");
        error.name = name;
        throw error;
      },
    });
    const inspect = (name: string) =>
      azureBlob({
        accountUrl: "https://acct.blob.core.windows.net",
        credential: failing(name),
        container: "locks",
        fetch: notFound,
      })
        .inspect({ key: "x" })
        .catch((e: unknown) => e as { code: string; retryable: boolean });
    expect(await inspect("TimeoutError")).toMatchObject({ code: "ERR_BACKEND", retryable: true });
    expect(await inspect("AuthenticationError")).toMatchObject({
      code: "ERR_BACKEND_AUTH",
      retryable: false,
    });
  });
});
