// `npm run demo`: three workers elect a leader; the leader works, then crashes (it stops
// renewing and never releases); a follower takes over within one ttl. Runs on the embedded
// memory backend, or on Upstash / Azure when their environment variables are set. The demo shows
// a failover, not an outage: the backend's first failure (a wrong URL or credentials) is printed
// at once and ends it with exit status 1.
import type { Backend } from "../src/backend.ts";
import { memory } from "../src/backends/memory/index.ts";
import { explain } from "../src/errors.ts";
import { createMutex, type Lease } from "../src/index.ts";
import { sleep } from "../src/time.ts";

const env = process.env;

async function chooseBackend(): Promise<{ backend: Backend; ttl: number; label: string }> {
  const adapters = new URL("../src/backends/", import.meta.url);
  if (env.UPSTASH_REDIS_REST_URL && env.UPSTASH_REDIS_REST_TOKEN) {
    const { fromEnv } = await import(new URL("upstash/index.ts", adapters).href);
    return { backend: fromEnv(env), ttl: 3_000, label: "Upstash Redis (from UPSTASH_REDIS_REST_URL)" };
  }
  if (env.AZURE_STORAGE_CONNECTION_STRING) {
    const { azureBlob } = await import(new URL("azure-blob/index.ts", adapters).href);
    const container = env.LEASEHOLD_AZURE_CONTAINER ?? "leasehold-demo";
    const backend = azureBlob({
      connectionString: env.AZURE_STORAGE_CONNECTION_STRING,
      container,
      createContainer: true,
    });
    return { backend, ttl: 15_000, label: `Azure Blob (container ${container})` };
  }
  return { backend: memory(), ttl: 3_000, label: "the embedded memory backend" };
}

const { backend: store, ttl, label } = await chooseBackend();
const name = `demo-leader-${Date.now().toString(36)}`;
const start = performance.now();
const clock = () => ((performance.now() - start) / 1000).toFixed(2).padStart(6);
const log = (who: string, message: string) => console.log(`${clock()}s  ${who.padEnd(8)}  ${message}`);
const shutdown = new AbortController();
let crashedAt = 0;
let takeover = 0;

let crashNext = true; // the first leader crashes 3 s into its term

/** Ends the demo at the backend's first failure, with its error (no secret: leasehold's carry none). */
function backendFailed(error: unknown): never {
  console.error(`\nthe backend failed (${label}): ${explain(error)}`);
  console.error("check its environment variables (URL, token or connection string); the demo stops here");
  process.exit(1);
}

/** A worker that campaigns and leads (prints its work); the first leader crashes. */
async function worker(id: string): Promise<void> {
  let crashed = false;
  // The crash: from now on this worker's requests never arrive (a frozen process, a cut cable).
  const backend: Backend = {
    ...store,
    renew: (r) =>
      crashed
        ? new Promise<boolean>((_, reject) =>
            r.signal?.addEventListener("abort", () => reject(r.signal?.reason)),
          )
        : store.renew(r),
  };
  const mutex = createMutex(backend, { name, ttl, owner: id, retryDelay: 250 });
  while (!shutdown.signal.aborted) {
    let lease: Lease;
    try {
      // onError: each retryable failure (a refused connection, a 5xx, no answer) as it happens;
      // a non-retryable one (a refused token) rejects.
      lease = await mutex.acquire({ signal: shutdown.signal, onError: backendFailed });
    } catch (error) {
      if (shutdown.signal.aborted) return;
      backendFailed(error);
    }
    if (crashedAt && !takeover) {
      takeover = performance.now() - crashedAt;
      log(
        id,
        `TOOK OVER with token ${lease.token}, ${(takeover / 1000).toFixed(2)} s after the crash (ttl ${ttl / 1000} s)`,
      );
    } else {
      log(id, `became leader with token ${lease.token}`);
    }
    const leaderSince = performance.now();
    const crashAfter = crashNext ? 3_000 : undefined;
    crashNext = false;
    for (let batch = 1; !lease.signal.aborted && !shutdown.signal.aborted; batch++) {
      if (crashAfter !== undefined && performance.now() - leaderSince >= crashAfter) {
        crashed = true;
        crashedAt = performance.now();
        log(id, "CRASHED: stops renewing, never releases");
        lease.signal.addEventListener("abort", () =>
          log(id, "(its lease signal aborted on its own deadline, before the lock expires on the backend)"),
        );
        return;
      }
      log(id, `leader: processed batch ${batch} (fencing token ${lease.token})`);
      await sleep(700, lease.signal).catch(() => {});
    }
    await lease.release();
    if (!shutdown.signal.aborted) log(id, "lost the lease; campaigning again");
  }
}

console.log(`leasehold demo: three workers elect a leader on ${label}; ttl ${ttl / 1000} s\n`);
const workers = [worker("worker-1"), worker("worker-2"), worker("worker-3")];
// Give a follower time to take over from the crashed leader and work a while.
const limit = performance.now() + ttl + 12_000;
while (!takeover && performance.now() < limit) await sleep(100);
await sleep(2_500);
shutdown.abort();
await Promise.all(workers);
log("demo", "shut down: every lease released");
if (!takeover) {
  console.error("\nno follower took over: something is wrong");
  process.exit(1);
}
const ok = takeover <= ttl;
console.log(
  `\ntakeover after the crash: ${(takeover / 1000).toFixed(2)} s (ttl ${ttl / 1000} s) — ${ok ? "within one ttl" : "LATER than one ttl"}`,
);
process.exit(ok ? 0 : 1);
