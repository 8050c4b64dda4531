// Item 4: failover. Crash takeover: the holder stops renewing without releasing (a wrapper makes
// its renew and release hang forever, as if the process froze or died; test/core/election.test.ts
// does the same), at a random moment of its renewal cycle; measured from the crash to the
// follower's acquisition, the follower waiting in `acquire()`. Graceful handoff: the holder
// releases (or its `lead` loop is stopped) while the follower waits in `acquire()` (or `lead()`);
// measured from the release call (or the abort) to the follower's acquisition (or task start).
import type { Backend } from "../src/backend.ts";
import { durableObject } from "../src/backends/cloudflare/index.ts";
import { memory } from "../src/backends/memory/index.ts";
import { upstash } from "../src/backends/upstash/index.ts";
import { createElection, createMutex } from "../src/index.ts";
import { type Summary, sleep, summarize } from "./lib/stats.ts";

export interface FailoverSeries {
  backend: "memory" | "upstash" | "cloudflare";
  kind: "crash" | "graceful-release" | "graceful-lead";
  ttl: number;
  retryDelay: number;
  /** The design target for this kind: ttl + retryDelay for a crash, retryDelay for a handoff. */
  bound: number;
  /** ms from the crash (or release/abort) to the follower's acquisition. */
  takeover: Summary;
  /** Crash only: ms from the backend's expiry of the last renewal (sent + ttl) to the acquisition. */
  afterExpiry?: Summary;
  within: number;
}

/** A backend whose renew and release hang after `freeze()`; it notes when renewals were sent. */
function freezable(store: Backend) {
  let frozen = false;
  let lastSent = 0;
  const backend: Backend = {
    ...store,
    name: store.name,
    acquire: (r) => {
      lastSent = performance.now();
      return store.acquire(r);
    },
    ...(store.acquireQueued && {
      acquireQueued: (r: Parameters<NonNullable<Backend["acquireQueued"]>>[0]) => {
        lastSent = performance.now();
        return store.acquireQueued!(r);
      },
    }),
    renew: (r) => {
      if (frozen) return new Promise<boolean>(() => {});
      lastSent = performance.now();
      return store.renew(r);
    },
    release: (r) => (frozen ? new Promise<void>(() => {}) : store.release(r)),
    // Batched renewals freeze too (upstash batches them: renewMany).
    ...(store.renewMany && {
      renewMany: (r: Parameters<NonNullable<Backend["renewMany"]>>[0]) => {
        if (frozen) return new Promise<boolean[]>(() => {});
        lastSent = performance.now();
        return store.renewMany!(r);
      },
    }),
  };
  return { backend, freeze: () => (frozen = true), lastSent: () => lastSent };
}

type Make = () => Backend;
let seq = 0;
const lockName = (kind: string) => `bench-fo-${kind}-${process.pid}-${++seq}`;

async function crashTrial(make: Make, ttl: number, retryDelay: number): Promise<[number, number]> {
  const store = make();
  const name = lockName("crash");
  const frozen = freezable(store);
  const holder = createMutex(frozen.backend, { name, ttl, retryDelay, owner: "holder" });
  const follower = createMutex(store, { name, ttl, retryDelay, owner: "follower" });
  await holder.acquire();
  const waiting = follower.acquire().then((lease) => ({ lease, at: performance.now() }));
  await sleep(Math.random() * ttl); // crash at a random point of the renewal cycle
  frozen.freeze();
  const crashedAt = performance.now();
  const expiry = frozen.lastSent() + ttl;
  const { lease, at } = await waiting;
  await lease.release();
  return [at - crashedAt, at - expiry];
}

async function gracefulTrial(make: Make, ttl: number, retryDelay: number): Promise<number> {
  const store = make();
  const name = lockName("graceful");
  const holder = createMutex(store, { name, ttl, retryDelay, owner: "holder" });
  const follower = createMutex(store, { name, ttl, retryDelay, owner: "follower" });
  const lease = await holder.acquire();
  const waiting = follower.acquire().then((l) => ({ lease: l, at: performance.now() }));
  await sleep(retryDelay * (1 + 2 * Math.random())); // the follower has backed off to its cap
  const releasedAt = performance.now();
  await lease.release();
  const got = await waiting;
  await got.lease.release();
  return got.at - releasedAt;
}

async function leadTrial(make: Make, ttl: number, retryDelay: number): Promise<number> {
  const store = make();
  const name = lockName("lead");
  const holder = createMutex(store, { name, ttl, retryDelay, owner: "holder" });
  const follower = createMutex(store, { name, ttl, retryDelay, owner: "follower" });
  const stopHolder = new AbortController();
  const stopFollower = new AbortController();
  const untilAborted = (s: AbortSignal) =>
    new Promise<void>((r) => s.addEventListener("abort", () => r(), { once: true }));
  let leading!: () => void;
  const led = new Promise<void>((r) => (leading = r));
  const holderLoop = createElection(holder).lead(
    async (signal) => {
      leading();
      await untilAborted(signal);
    },
    { signal: stopHolder.signal },
  );
  await led;
  let tookOver!: (at: number) => void;
  const took = new Promise<number>((r) => (tookOver = r));
  const followerLoop = createElection(follower).lead(
    async (signal) => {
      tookOver(performance.now());
      await untilAborted(signal);
    },
    { signal: stopFollower.signal },
  );
  await sleep(retryDelay * (1 + 2 * Math.random()));
  const abortedAt = performance.now();
  stopHolder.abort();
  const at = await took;
  stopFollower.abort();
  await Promise.all([holderLoop, followerLoop]);
  return at - abortedAt;
}

/** Runs `trials` of `fn`, `parallel` at a time (each on its own lock name). */
async function trialsOf<T>(trials: number, parallel: number, fn: () => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < trials; i += parallel) {
    out.push(...(await Promise.all(Array.from({ length: Math.min(parallel, trials - i) }, fn))));
  }
  return out;
}

export async function runFailover(
  upstashTarget: { url: string; token: string },
  opts: {
    trials: number;
    /** Crash trials run this many at once: they wait about a ttl, a few ms either way do not matter. */
    parallel: number;
    /** Handoff trials run this many at once: fewer, as each extra mutex in this process adds ms to them. */
    handoffParallel: number;
    configs: { ttl: number; retryDelay: number }[];
  },
  cloudflareTarget: { url: string; token: string },
): Promise<FailoverSeries[]> {
  const shared = memory(); // one store per backend kind; every trial has its own name
  const makers: Record<FailoverSeries["backend"], Make> = {
    memory: () => shared,
    upstash: () => upstash({ ...upstashTarget, prefix: "bench-fo:" }),
    // The Durable Object through its route: waiters held open in line, woken on release.
    cloudflare: () => durableObject(cloudflareTarget),
  };
  const out: FailoverSeries[] = [];
  const within = (xs: number[], bound: number) => xs.filter((x) => x <= bound).length;
  for (const backend of ["memory", "upstash", "cloudflare"] as const) {
    const make = makers[backend];
    for (const { ttl, retryDelay } of opts.configs) {
      const crash = await trialsOf(opts.trials, opts.parallel, () => crashTrial(make, ttl, retryDelay));
      const takeovers = crash.map((c) => c[0]);
      out.push({
        backend,
        kind: "crash",
        ttl,
        retryDelay,
        bound: ttl + retryDelay,
        takeover: summarize(takeovers),
        afterExpiry: summarize(crash.map((c) => c[1])),
        within: within(takeovers, ttl + retryDelay),
      });
      const release = await trialsOf(opts.trials, opts.handoffParallel, () =>
        gracefulTrial(make, ttl, retryDelay),
      );
      out.push({
        backend,
        kind: "graceful-release",
        ttl,
        retryDelay,
        bound: retryDelay,
        takeover: summarize(release),
        within: within(release, retryDelay),
      });
      const lead = await trialsOf(opts.trials, opts.handoffParallel, () => leadTrial(make, ttl, retryDelay));
      out.push({
        backend,
        kind: "graceful-lead",
        ttl,
        retryDelay,
        bound: retryDelay,
        takeover: summarize(lead),
        within: within(lead, retryDelay),
      });
    }
  }
  return out;
}
