// What every part of the conformance suite shares: its options and check types, the assertion,
// the set-up of a check's mutexes, and the helpers of the contended checks.
import type { Backend } from "../backend.ts";
import { createMutex, type Mutex } from "../mutex.ts";
import type { MutexOptions } from "../types.ts";

/** Options of {@link conformanceChecks} and {@link testBackend}. */
export interface ConformanceOptions {
  /** Creates the backend under test; called once per check. */
  backend: () => Backend | Promise<Backend>;
  /**
   * The ttl in ms of the mutexes the checks create (the exclusivity checks' contenders use at
   * least 10 000, within the backend's range); the expiry checks wait about this long.
   * Must be within the backend's `ttlRange` (pass 15 000 for Azure). Default 1 000.
   */
  ttl?: number;
  /** Sequential acquire/release cycles in the token check. Default 500. */
  cycles?: number;
  /** Concurrent contenders in the exclusivity check. Default 100. */
  contenders?: number;
  /** A prefix for the lock names the checks use, each made unique. Default `"conformance"`. */
  prefix?: string;
  /**
   * The backend decides each operation by a vote of several stores (`leasehold/quorum`), so
   * concurrent contenders may split the vote and none of them wins a lock or a slot. The
   * exclusivity checks then require at most one winner per lock or slot, and that the next
   * uncontended attempts take what the split left free. Default false: exactly one winner per
   * lock and per slot.
   */
  splitVotes?: boolean;
}

/** One check: run it and it throws on failure. `timeout` is the ms it may take. */
export interface ConformanceCheck {
  /** What it checks, as the test's name. */
  name: string;
  /** The ms it may take. */
  timeout: number;
  /** Runs it; rejects when the backend fails it. */
  run: () => Promise<void>;
}

/** The minimal shape of a BDD runner: `describe(name, fn)` and `it(name, fn, timeout)`. */
export interface Runner {
  /** Groups tests. */
  describe: (name: string, fn: () => void) => unknown;
  /** One test, with its timeout in ms. */
  it: (name: string, fn: () => Promise<void>, timeout?: number) => unknown;
}

/** Throws the conformance failure `message` unless `ok`. */
export function assert(ok: unknown, message: string): asserts ok {
  if (!ok) throw new Error(`conformance: ${message}`);
}

/**
 * The ttl of the contenders in the exclusivity checks: at least 10 s (within the backend's range).
 * Those checks are about who wins, not about speed: each attempt may take up to ttl − guard, and
 * with the suite's short ttl 100 statements queued behind a client's pool of 20 connections on a
 * slow disk did not fit in 393 ms ("no answer"). The winner releases at once, so nothing waits
 * this long.
 */
export function contentionTtl(ttl: number, backend: Backend): number {
  return Math.min(Math.max(ttl, 10_000), backend.ttlRange?.[1] ?? Number.POSITIVE_INFINITY);
}

/**
 * `take` until it answers non-null, at most 20 times 50 ms apart: what a split vote or a timed-out
 * attempt left taken is given back in the background, and is free again soon after.
 */
export async function eventually<T>(take: () => Promise<T | null>): Promise<T | null> {
  for (let i = 0; ; i++) {
    const got = await take();
    if (got !== null || i === 19) return got;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A check's backend, a fresh lock name, and mutexes on that name (`extra`: their options). */
export type Setup = (extra?: Partial<MutexOptions>) => Promise<{
  backend: Backend;
  name: string;
  make: (owner: string, more?: Partial<MutexOptions>) => Mutex;
}>;

/** The mutex checks' settings from `options`, their defaults filled in, and their {@link Setup}. */
export function mutexSuite(options: ConformanceOptions): {
  ttl: number;
  cycles: number;
  contenders: number;
  setup: Setup;
  slow: number;
} {
  const ttl = options.ttl ?? 1_000;
  const cycles = options.cycles ?? 500;
  const contenders = options.contenders ?? 100;
  const unique = (): string => `${options.prefix ?? "conformance"}-${crypto.randomUUID().slice(0, 8)}`;
  const setup = async (extra: Partial<MutexOptions> = {}) => {
    const backend = await options.backend();
    const name = unique();
    const make = (owner: string, more: Partial<MutexOptions> = {}): Mutex =>
      createMutex(backend, { name, ttl, owner, retryDelay: 50, ...extra, ...more });
    return { backend, name, make };
  };
  const slow = 10_000 + ttl * 4;
  return { ttl, cycles, contenders, setup, slow };
}
