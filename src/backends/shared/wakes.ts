// The waiters a backend object's watches serve (docs/DESIGN.md §19): for each key, the wake
// functions of the watches listening for its releases, each until its signal aborts.

/** A watch's wake function (`Backend["watch"]`): `true` when the watch stopped listening. */
type Wake = (stopped?: true) => void;

/** The keys watched in one backend object, with their waiters' wake functions. */
export interface Wakes {
  /**
   * Adds `wake` for `key` until `signal` aborts, then calls `left(key)` if no wake is left for
   * `key`. Returns the function that removes it at once (a watch that could not listen).
   */
  add(key: string, wake: Wake, signal: AbortSignal, left: (key: string) => void): () => void;
  /**
   * Wakes the waiters of `key`, or of every key when `key` is undefined; with `stopped`, tells
   * them their watch stopped listening (each one told may leave meanwhile).
   */
  wake(key?: string, stopped?: true): void;
  /** The keys watched now. */
  keys(): string[];
  /** Whether any key is watched. */
  readonly size: number;
}

/** An empty {@link Wakes}. */
export function wakes(): Wakes {
  const byKey = new Map<string, Set<Wake>>();
  return {
    add(key, wake, signal, left) {
      const set = byKey.get(key) ?? new Set();
      byKey.set(key, set.add(wake));
      let done = false;
      const remove = () => {
        if (done) return;
        done = true;
        signal.removeEventListener("abort", remove);
        set.delete(wake);
        if (set.size === 0 && byKey.get(key) === set) {
          byKey.delete(key);
          left(key);
        }
      };
      signal.addEventListener("abort", remove, { once: true });
      return remove;
    },
    wake(key, stopped) {
      const sets = key === undefined ? [...byKey.values()] : [byKey.get(key)];
      for (const set of sets) for (const wake of [...(set ?? [])]) wake(stopped);
    },
    keys: () => [...byKey.keys()],
    get size() {
      return byKey.size;
    },
  };
}
