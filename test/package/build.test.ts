// The built package, as a Node 20 user gets it: plain ESM from dist/, no TypeScript, no
// `await using` syntax (Node 20 lacks it), but `Symbol.asyncDispose` on a lease works.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";

const root = new URL("../../", import.meta.url);

describe("the built package", () => {
  it("exists: npm test builds it first (run `npm run build`)", () => {
    for (const file of [
      "dist/index.js",
      "dist/index.d.ts",
      "dist/backends/memory/index.js",
      "dist/testing/index.js",
    ]) {
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

  it("a held lease's renewal and deadline timers do not keep the process alive", () => {
    // ttl 60 s with background renewal: if a timer were ref'ed, node would stay up for a minute.
    const script = `
      import { createMutex } from "leasehold";
      import { memory } from "leasehold/memory";
      const lease = await createMutex(memory(), { name: "held", ttl: 60000 }).acquire();
      console.log(lease.token);
    `;
    const started = performance.now();
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], {
      cwd: new URL(".", root),
      encoding: "utf8",
      timeout: 20_000,
    });
    expect(out.trim()).toBe("1");
    expect(performance.now() - started).toBeLessThan(15_000);
  });
});
