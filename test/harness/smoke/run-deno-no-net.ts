// Deno run WITHOUT --allow-net, type-checked (test/package/runtimes.test.ts): an acquire through the upstash
// backend must fail at once with a non-retryable error naming --allow-net, not be retried as a
// network failure until its timeout (issue 27). Prints NONET_REPORT with what it got.
import { createMutex } from "jsr:@leasehold/leasehold";
import { upstash } from "jsr:@leasehold/leasehold/upstash";

const url = Deno.env.get("UPSTASH_REDIS_REST_URL") ?? "";
const token = Deno.env.get("UPSTASH_REDIS_REST_TOKEN") ?? "";
const mutex = createMutex(upstash({ url, token }), { name: "deno-no-net" });
const started = performance.now();
const printed: string[] = [];
console.error = (...args: unknown[]) => void printed.push(args.map(String).join(" "));
const error = await mutex.acquire({ timeout: 60_000 }).then(
  () => undefined,
  (e: unknown) => e as { name?: string; code?: string; retryable?: boolean; message?: string },
);
const ms = Math.round(performance.now() - started);
const { name, code, retryable, message } = error ?? {};
console.log(`NONET_REPORT ${JSON.stringify({ ms, name, code, retryable, message, printed })}`);
