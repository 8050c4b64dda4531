// Item 5: contention. 16 contenders (mutexes with their own owner, in one process) race for one
// lock name; each loops acquire() → release() until it has won 200 times (3 200 in all).
// Reports acquisitions and handoffs (the holder changed) per second over the whole run; the
// spread of wins per contender at the moment the first contender reached its 200 (while all 16
// were still competing: a fair lock would show about 200/16·16 = equal shares); and, on Upstash,
// the requests the bridge saw per acquisition.
import type { Backend } from "../src/backend.ts";
import { durableObject } from "../src/backends/cloudflare/index.ts";
import { memory } from "../src/backends/memory/index.ts";
import { upstash } from "../src/backends/upstash/index.ts";
import { createMutex } from "../src/index.ts";
import type { Servers } from "./lib/servers.ts";

export interface ContentionResult {
  backend: "memory" | "upstash" | "cloudflare";
  contenders: number;
  acquisitions: number;
  ttl: number;
  retryDelay: number;
  seconds: number;
  acquisitionsPerSecond: number;
  handoffs: number;
  handoffsPerSecond: number;
  /** Wins per contender when the first contender finished its share, all 16 still competing. */
  wins: { min: number; max: number; mean: number; stddev: number; perContender: number[] };
  /** Seconds at which the first and the last contender finished their share. */
  firstDone: number;
  lastDone: number;
  /** Upstash only: requests at the bridge per acquisition (acquire attempts, releases). */
  requestsPerAcquisition?: number;
  /** Every acquisition had a larger token than the one before (checked). */
  tokensIncreasing: boolean;
}

export async function runContention(
  s: Servers,
  opts: { contenders: number; perContender: number; retryDelays: number[] },
): Promise<ContentionResult[]> {
  const out: ContentionResult[] = [];
  const ttl = 15_000;
  for (const retryDelay of opts.retryDelays)
    for (const kind of ["memory", "upstash", "cloudflare"] as const) {
      const backend: Backend =
        kind === "memory"
          ? memory()
          : kind === "upstash"
            ? upstash({ url: s.bridge.url, token: s.bridge.token, prefix: "bench-ct:" })
            : durableObject({ url: s.workerd.url, token: s.workerd.token });
      const name = `bench-contention-${Date.now()}`;
      const wins = new Array<number>(opts.contenders).fill(0);
      let snapshot: number[] | undefined;
      let firstDone = 0;
      let total = 0;
      let handoffs = 0;
      let last = -1;
      let lastToken = 0;
      let increasing = true;
      s.bridge.resetStats();
      const t0 = performance.now();
      await Promise.all(
        wins.map(async (_, i) => {
          const mutex = createMutex(backend, { name, ttl, retryDelay, owner: `c${i}` });
          while (wins[i]! < opts.perContender) {
            const lease = await mutex.acquire();
            if (lease.token <= lastToken) increasing = false;
            lastToken = lease.token;
            total++;
            wins[i]!++;
            if (last !== i && last !== -1) handoffs++;
            last = i;
            if (wins[i] === opts.perContender && !snapshot) {
              snapshot = [...wins];
              firstDone = performance.now() - t0;
            }
            await lease.release();
          }
        }),
      );
      const seconds = (performance.now() - t0) / 1000;
      const requests = s.bridge.stats().total;
      const spread = snapshot ?? wins;
      const mean = spread.reduce((a, b) => a + b, 0) / spread.length;
      const r3 = (x: number) => Math.round(x * 1000) / 1000;
      out.push({
        backend: kind,
        contenders: opts.contenders,
        acquisitions: total,
        ttl,
        retryDelay,
        seconds: r3(seconds),
        acquisitionsPerSecond: r3(total / seconds),
        handoffs,
        handoffsPerSecond: r3(handoffs / seconds),
        wins: {
          min: Math.min(...spread),
          max: Math.max(...spread),
          mean: r3(mean),
          stddev: r3(Math.sqrt(spread.reduce((a, w) => a + (w - mean) ** 2, 0) / spread.length)),
          perContender: spread,
        },
        firstDone: r3(firstDone / 1000),
        lastDone: r3(seconds),
        ...(kind === "upstash" ? { requestsPerAcquisition: r3(requests / total) } : {}),
        tokensIncreasing: increasing,
      });
    }
  return out;
}
