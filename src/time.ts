// Time: the monotonic clock, timers that never keep a process alive, sleeping, jitter.

/** Monotonic milliseconds. Never goes back; unaffected by wall-clock changes. */
export function now(): number {
  return performance.now();
}

/** Lets the runtime exit while this timer is pending (Node, Bun: `unref`; Deno: `Deno.unrefTimer`). */
function unref(timer: unknown): void {
  if (typeof timer === "number") {
    (globalThis as { Deno?: { unrefTimer?: (id: number) => void } }).Deno?.unrefTimer?.(timer);
  } else {
    (timer as { unref?: () => void } | undefined)?.unref?.();
  }
}

/** A time (or a delay) that never comes: a {@link timer} of this length never fires. */
export const NEVER: number = Number.POSITIVE_INFINITY;

/** The longest delay `setTimeout` honours; longer ones (and NaN) fire after 1 ms on Node and Bun. */
export const MAX_DELAY = 2_147_483_647;

/**
 * A cancellable timeout of any length: delays beyond what `setTimeout` takes are chained, an
 * infinite one never fires, NaN counts as 0. Unref'ed unless `keepAlive`. Returns the function that cancels it.
 */
export function timer(ms: number, fn: () => void, keepAlive = false): () => void {
  let id: ReturnType<typeof setTimeout> | undefined;
  const arm = (left: number): void => {
    if (left === NEVER) return;
    id = setTimeout(
      left > MAX_DELAY ? () => arm(left - MAX_DELAY) : fn,
      Math.min(left || 0, MAX_DELAY), // a negative delay is 0 to setTimeout
    );
    if (!keepAlive) unref(id);
  };
  arm(ms);
  return () => {
    // Ref'ed again to be cleared: Node keeps the emptied list of a cleared unref'ed timer's
    // duration until that long has passed, and leases arm timers of ever-different durations;
    // with thousands of such lists a new duration's setTimeout took about 100 µs (DESIGN §4.8).
    (id as { ref?: () => void } | undefined)?.ref?.();
    clearTimeout(id);
  };
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
 * Resolves with `promise`'s value, or with `undefined` after `ms` if it has not settled by then
 * (a rejection counts as settling with `undefined`). The timer is cleared either way.
 */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let cancel = (): void => {};
  const late = new Promise<undefined>((resolve) => (cancel = timer(ms, () => resolve(undefined), true)));
  try {
    return await Promise.race([promise.catch(() => undefined), late]);
  } finally {
    cancel();
  }
}
