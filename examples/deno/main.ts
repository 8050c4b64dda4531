// A Deno script that several hosts run every hour (cron, systemd timers): the sync must run once
// per hour, not once per host. `runOnce` keys the run by the hour (`nearestTick`: the tick
// nearest to now, so a host whose clock or start is a little off names the same hour); the first
// host runs it and records it as done, and a host that comes later in the hour, even after the
// first finished, skips it. Imports come from JSR, as in any Deno project:
//
//   deno add jsr:@leasehold/leasehold
//   UPSTASH_REDIS_REST_URL=… UPSTASH_REDIS_REST_TOKEN=… \
//     deno run --allow-net --allow-env=UPSTASH_REDIS_REST_URL,UPSTASH_REDIS_REST_TOKEN,KV_REST_API_URL,KV_REST_API_TOKEN main.ts
//
// (Here, deno.json maps the jsr: specifiers to this repository's sources so the example is
// type-checked and run against the code it ships with.)
import { createMutex, nearestTick, runOnce } from "jsr:@leasehold/leasehold";
import { fromEnv } from "jsr:@leasehold/leasehold/upstash";

const HOUR = 3_600_000;
const mutex = createMutex(fromEnv(), { name: "example-deno-sync", ttl: 10_000 });

/** The job: stop when `signal` aborts; send `token` with every write a stale holder must not make. */
async function sync(signal: AbortSignal, token: number): Promise<string> {
  await new Promise((resolve) => setTimeout(resolve, 100));
  signal.throwIfAborted();
  return `synced with fencing token ${token}`;
}

const hour = nearestTick(HOUR);
const result = await runOnce(mutex, hour, (signal, lease) => sync(signal, lease.token));
if (result.ran) console.log(result.value);
else if (result.by) console.log(`skipped: ${result.by.owner} ran this hour (token ${result.by.token})`);
else console.log("skipped: another host is running this hour's sync");
