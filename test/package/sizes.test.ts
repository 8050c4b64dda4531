// The size ceilings (scripts/sizes.mjs): check-bundles, which `npm test` runs, judges the same
// bundles bench/size.ts reports, and a ceiling it is over is a failure, not a note.
import { describe, expect, it } from "vitest";
import { runSize } from "../../bench/size.ts";
import { CEILINGS, checkBudgets } from "../../scripts/sizes.mjs";

describe("size budgets", () => {
  it("are judged on the bundles bench/size.ts measures, byte for byte", async () => {
    const [judged, reported] = await Promise.all([checkBudgets(), runSize()]);
    expect(judged.map((r) => r.id).sort()).toEqual(["azure", "core", "memory", "upstash"]);
    for (const row of judged) {
      const same = reported.rows.find((r) => r.id === row.id)!;
      expect({ id: row.id, minified: row.minified, gzip: row.gzip }).toEqual({
        id: same.id,
        minified: same.minified,
        gzip: same.gzip,
      });
      expect(row.budget).toBe(CEILINGS[row.id as keyof typeof CEILINGS]);
      expect(row.over).toBe(Math.max(0, row.gzip - row.budget));
    }
  }, 60_000);

  it("say by how much an entry is over, and 0 when within", async () => {
    const [over, within] = await checkBudgets({ core: 1_000, memory: 1_000_000 });
    expect(over).toMatchObject({ id: "core", budget: 1_000 });
    expect(over!.over).toBe(over!.gzip - 1_000);
    expect(over!.over).toBeGreaterThan(0);
    expect(within).toMatchObject({ id: "memory", over: 0 });
  }, 60_000);
});
