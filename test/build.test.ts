// The built package, as a Node 20 user gets it: plain ESM from dist/, no TypeScript, no
// `await using` syntax (Node 20 lacks it), but `Symbol.asyncDispose` on a lease works.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";

const root = new URL("../", import.meta.url);

describe("the built package", () => {
  it("exists: npm test builds it first (run `npm run build`)", () => {
    for (const file of ["dist/index.js", "dist/index.d.ts", "dist/backends/memory.js", "dist/testing.js"]) {
      expect(existsSync(new URL(file, root)), file).toBe(true);
    }
  });

  it("imports by package name in plain Node and disposes a lease with Symbol.asyncDispose", () => {
    const script = `
      import { createMutex, isLockError } from "leasehold";
      import { memory } from "leasehold/memory";
      const store = memory();
      const a = createMutex(store, { name: "built" });
      const lease = await a.acquire();
      const taken = await createMutex(store, { name: "built" }).tryAcquire();
      await lease[Symbol.asyncDispose]();
      const after = await a.holder();
      console.log(JSON.stringify({ token: lease.token, taken, aborted: lease.signal.aborted, after,
        lost: isLockError(lease.signal.reason), node: process.versions.node }));
    `;
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], {
      cwd: new URL(".", root),
      encoding: "utf8",
    });
    const result = JSON.parse(out);
    expect(result).toMatchObject({ token: 1, taken: null, aborted: true, after: null, lost: true });
  });
});
