// Monotonic time, timers that never keep a process alive, sleeping with a signal, jitter.

/** Monotonic milliseconds. Never goes back; unaffected by wall-clock changes. */
export function now(): number {
  return performance.now();
}

/** Lets the runtime exit while this timer is pending (Node, Bun: `unref`; Deno: `Deno.unrefTimer`). */
function unref(timer: unknown): void {
  if (typeof timer === "object" && timer !== null) {
    (timer as { unref?: () => void }).unref?.();
  } else if (typeof timer === "number") {
    (globalThis as { Deno?: { unrefTimer?: (id: number) => void } }).Deno?.unrefTimer?.(timer);
  }
}

/** The longest delay `setTimeout` honours; longer ones (and NaN) fire after 1 ms on Node and Bun. */
export const MAX_DELAY = 2_147_483_647;

/**
 * A cancellable timeout of any length: delays beyond what `setTimeout` takes are chained, an
 * infinite one never fires, NaN counts as 0. Unref'ed unless `keepAlive`. Returns the function that cancels it.
 */
export function timer(ms: number, fn: () => void, keepAlive = false): () => void {
  let id: ReturnType<typeof setTimeout> | undefined;
  const arm = (left: number): void => {
    if (left === Number.POSITIVE_INFINITY) return; // never
    id = setTimeout(
      left > MAX_DELAY ? () => arm(left - MAX_DELAY) : fn,
      Math.min(Math.max(0, left || 0), MAX_DELAY),
    );
    if (!keepAlive) unref(id);
  };
  arm(ms);
  return () => clearTimeout(id);
}

/** `ms` scaled by a random factor in [1 − spread, 1 + spread]. */
export function jitter(ms: number, spread: number): number {
  return ms * (1 - spread + 2 * spread * Math.random());
}

/**
 * Resolves after `ms`, or rejects with `signal.reason` as soon as `signal` aborts. Unlike
 * {@link timer} it keeps the process alive: someone is awaiting it.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      cancel();
      reject(signal?.reason);
    };
    const cancel = timer(
      ms,
      () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      },
      true,
    );
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * An AbortSignal that aborts as soon as any of `parents` aborts (with its reason) or, when `ms`
 * is finite, after `ms` (with `reason()`). Call `done()` when finished so no timer or listener stays.
 */
export function linkedSignal(
  parents: readonly (AbortSignal | undefined)[],
  ms: number = Number.POSITIVE_INFINITY,
  reason: () => unknown = () => undefined,
): { signal: AbortSignal; done: () => void } {
  const ctrl = new AbortController();
  const sources = parents.filter((p): p is AbortSignal => p !== undefined);
  const first = sources.find((p) => p.aborted);
  if (first) {
    ctrl.abort(first.reason);
    return { signal: ctrl.signal, done: () => {} };
  }
  const detach = sources.map((p) => {
    const onAbort = () => ctrl.abort(p.reason);
    p.addEventListener("abort", onAbort, { once: true });
    return () => p.removeEventListener("abort", onAbort);
  });
  const cancel = timer(ms, () => ctrl.abort(reason()));
  return {
    signal: ctrl.signal,
    done: () => {
      cancel();
      for (const off of detach) off();
    },
  };
}

/** Resolves (never rejects) when `signal` aborts. */
export function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
}
