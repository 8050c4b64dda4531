// One contender's acquire → renew → release cycle, timed: shared by the latency benches.
import type { Backend } from "../../src/backend.ts";
import { createMutex, type Mutex } from "../../src/index.ts";

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

/** `mutex`'s tryAcquire, lease.renew() and lease.release(). */
export function mutexCycle(mutex: Mutex, label: string): Cycle {
  return () => {
    let lease: Awaited<ReturnType<typeof mutex.tryAcquire>> = null;
    return time3(
      async () => {
        lease = await mutex.tryAcquire();
        if (!lease) throw new Error(`bench: ${label} tryAcquire found the lock taken`);
      },
      () => lease!.renew(),
      () => lease!.release(),
    );
  };
}

/** leasehold's public API and its backend alone, on `backend`, for the lock `name`. */
export function ours(backend: Backend, name: string, ttl: number): Record<"leasehold" | "backend", Cycle> {
  return {
    leasehold: mutexCycle(createMutex(backend, { name, ttl, owner: "bench" }), backend.name),
    backend: async () => {
      const nonce = crypto.randomUUID();
      return time3(
        async () => {
          const r = await backend.acquire({ key: name, owner: "bench", nonce, ttl });
          if (!r.ok) throw new Error(`bench: ${backend.name} backend.acquire found the lock taken`);
        },
        async () => {
          if (!(await backend.renew({ key: name, nonce, ttl }))) throw new Error("bench: renew lost");
        },
        () => backend.release({ key: name, nonce }),
      );
    },
  };
}
