// Wake on release on Deno KV (test/backends/deno-kv/wake-checks.ts): on Node through @deno/kv,
// in memory and in a SQLite file, and natively in Deno (Deno.openKv on a SQLite file) through a
// runner process.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openKv } from "@deno/kv";
import { afterAll, describe, expect, it } from "vitest";
import type { KvLike } from "../../../src/backends/deno-kv/index.ts";
import { wakeChecks } from "./wake-checks.ts";

const dir = mkdtempSync(join(tmpdir(), "leasehold-kv-wake-"));
const open: { close(): void }[] = [];
afterAll(() => {
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

it("natively in Deno (Deno.openKv, a SQLite file)", () => {
  const r = spawnSync(
    "node_modules/.bin/deno",
    [
      "run",
      "--unstable-kv",
      `--allow-read=${dir}`,
      `--allow-write=${dir}`,
      "--allow-env",
      "test/harness/fixtures/kv-wake-runner.ts",
    ],
    {
      encoding: "utf8",
      env: {
        ...process.env,
        LH_KV_PATH: join(dir, "deno.sqlite"),
        DENO_NO_UPDATE_CHECK: "1",
        DENO_NO_PROMPT: "1",
      },
      timeout: 120_000,
    },
  );
  const results = r.stdout
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as { name: string; ok: boolean; error?: string });
  expect(r.status, `deno exited ${r.status}: ${r.stderr.slice(-2_000)}`).toBe(0);
  expect(results.filter((x) => !x.ok)).toEqual([]);
  expect(results).toHaveLength(3);
}, 130_000);
