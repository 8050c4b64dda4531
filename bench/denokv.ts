// Item 8: Deno KV (`leasehold/deno-kv` through @deno/kv on node, a SQLite file in a temp dir).
// acquire, renew and release against the same KV calls made by hand (the floor: a strong read of
// both keys and an atomic commit for acquire, a checked commit for renew and release),
// interleaved; the KV calls per operation, counted by a wrapper; and crash takeover: a holder
// that is gone, a contender that waits, from its first look to its lease (observed expiry:
// docs/DESIGN.md §14).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openKv } from "@deno/kv";
import { denoKv, type KvAtomicLike, type KvLike } from "../src/backends/deno-kv/index.ts";
import { createMutex } from "../src/index.ts";
import { observedWait } from "../src/timing.ts";
import { type Summary, summarize } from "./lib/stats.ts";

const OPS = ["acquire", "renew", "release"] as const;
type Op = (typeof OPS)[number];

export interface DenoKvResult {
  store: string;
  leasehold: Record<Op, Summary>;
  floor: Record<Op, Summary>;
  /** KV calls (reads + commits) per operation. */
  calls: Record<Op, { reads: number; commits: number }>;
  takeover: { ttl: number; bound: number; ms: Summary };
}

/** `kv` with its reads and commits counted. */
function counted(kv: KvLike) {
  const n = { reads: 0, commits: 0 };
  const wrap = (a: KvAtomicLike): KvAtomicLike => ({
    check: (...c) => wrap(a.check(...c)),
    set: (k, v) => wrap(a.set(k, v)),
    delete: (k) => wrap(a.delete(k)),
    commit: () => {
      n.commits++;
      return a.commit();
    },
  });
  const out: KvLike = {
    getMany: (keys, o) => {
      n.reads++;
      return kv.getMany(keys, o);
    },
    atomic: () => wrap(kv.atomic()),
  };
  return { kv: out, n };
}

export async function runDenoKv(iterations: number, warmup: number, trials: number): Promise<DenoKvResult> {
  const dir = mkdtempSync(join(tmpdir(), "leasehold-bench-kv-"));
  const raw = await openKv(join(dir, "bench.sqlite"));
  try {
    const kv = raw as unknown as KvLike;
    const { kv: seen, n } = counted(kv);
    const mutex = createMutex(denoKv(seen), { name: "bench-kv", renew: false });
    const floorKeys = [
      ["floor", "lock"],
      ["floor", "fence"],
    ] as const;
    const samples = { leasehold: {} as Record<Op, number[]>, floor: {} as Record<Op, number[]> };
    for (const c of ["leasehold", "floor"] as const) for (const op of OPS) samples[c][op] = [];
    const calls = Object.fromEntries(
      OPS.map((op) => [op, { reads: 0, commits: 0 }]),
    ) as DenoKvResult["calls"];

    const ours = async (keep: boolean) => {
      const t: number[] = [];
      const count: { reads: number; commits: number }[] = [];
      let start = performance.now();
      let before = { ...n };
      const lease = (await mutex.tryAcquire())!;
      t.push(performance.now() - start);
      count.push({ reads: n.reads - before.reads, commits: n.commits - before.commits });
      start = performance.now();
      before = { ...n };
      await lease.renew();
      t.push(performance.now() - start);
      count.push({ reads: n.reads - before.reads, commits: n.commits - before.commits });
      start = performance.now();
      before = { ...n };
      await lease.release();
      t.push(performance.now() - start);
      count.push({ reads: n.reads - before.reads, commits: n.commits - before.commits });
      if (keep)
        OPS.forEach((op, i) => {
          samples.leasehold[op].push(t[i]!);
          calls[op].reads += count[i]!.reads;
          calls[op].commits += count[i]!.commits;
        });
    };
    const floor = async (keep: boolean) => {
      const [lk, fk] = floorKeys;
      let start = performance.now();
      const [lock, fence] = await kv.getMany([lk, fk], { consistency: "strong" });
      const token = Number(fence?.value ?? "0") + 1;
      const lease = JSON.stringify({ nonce: crypto.randomUUID(), owner: "o", token, ttl: 15_000 });
      const a = await kv
        .atomic()
        .check({ key: lk, versionstamp: lock!.versionstamp })
        .check({ key: fk, versionstamp: fence!.versionstamp })
        .set(lk, lease)
        .set(fk, String(token))
        .commit();
      const acquire = performance.now() - start;
      start = performance.now();
      const r = await kv.atomic().check({ key: lk, versionstamp: a.versionstamp! }).set(lk, lease).commit();
      const renew = performance.now() - start;
      start = performance.now();
      await kv.atomic().check({ key: lk, versionstamp: r.versionstamp! }).delete(lk).commit();
      const release = performance.now() - start;
      if (keep) {
        samples.floor.acquire.push(acquire);
        samples.floor.renew.push(renew);
        samples.floor.release.push(release);
      }
    };
    for (let i = 0; i < warmup + iterations; i++) {
      const keep = i >= warmup;
      if (Math.random() < 0.5) {
        await ours(keep);
        await floor(keep);
      } else {
        await floor(keep);
        await ours(keep);
      }
    }
    for (const op of OPS) {
      calls[op].reads /= iterations;
      calls[op].commits /= iterations;
    }

    // Crash takeover: the holder writes its lease and is gone; a waiting contender takes it over.
    const ttl = 1_000;
    const store = denoKv(kv);
    // The trials run at once, each on its own key: they wait, they do not compete for the CPU.
    const takeovers = await Promise.all(
      Array.from({ length: trials }, async (_, i) => {
        const name = `bench-kv-crash-${i}`;
        await store.acquire({ key: name, owner: "gone", nonce: crypto.randomUUID(), ttl });
        const contender = createMutex(store, { name, ttl, retryDelay: 200 });
        const start = performance.now();
        const lease = await contender.acquire({ timeout: 10 * ttl });
        const took = performance.now() - start;
        await lease.release();
        return took;
      }),
    );
    return {
      store: "@deno/kv on node, a SQLite file",
      leasehold: Object.fromEntries(OPS.map((op) => [op, summarize(samples.leasehold[op])])) as Record<
        Op,
        Summary
      >,
      floor: Object.fromEntries(OPS.map((op) => [op, summarize(samples.floor[op])])) as Record<Op, Summary>,
      calls,
      takeover: { ttl, bound: observedWait(ttl), ms: summarize(takeovers) },
    };
  } finally {
    raw.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
