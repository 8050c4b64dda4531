// The conformance suite (observed-expiry checks included) against Deno KV: on Node through
// @deno/kv, in memory and in a SQLite file, and natively in Deno (Deno.openKv on a SQLite file)
// and in Bun (@deno/kv with its string-only serializer) through a runner process each.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeLimitedV8Serializer, openKv } from "@deno/kv";
import { afterAll, describe, expect, it } from "vitest";
import { denoKv, type KvLike } from "../../../src/backends/deno-kv/index.ts";
import { testBackend } from "../../../src/testing/index.ts";

const dir = mkdtempSync(join(tmpdir(), "leasehold-kv-"));
const open: { close(): void }[] = [];
const kvAt = async (path?: string, limited = false): Promise<KvLike> => {
  const kv = await openKv(path, limited ? makeLimitedV8Serializer() : {});
  open.push(kv);
  return kv as unknown as KvLike;
};
afterAll(() => {
  for (const kv of open) kv.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("deno-kv through @deno/kv on Node, in memory", () => {
  testBackend({ describe, it }, { backend: async () => denoKv(await kvAt()), ttl: 1_000 });
});
describe("deno-kv through @deno/kv on Node, a SQLite file", () => {
  const file = join(dir, "node.sqlite");
  testBackend(
    { describe, it },
    { backend: async () => denoKv(await kvAt(file), { prefix: ["app", 1] }), ttl: 1_000, cycles: 200 },
  );
});
describe("deno-kv through @deno/kv on Node with makeLimitedV8Serializer (the one Bun needs), a SQLite file", () => {
  // That serializer reads U+0080-U+00FF back wrong and writes a string's length in one byte: the
  // owner checks see Latin-1 owners round-trip (the record is ASCII) and the longest refused.
  const file = join(dir, "limited.sqlite");
  testBackend(
    { describe, it },
    {
      backend: async () => denoKv(await kvAt(file, true)),
      ttl: 1_000,
      cycles: 100,
    },
  );
});

/** Runs the conformance runner on a runtime; every check must pass. */
function runner(cmd: string[], env: Record<string, string>) {
  const r = spawnSync(cmd[0]!, [...cmd.slice(1), "test/harness/fixtures/conformance-runner.ts"], {
    encoding: "utf8",
    env: { ...process.env, ...env, DENO_NO_UPDATE_CHECK: "1", DENO_NO_PROMPT: "1" },
    timeout: 120_000,
  });
  const lines = r.stdout.split("\n").filter((l) => l.startsWith("{"));
  const results = lines.map((l) => JSON.parse(l) as { name: string; ok: boolean; error?: string });
  expect(r.status, `${cmd[0]} exited ${r.status}: ${r.stderr.slice(-2_000)}`).toBe(0);
  expect(results.filter((x) => !x.ok)).toEqual([]);
  expect(results.length).toBeGreaterThanOrEqual(11);
}

it("passes natively in Deno (Deno.openKv, a SQLite file)", () => {
  const file = join(dir, "deno.sqlite");
  runner(
    [
      "node_modules/.bin/deno",
      "run",
      "--unstable-kv",
      `--allow-read=${dir}`,
      `--allow-write=${dir}`,
      "--allow-env",
    ],
    { LH_KV: "deno", LH_KV_PATH: file },
  );
}, 130_000);

it("passes in Bun (@deno/kv with makeLimitedV8Serializer, a SQLite file)", () => {
  runner(["node_modules/.bin/bun"], { LH_KV: "bun", LH_KV_PATH: join(dir, "bun.sqlite") });
}, 130_000);
