// `leasehold status` (cli/status.ts): free, or the holder, and on which backend; --json for machines.
import { afterEach, describe, expect, it } from "vitest";
import { upstash } from "../../src/backends/upstash/index.ts";
import { createMutex } from "../../src/index.ts";
import { cli, ctx, stopChildren, unique } from "../harness/cli.ts";

afterEach(stopChildren);

describe("leasehold status", () => {
  it("prints free, or the holder's owner, token and ttl left; --json for machines", async () => {
    const name = unique("status");
    const free = [cli(["status", "--name", name]), cli(["status", "--name", name, "--json"])];
    expect(await Promise.all(free.map((r) => r.status))).toEqual([0, 0]);
    const on = `upstash at ${ctx.url}`;
    expect(free[0]!.stdout).toBe(`"${name}" is free on ${on}\n`);
    expect(JSON.parse(free[1]!.stdout)).toEqual({ name, holder: null, backend: on });

    const lease = await createMutex(upstash({ url: ctx.url, token: ctx.token }), {
      name,
      ttl: 5_000,
      owner: "status-owner",
    }).acquire({ timeout: 5_000 });
    try {
      const held = [cli(["status", "--name", name]), cli(["status", "--name", name, "--json"])];
      expect(await Promise.all(held.map((r) => r.status))).toEqual([0, 0]);
      expect(held[0]!.stdout).toMatch(
        new RegExp(
          `^"${name}" is held by status-owner \\(token ${lease.token}, ttl left \\d+ ms\\) on upstash at `,
        ),
      );
      const json = JSON.parse(held[1]!.stdout);
      expect(json).toMatchObject({ name, holder: { owner: "status-owner", token: lease.token } });
      expect(json.holder.ttlLeft).toBeGreaterThan(0);
      expect(json.holder.ttlLeft).toBeLessThanOrEqual(5_000);
    } finally {
      await lease.release();
    }
  });
});
