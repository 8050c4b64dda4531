// Bun's built-in clients, under Bun: the conformance checks against redis(new RedisClient(url))
// on the shared redis-server and postgres(new SQL(url)) on the shared PostgreSQL server
// (test/harness/fixtures/bun-conformance.ts, one JSON line per check). Bun is the npm `bun`
// devDependency.
import { spawn } from "node:child_process";
import { expect, inject, it } from "vitest";
import { registerSecret } from "../harness/secrets.ts";

const redisCtx = inject("redis");
const pg = inject("postgres");
registerSecret(redisCtx.password);
registerSecret(pg.password);

interface Line {
  suite?: string;
  check?: string;
  ok?: boolean;
  error?: string;
  done?: boolean;
  failed?: number;
  bun?: string;
}

it("Bun's RedisClient and SQL pass the conformance checks", { timeout: 120_000 }, async () => {
  const child = spawn("node_modules/.bin/bun", ["run", "test/harness/fixtures/bun-conformance.ts"], {
    env: { ...process.env, REDIS_URL: redisCtx.url, POSTGRES_URL: pg.url },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
  child.stderr.setEncoding("utf8").on("data", (c: string) => (err += c));
  const code = await new Promise<number | null>((r) => child.once("exit", r));
  const lines: Line[] = out
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l));
  const failures = lines.filter((l) => l.ok === false);
  expect(failures, err).toEqual([]);
  expect(code, err).toBe(0);
  const done = lines.at(-1);
  expect(done).toMatchObject({ done: true, failed: 0 });
  expect(String(done?.bun)).toMatch(/^1\./);
  // Every check ran for both clients.
  for (const suite of ["Bun RedisClient", "Bun SQL"])
    expect(lines.filter((l) => l.suite === suite && l.ok).length).toBeGreaterThanOrEqual(8);
});
