// Deno run WITHOUT --allow-net, type-checked (test/package/runtimes.test.ts): an acquire must fail
// at once with a non-retryable error naming --allow-net, not be retried as a network failure until
// its timeout (issue 27): through the upstash backend (fetch), and through the postgres backend
// over postgres.js (node:net, from the repository's node_modules). Prints NONET_REPORT with what
// each got.
import { createMutex, type Mutex } from "jsr:@leasehold/leasehold";
import { postgres } from "jsr:@leasehold/leasehold/postgres";
import { upstash } from "jsr:@leasehold/leasehold/upstash";
import postgresJs from "postgres";

const env = (name: string) => Deno.env.get(name) ?? "";
const printed: string[] = [];
console.error = (...args: unknown[]) => void printed.push(args.map(String).join(" "));

async function attempt(mutex: Mutex) {
  const started = performance.now();
  const error = await mutex.acquire({ timeout: 60_000 }).then(
    () => undefined,
    (e: unknown) => e as { name?: string; code?: string; retryable?: boolean; message?: string },
  );
  const { name, code, retryable, message } = error ?? {};
  return { ms: Math.round(performance.now() - started), name, code, retryable, message };
}

const upstashRun = await attempt(
  createMutex(upstash({ url: env("UPSTASH_REDIS_REST_URL"), token: env("UPSTASH_REDIS_REST_TOKEN") }), {
    name: "deno-no-net",
  }),
);
const sql = postgresJs(env("SMOKE_POSTGRES_URL"), { max: 1 });
const postgresRun = await attempt(createMutex(postgres(sql), { name: "deno-no-net" }));
await sql.end({ timeout: 1 });
console.log(`NONET_REPORT ${JSON.stringify({ upstash: upstashRun, postgres: postgresRun, printed })}`);
