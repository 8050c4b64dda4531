// Sample summaries and small helpers shared by the bench suite.

/** What results.json keeps of a series of samples (ms unless the series says otherwise). */
export interface Summary {
  n: number;
  median: number;
  p90: number;
  p99: number;
  min: number;
  max: number;
  mean: number;
  stddev: number;
}

/** The value at quantile q (0..1) of sorted samples, by the nearest-rank method. */
function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil(q * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

/** n, median, p90, p99, min, max, mean and (population) stddev of `xs`, rounded to µs. */
export function summarize(xs: readonly number[]): Summary {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  const mean = n ? s.reduce((a, b) => a + b, 0) / n : Number.NaN;
  const variance = n ? s.reduce((a, b) => a + (b - mean) ** 2, 0) / n : Number.NaN;
  const r = (x: number) => Math.round(x * 1000) / 1000;
  return {
    n,
    median: r(n % 2 ? s[(n - 1) / 2]! : ((s[n / 2 - 1] ?? 0) + (s[n / 2] ?? 0)) / 2),
    p90: r(quantile(s, 0.9)),
    p99: r(quantile(s, 0.99)),
    min: r(s[0] ?? Number.NaN),
    max: r(s[n - 1] ?? Number.NaN),
    mean: r(mean),
    stddev: r(Math.sqrt(variance)),
  };
}

/** A copy of `xs` in random order (Fisher–Yates). */
export function shuffled<T>(xs: readonly T[]): T[] {
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Whether the suite runs in quick mode (BENCH_QUICK=1): fewer iterations, same shape. */
export const QUICK: boolean = /^(1|true|yes)$/i.test(process.env.BENCH_QUICK ?? "");
