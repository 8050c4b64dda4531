// The error classes: stable codes and names, and isLockError across realms.
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { BackendError, isLockError, LeaseLostError, LockTimeoutError } from "../../src/index.ts";

describe("errors", () => {
  it("carry stable codes and names", () => {
    const e = new BackendError("nope", { backend: "upstash", status: 401, retryable: false, auth: true });
    expect([e.code, e.name, e.status, e.backend, e.message]).toEqual([
      "ERR_BACKEND_AUTH",
      "BackendError",
      401,
      "upstash",
      "[leasehold] [upstash] nope",
    ]);
    expect(new LockTimeoutError("t").code).toBe("ERR_LOCK_TIMEOUT");
    expect(new LeaseLostError("l").code).toBe("ERR_LEASE_LOST");
  });

  it("isLockError works across realms and rejects look-alikes", () => {
    const foreign = runInNewContext(
      "(() => { const e = new Error('x'); Object.defineProperty(e, 'name', { value: 'LeaseLostError' }); e.code = 'ERR_LEASE_LOST'; return e; })()",
    );
    expect(foreign instanceof Error).toBe(false);
    expect(isLockError(foreign)).toBe(true);
    expect(isLockError(new Error("x"))).toBe(false);
    expect(isLockError({ name: "TypeError", code: "ERR_X" })).toBe(false);
    expect(isLockError(null)).toBe(false);
  });
});
