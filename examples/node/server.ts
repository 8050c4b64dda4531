// A web server you scale to N instances, with one background job that must run on one instance
// at a time. Every instance serves HTTP; the instances elect a leader with `election.lead`, and only
// the leader's interval runs the job. When the leader stops (deploy, crash, scale-in), another
// instance takes over: at once after a graceful stop, within one ttl after a crash.
//
// In a project with leasehold installed (`npm install leasehold`), saved as server.ts:
//
//   UPSTASH_REDIS_REST_URL=… UPSTASH_REDIS_REST_TOKEN=… PORT=3000 node server.ts      # Node 24
//   UPSTASH_REDIS_REST_URL=… UPSTASH_REDIS_REST_TOKEN=… PORT=3000 npx tsx server.ts  # Node 20
//
// Node 24 (and 22.18+) strips the types itself; Node 20 needs a TypeScript runner such as tsx
// (`npm install --save-dev tsx`) or a build step. In this repository: `npm run build`, then
// `node examples/node/server.ts` (the package resolves itself by name to dist/).
//
// GET / answers this instance's view: { instance, leader, health, runs }.
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { createElection, createMutex } from "leasehold";
import { fromEnv } from "leasehold/upstash";

const instance = process.env.INSTANCE ?? randomUUID().slice(0, 8);
const every = Number(process.env.JOB_EVERY_MS ?? 60_000);

// ttl: a crashed leader is replaced within about this long. Renewal runs in the background.
const mutex = createMutex(fromEnv(), { name: "example-report-job", ttl: 15_000, owner: instance });
const election = createElection(mutex);
let runs = 0;

/** The job. `token` is the fencing token: pass it to anything that must reject a stale leader. */
async function job(token: number, signal: AbortSignal): Promise<void> {
  runs++;
  console.log(`${instance}: job run ${runs} with fencing token ${token}`);
  signal.throwIfAborted();
}

const stop = new AbortController();
const leading = election.lead(
  // Runs while this instance leads; `signal` aborts when the lease is lost or on shutdown.
  async (signal, lease) => {
    console.log(`${instance}: leading with token ${lease.token}`);
    const tick = () => job(lease.token, signal).catch((e) => console.error(`${instance}: job failed`, e));
    await tick();
    const interval = setInterval(tick, every);
    await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    clearInterval(interval);
    console.log(`${instance}: stopped leading`);
  },
  { signal: stop.signal },
);

const server = createServer((req, res) => {
  res.setHeader("content-type", "application/json");
  const health = election.health();
  // Wire health to a liveness probe: a leader whose event loop stalls past its deadline is unhealthy.
  res.statusCode = req.url === "/healthz" && !health.healthy ? 503 : 200;
  res.end(JSON.stringify({ instance, leader: election.isLeader, health, runs }));
});
server.listen(Number(process.env.PORT ?? 3000), "127.0.0.1", () => {
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : address;
  console.log(`${instance}: listening on http://127.0.0.1:${port}`);
});

// Graceful stop: end the job, release the lease (a follower takes over at once), close the server.
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.once(sig, async () => {
    stop.abort();
    await leading;
    server.close();
    server.closeAllConnections();
  });
}
