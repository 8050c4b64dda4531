// A Deno script that several hosts run on a schedule (cron, systemd timers, Deno Deploy…):
// whichever takes the lock does the job; the others see who has it and exit. Imports come from
// JSR, as in any Deno project:
//
//   deno add jsr:@leasehold/leasehold
//   UPSTASH_REDIS_REST_URL=… UPSTASH_REDIS_REST_TOKEN=… \
//     deno run --allow-net --allow-env=UPSTASH_REDIS_REST_URL,UPSTASH_REDIS_REST_TOKEN,KV_REST_API_URL,KV_REST_API_TOKEN main.ts
//
// (Here, deno.json maps the jsr: specifiers to this repository's sources so the example is
// type-checked and run against the code it ships with.)
import { createMutex } from "jsr:@leasehold/leasehold";
import { fromEnv } from "jsr:@leasehold/leasehold/upstash";

const mutex = createMutex(fromEnv(), { name: "example-deno-sync", ttl: 10_000 });

/** The job: stop when `signal` aborts; send `token` with every write a stale holder must not make. */
async function sync(signal: AbortSignal, token: number): Promise<string> {
  await new Promise((resolve) => setTimeout(resolve, 100));
  signal.throwIfAborted();
  return `synced with fencing token ${token}`;
}

await using lease = await mutex.tryAcquire();
if (lease) {
  console.log(await sync(lease.signal, lease.token));
} else {
  const holder = await mutex.holder();
  console.log(`skipped: ${holder ? `${holder.owner} (token ${holder.token})` : "someone"} holds the lock`);
}
