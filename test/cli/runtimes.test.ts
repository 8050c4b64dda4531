// The command on Bun and Deno (Upstash, and Redis and PostgreSQL through leasehold's own
// clients), and on Azure
// Blob (Azurite).
import { afterEach, describe, expect, inject, it } from "vitest";
import { bare, cli, sh, stopChildren, unique } from "../harness/cli.ts";

afterEach(stopChildren);

const az = inject("azurite");
const redisCtx = inject("redis");
const pgCtx = inject("postgres");

describe("other runtimes and backends", () => {
  it.each(["bun", "deno"] as const)(
    "runs on %s: status, exec passing the status through, exec --once running a fire once",
    async (runtime) => {
      const name = unique(runtime);
      const status = cli(["status", "--name", name], { runtime });
      expect(await status.status, status.stderr).toBe(0);
      expect(status.stdout).toMatch(
        new RegExp(`^"${name}" is free on upstash at http://127\\.0\\.0\\.1:\\d+\n$`),
      );
      const exec = sh(["exec", "--name", name], 'echo "token $LEASEHOLD_TOKEN"; exit 7', {
        runtime,
      });
      expect(await exec.status, exec.stderr).toBe(7);
      expect(exec.stdout).toMatch(/^token \d+\n$/);
      // exec --once: the fire runs once; the next call finds it done and exits 0 without running.
      const once = () =>
        sh(["exec", "--once", "--fire", "f", "--name", name], 'echo "ran $LEASEHOLD_FIRE"', { runtime });
      const ran = once();
      expect(await ran.status, ran.stderr).toBe(0);
      expect(ran.stdout).toBe("ran f\n");
      const again = once();
      expect(await again.status, again.stderr).toBe(0);
      expect(again.stdout).toBe("");
      expect(again.stderr).toMatch(/is already done by/);
      // --version reads the package.json beside the command on this runtime too.
      const version = cli(["--version"], { runtime, env: bare });
      expect(await version.status, version.stderr).toBe(0);
      expect(version.stdout).toMatch(/^\d+\.\d+\.\d+\S*\n$/);
      const none = cli(["status", "--name", name], { runtime, env: bare });
      expect(await none.status).toBe(2);
      expect(none.stderr).toMatch(/UPSTASH_REDIS_REST_URL/);
      // leasehold's own Redis client (node:net) on this runtime: the password and database 1.
      const onRedis = sh(["exec", "--name", name], 'echo "redis $LEASEHOLD_TOKEN"', {
        runtime,
        env: { ...bare, REDIS_URL: `${redisCtx.url}/1` },
      });
      expect(await onRedis.status, onRedis.stderr).toBe(0);
      expect(onRedis.stdout).toMatch(/^redis \d+\n$/);
      // And its own PostgreSQL client (SCRAM-SHA-256 over node:net, the extended query protocol).
      const onPostgres = sh(["exec", "--create-table", "--name", name], 'echo "postgres $LEASEHOLD_TOKEN"', {
        runtime,
        env: { ...bare, DATABASE_URL: pgCtx.url, LEASEHOLD_POSTGRES_TABLE: "cli_runtimes" },
      });
      expect(await onPostgres.status, onPostgres.stderr).toBe(0);
      expect(onPostgres.stdout).toMatch(/^postgres \d+\n$/);
    },
  );

  it("works on Azure Blob (Azurite): status, exec, the ttl range, a wrong key", async () => {
    const name = unique("azure");
    const container = `cli-${crypto.randomUUID().slice(0, 8)}`;
    const env = {
      ...bare,
      AZURE_STORAGE_CONNECTION_STRING: az.connectionString,
      LEASEHOLD_AZURE_CONTAINER: container,
    };
    const exec = sh(["exec", "--name", name, "--create-container"], "exit 5", { env });
    expect(await exec.status, exec.stderr).toBe(5);
    const wrongKey = btoa(crypto.randomUUID());
    const runs = [
      cli(["status", "--name", name], { env }),
      cli(["exec", "--name", name, "--ttl", "2000", "--", "true"], { env }),
      cli(["exec", "--name", name, "--container", "missing-container", "--", "true"], { env }),
      cli(["lead", "--name", name, "--container", "missing-container", "--", "true"], { env }),
      cli(["status", "--name", name], {
        env: {
          ...env,
          AZURE_STORAGE_CONNECTION_STRING: az.connectionString.replace(az.accountKey, wrongKey),
        },
      }),
    ];
    // A missing container is configuration (2, naming the fix), not an unreachable backend (69).
    expect(await Promise.all(runs.map((r) => r.status))).toEqual([0, 2, 2, 2, 2]);
    expect(runs[0]!.stdout).toMatch(
      new RegExp(
        `^"${name}" is free on azure-blob at http://127\\.0\\.0\\.1:\\d+/\\w+, container ${container}\\n$`,
      ),
    );
    expect(runs[1]!.stderr).toMatch(
      /ttl must be from 15000 to 60000 ms for the azure-blob backend, got 2000/,
    );
    for (const r of [runs[2]!, runs[3]!])
      expect(r.stderr).toMatch(
        /\[azure-blob\] container "missing-container" does not exist: create it, or pass --create-container \(azure-blob at /,
      );
    expect(runs[3]!.stderr).not.toContain("createContainer");
    expect(runs[4]!.stderr).toMatch(/HTTP 403/);
    for (const r of runs) {
      expect(r.stdout + r.stderr).not.toContain(az.accountKey);
      expect(r.stdout + r.stderr).not.toContain(wrongKey);
    }
  });
});
