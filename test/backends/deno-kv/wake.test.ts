// Wake on release on Deno KV (test/backends/deno-kv/wake-checks.ts): on Node through @deno/kv,
// in memory and in a SQLite file, and natively in Deno (Deno.openKv on a SQLite file) through a
// runner process.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openKv } from "@deno/kv";
import { afterAll, describe, expect, it } from "vitest";
import type { KvLike } from "../../../src/backends/deno-kv/index.ts";
import { denoIn, runKvChecks, stopKvRunners } from "../../harness/kv-runner.ts";
import { wakeChecks } from "./wake-checks.ts";

const dir = mkdtempSync(join(tmpdir(), "leasehold-kv-wake-"));
const open: { close(): void }[] = [];
afterAll(async () => {
  await stopKvRunners();
  for (const kv of open) kv.close();
  rmSync(dir, { recursive: true, force: true });
});

for (const [where, path] of [
  ["in memory", undefined],
  ["a SQLite file", join(dir, "node.sqlite")],
] as const) {
  describe(`@deno/kv on Node, ${where}`, async () => {
    const kv = await openKv(path);
    open.push(kv);
    for (const check of wakeChecks(kv as unknown as KvLike)) it(check.name, () => check.run(), 30_000);
  });
}

it("natively in Deno (Deno.openKv, a SQLite file)", async () => {
  const ran = await runKvChecks(
    denoIn(dir),
    { LH_KV: "deno", LH_KV_PATH: join(dir, "deno.sqlite"), LH_CHECKS: "wake" },
    3,
  );
  expect(ran).toEqual(wakeChecks(undefined as unknown as KvLike).map((c) => c.name));
}, 130_000);
