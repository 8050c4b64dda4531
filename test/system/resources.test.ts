// Resources: 10 000 acquire/release cycles (memory backend) and 1 000 against the Upstash bridge
// leave no pending timers and no abort listeners behind, and the heap does not grow with the
// number of cycles (measured in a child `node --expose-gc` so that global.gc() is available and
// nothing of vitest's is on the heap), nor any of Node's timer lists (a child
// `node --expose-internals`, which can read them).
import { execFileSync } from "node:child_process";
import { getEventListeners } from "node:events";
import { fileURLToPath } from "node:url";
import { describe, expect, inject, it } from "vitest";
import { memory } from "../../src/backends/memory/index.ts";
import { upstash } from "../../src/backends/upstash/index.ts";
import { createMutex, type Mutex } from "../../src/index.ts";

const timeouts = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
const settle = () => new Promise((r) => setTimeout(r, 50));

/** Runs `n` cycles of acquire → (renew) → release and tryAcquire → release, all with one outer signal. */
async function cycles(mutex: Mutex, n: number, signal: AbortSignal): Promise<void> {
  for (let i = 0; i < n; i++) {
    const lease = await mutex.acquire({ signal, timeout: 5_000 });
    if (i % 10 === 0) await lease.renew();
    await lease.release();
    const again = await mutex.tryAcquire({ signal });
    await again?.release();
  }
}

describe("no timers, listeners or memory left behind", () => {
  it("memory backend: 10 000 cycles", { timeout: 60_000 }, async () => {
    const mutex = createMutex(memory(), { name: "resources", ttl: 5_000 });
    const outer = new AbortController();
    await settle();
    const before = { timeouts: timeouts(), resources: process.getActiveResourcesInfo().length };
    await cycles(mutex, 10_000, outer.signal);
    await settle();
    const after = { timeouts: timeouts(), resources: process.getActiveResourcesInfo().length };
    const listeners = getEventListeners(outer.signal, "abort").length;
    console.log(
      `[resources] memory, 10 000 cycles: Timeout ${before.timeouts} → ${after.timeouts}, active resources ${before.resources} → ${after.resources}, abort listeners on the outer signal ${listeners}`,
    );
    expect(after.timeouts).toBeLessThanOrEqual(before.timeouts);
    expect(listeners).toBe(0);
  });

  it("upstash bridge: 1 000 cycles", { timeout: 60_000 }, async () => {
    const { url, token } = inject("upstash");
    const mutex = createMutex(upstash({ url, token }), {
      name: `resources-${crypto.randomUUID().slice(0, 8)}`,
      ttl: 5_000,
    });
    const outer = new AbortController();
    await cycles(mutex, 5, outer.signal); // warm the connection pool
    await settle();
    const before = timeouts();
    await cycles(mutex, 1_000, outer.signal);
    await settle();
    const after = timeouts();
    const listeners = getEventListeners(outer.signal, "abort").length;
    console.log(
      `[resources] upstash, 1 000 cycles: Timeout ${before} → ${after}, abort listeners on the outer signal ${listeners}`,
    );
    expect(after).toBeLessThanOrEqual(before);
    expect(listeners).toBe(0);
    expect(await mutex.holder()).toBeNull();
  });

  it("Node's timer lists: cycles a millisecond apart leave none behind (child node --expose-internals)", {
    timeout: 60_000,
  }, () => {
    // Node files a timer in a list per duration and keeps the list of a cleared unref'ed timer
    // until that duration has passed. Each lease's timer has a duration of its own (its deadline
    // less the time taken), so without the core's care 300 cycles left about 300 lists for 15 s,
    // and with thousands a setTimeout of a new duration took about 100 µs (bench/RESULTS.md).
    const src = (p: string) => fileURLToPath(new URL(`../../src/${p}`, import.meta.url));
    const script = `
      const { createRequire } = await import("node:module");
      const { timerListMap } = createRequire(import.meta.url)("internal/timers");
      const { createMutex } = await import(${JSON.stringify(src("index.ts"))});
      const { memory } = await import(${JSON.stringify(src("backends/memory/index.ts"))});
      const mutex = createMutex(memory(), { name: "lists", ttl: 15000 });
      const lists = () => Object.keys(timerListMap).length;
      const before = lists();
      for (let i = 0; i < 300; i++) {
        const lease = await mutex.acquire();
        await lease.renew();
        await lease.release();
        await new Promise((r) => setTimeout(r, 1));
      }
      console.log(JSON.stringify({ before, after: lists() }));
    `;
    const out = execFileSync(
      process.execPath,
      ["--expose-internals", "--import", "tsx", "--input-type=module", "-e", script],
      { encoding: "utf8", timeout: 50_000 },
    );
    const { before, after } = JSON.parse(out.trim().split("\n").at(-1)!) as { before: number; after: number };
    console.log(`[resources] Node's timer lists: ${before} → ${after} after 300 cycles 1 ms apart`);
    expect(after - before).toBeLessThan(10);
  });

  it("heap after global.gc(): flat across 2 × 10 000 cycles (child node --expose-gc)", {
    timeout: 120_000,
  }, () => {
    const src = (p: string) => fileURLToPath(new URL(`../../src/${p}`, import.meta.url));
    const script = `
      const { createMutex } = await import(${JSON.stringify(src("index.ts"))});
      const { memory } = await import(${JSON.stringify(src("backends/memory/index.ts"))});
      const mutex = createMutex(memory(), { name: "heap", ttl: 5000 });
      const outer = new AbortController();
      const run = async (n) => {
        for (let i = 0; i < n; i++) {
          const lease = await mutex.acquire({ signal: outer.signal, timeout: 5000 });
          if (i % 10 === 0) await lease.renew();
          await lease.release();
          const again = await mutex.tryAcquire({ signal: outer.signal });
          await again?.release();
        }
      };
      const heap = async () => {
        await new Promise((r) => setTimeout(r, 20));
        for (let i = 0; i < 4; i++) global.gc();
        return process.memoryUsage().heapUsed;
      };
      await run(2000);
      const h0 = await heap();
      await run(10000);
      const h1 = await heap();
      await run(10000);
      const h2 = await heap();
      const t = process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
      console.log(JSON.stringify({ h0, h1, h2, timeouts: t }));
    `;
    const out = execFileSync(
      process.execPath,
      ["--expose-gc", "--import", "tsx", "--input-type=module", "-e", script],
      { encoding: "utf8", timeout: 100_000 },
    );
    const { h0, h1, h2, timeouts: t } = JSON.parse(out.trim().split("\n").at(-1)!) as Record<string, number>;
    const kb = (b: number) => Math.round(b / 1024);
    console.log(
      `[resources] heap after gc: ${kb(h0!)} KB → ${kb(h1!)} KB (+10 000 cycles) → ${kb(h2!)} KB (+10 000 more); per cycle ${((h2! - h1!) / 10_000).toFixed(1)} B; pending Timeouts ${t}`,
    );
    // A leak of one small closure or error per cycle is ≥ 100 B; allow 50 B/cycle of noise.
    expect(h2! - h1!).toBeLessThan(500_000);
    expect(h2! - h0!).toBeLessThan(1_000_000);
    expect(t).toBe(0);
  });
});
