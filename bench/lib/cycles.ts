// One contender's acquire → renew → release cycle, timed: shared by the latency benches.
import type { Backend } from "../../src/backend.ts";
import { createMutex, type Mutex } from "../../src/index.ts";
import { requestSignal } from "../../src/signals.ts";
import { defaultStopMargin, guardOf, quietBound, renewalBound } from "../../src/timing.ts";

/** One contender: a full cycle with a timestamp before, between and after its operations. */
export type Cycle = () => Promise<[number, number, number, number]>;

/** Runs `a`, `b`, `c` in turn; the four timestamps around them. */
export async function time3(
  a: () => Promise<unknown>,
  b: () => Promise<unknown>,
  c: () => Promise<unknown>,
): Promise<[number, number, number, number]> {
  const t0 = performance.now();
  await a();
  const t1 = performance.now();
  await b();
  const t2 = performance.now();
  await c();
  return [t0, t1, t2, performance.now()];
}

/** The suffix of a version's series (bench/changes.ts) taken with `acquire()`, not `tryAcquire()`. */
export const WAITING = " acquire()";

/** `mutex`'s tryAcquire (with `waiting`, acquire()), lease.renew() and lease.release(). */
export function mutexCycle(mutex: Mutex, label: string, waiting = false): Cycle {
  return () => {
    let lease: Awaited<ReturnType<typeof mutex.tryAcquire>> = null;
    return time3(
      async () => {
        // `waiting`: acquire() (the call most apps make) on a free lock, instead of tryAcquire().
        lease = await (waiting ? mutex.acquire() : mutex.tryAcquire());
        if (!lease) throw new Error(`bench: ${label} tryAcquire found the lock taken`);
      },
      () => lease!.renew(),
      () => lease!.release(),
    );
  };
}

/** The contenders {@link ours} returns, in the order the tables show them. */
export const OURS = ["leasehold", "backend + timeout", "backend"] as const;
export type Ours = (typeof OURS)[number];

/**
 * `backend`'s acquire, renew and release alone. With `bounded`, each request is bounded as the
 * core bounds it (src/signals.ts `requestSignal` with the core's bounds from src/timing.ts, for a
 * tryAcquire without a caller's signal and a fresh lease: the signal `signalFor` hands the
 * backend, or for a backend the core races, `race`), and `done()` once it settles.
 */
function backendCycle(backend: Backend, name: string, ttl: number, bounded: boolean): Cycle {
  const guard = guardOf(ttl, defaultStopMargin(ttl));
  const bounds = {
    acquire: ttl - guard,
    renew: renewalBound(ttl, ttl - guard),
    release: quietBound(ttl),
  };
  const withTimeout = async <T>(op: keyof typeof bounds, send: (signal?: AbortSignal) => Promise<T>) => {
    const b = requestSignal(backend.name, op, bounds[op]);
    try {
      return await b.race(send(b.signalFor(backend)));
    } finally {
      b.done();
    }
  };
  // Without the bound, the backend's promise itself (no wrapper, as before this contender existed).
  const run = <T>(op: keyof typeof bounds, send: (signal?: AbortSignal) => Promise<T>): Promise<T> =>
    bounded ? withTimeout(op, send) : send();
  return () => {
    const nonce = crypto.randomUUID();
    return time3(
      async () => {
        const r = await run("acquire", (signal) =>
          backend.acquire({ key: name, owner: "bench", nonce, ttl, signal }),
        );
        if (!r.ok) throw new Error(`bench: ${backend.name} backend.acquire found the lock taken`);
      },
      async () => {
        const ok = await run("renew", (signal) => backend.renew({ key: name, nonce, ttl, signal }));
        if (!ok) throw new Error("bench: renew lost");
      },
      () => run("release", (signal) => backend.release({ key: name, nonce, signal })),
    );
  };
}

/**
 * On `backend`, for the lock `name`: leasehold's public API; the backend with the core's
 * per-request timeout (the floor of any client that bounds its requests); the backend alone.
 */
export function ours(backend: Backend, name: string, ttl: number): Record<Ours, Cycle> {
  return {
    leasehold: mutexCycle(createMutex(backend, { name, ttl, owner: "bench" }), backend.name),
    "backend + timeout": backendCycle(backend, name, ttl, true),
    backend: backendCycle(backend, name, ttl, false),
  };
}
