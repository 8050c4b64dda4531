// `leasehold status` (cli/status.ts): free, or the holder, and on which backend; --json for machines.
import { afterEach, describe, expect, it } from "vitest";
import { upstash } from "../../src/backends/upstash/index.ts";
import { createMutex, createSemaphore } from "../../src/index.ts";
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

  it("a lock held in shared mode: how many readers, and the newest one", async () => {
    const name = unique("status-shared");
    const backend = upstash({ url: ctx.url, token: ctx.token });
    const on = `upstash at ${ctx.url}`;
    const readers = await Promise.all(
      ["r-a", "r-b"].map((owner) =>
        createMutex(backend, { name, ttl: 5_000, owner }).acquire({ mode: "shared", timeout: 5_000 }),
      ),
    );
    try {
      const held = [cli(["status", "--name", name]), cli(["status", "--name", name, "--json"])];
      expect(await Promise.all(held.map((r) => r.status))).toEqual([0, 0]);
      expect(held[0]!.stdout).toMatch(
        new RegExp(
          `^"${name}" is held shared by 2 readers on ${on}; the newest: r-[ab] \\(token \\d+, ttl left \\d+ ms\\)\\n$`,
        ),
      );
      expect(JSON.parse(held[1]!.stdout)).toMatchObject({ name, holder: { readers: 2 } });
    } finally {
      await Promise.all(readers.map((r) => r.release()));
    }
  });

  it("--limit N shows a semaphore's permits held and by whom; without it, a name used as a semaphore is not called free", async () => {
    const name = unique("status-sem");
    const backend = upstash({ url: ctx.url, token: ctx.token });
    const on = `upstash at ${ctx.url}`;
    const none = cli(["status", "--name", name, "--limit", "2"]);
    expect(await none.status).toBe(0);
    expect(none.stdout).toBe(`"${name}": 0 of 2 permits held on ${on}\n`);
    // exec --limit 1 takes permit 0, as any semaphore of that name with a free permit 0 may.
    const one = await createSemaphore(backend, { name, limit: 1, ttl: 5_000, owner: "p-a" }).acquire({
      timeout: 5_000,
    });
    try {
      const plain = [cli(["status", "--name", name]), cli(["status", "--name", name, "--json"])];
      expect(await Promise.all(plain.map((r) => r.status))).toEqual([0, 0]);
      // It said '"N" is free' while exec --limit held permits.
      expect(plain[0]!.stdout).toMatch(
        new RegExp(
          `^"${name}" is free as a lock on ${on}, but is used as a semaphore: its permit 0 is held by p-a \\(token ${one.token}, ttl left \\d+ ms\\); "leasehold status --limit N --name ${name}" shows its permits\\n$`,
        ),
      );
      expect(JSON.parse(plain[1]!.stdout)).toEqual({
        name,
        holder: null,
        backend: on,
        usedAsSemaphore: true,
      });

      const two = await createSemaphore(backend, { name, limit: 2, ttl: 5_000, owner: "p-b" }).acquire({
        timeout: 5_000,
      });
      try {
        const held = [
          cli(["status", "--name", name, "--limit", "2"]),
          cli(["status", "--name", name, "--limit", "2", "--json"]),
        ];
        expect(await Promise.all(held.map((r) => r.status))).toEqual([0, 0]);
        expect(held[0]!.stdout).toMatch(
          new RegExp(
            `^"${name}": 2 of 2 permits held on ${on}: slot 0 by p-a \\(token ${one.token}, ttl left \\d+ ms\\), slot 1 by p-b \\(token ${two.token}, ttl left \\d+ ms\\)\\n$`,
          ),
        );
        const json = JSON.parse(held[1]!.stdout);
        expect(json).toMatchObject({
          name,
          limit: 2,
          backend: on,
          held: [
            { slot: 0, owner: "p-a", token: one.token },
            { slot: 1, owner: "p-b", token: two.token },
          ],
        });
      } finally {
        await two.release();
      }
    } finally {
      await one.release();
    }
  });
});
