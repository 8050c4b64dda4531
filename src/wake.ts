// Wake on release (docs/DESIGN.md §19): one watch per backend object and key in a process, shared
// by every waiter on that key, ended with its last waiter. A release wakes the waiter that has
// waited longest (every waiting reader when that one is a reader), not all of them: waking all
// sent each release a herd of attempts that all but one lost (16 contenders on one Redis lock:
// 15.8 attempts per acquisition, acquisitions/s down from 2 429 to 159).
import type { Backend } from "./backend.ts";
import { within } from "./time.ts";
import { quietBound } from "./timing.ts";

/**
 * A waiter on a key: how to wake it, whether it waits for a shared lease, and what to tell it when
 * its watch ends without it (failed, did not listen in time, or stopped listening). @internal
 */
export interface Waiter {
  wake: () => void;
  shared: boolean;
  lost: () => void;
}

interface Watch {
  waiters: Waiter[];
  ctrl: AbortController;
  live: boolean;
}

const watches = new WeakMap<Backend, Map<string, Watch>>();

/**
 * Adds `waiter` to the releases of `key` on `backend`, which must have `watch`; returns the
 * function that removes it. The waiter is woken once when the watch starts listening (or at once
 * if it already does: a release between its refusal and now is not missed), then when a release
 * comes and it is the one to try. A watch that rejects, does not listen within max(ttl/5, 1 s),
 * or stops listening (the backend calls `wake(true)`: its connection lost) ends: its waiters are
 * told (`lost`) and poll, and the next waiter on the key starts another. @internal
 */
export function listen(backend: Backend, key: string, ttl: number, waiter: Waiter): () => void {
  const keys = watches.get(backend) ?? new Map<string, Watch>();
  watches.set(backend, keys);
  let w = keys.get(key);
  if (w?.live) waiter.wake();
  if (!w) {
    const ctrl = new AbortController();
    const watch: Watch = { waiters: [], ctrl, live: false };
    w = watch;
    keys.set(key, watch);
    const end = () => {
      ctrl.abort();
      if (keys.get(key) === watch) keys.delete(key);
      // Ended with waiters left (not by the last one leaving): each is told, and leaves it.
      for (const x of watch.waiters.splice(0)) x.lost();
    };
    const released = (stopped?: true) => {
      if (stopped) return end();
      const first = watch.waiters[0];
      for (const x of first?.shared ? watch.waiters.filter((y) => y.shared) : watch.waiters.slice(0, 1))
        x.wake();
    };
    within(
      backend.watch!.call(backend, key, released, ctrl.signal).then(() => true),
      quietBound(ttl),
    ).then((on) => {
      if (!on || ctrl.signal.aborted) return end();
      watch.live = true;
      for (const x of watch.waiters) x.wake();
    });
    watch.ctrl.signal.addEventListener("abort", end, { once: true });
  }
  const watch = w;
  watch.waiters.push(waiter);
  return () => {
    const i = watch.waiters.indexOf(waiter);
    if (i >= 0) watch.waiters.splice(i, 1);
    if (watch.waiters.length === 0) watch.ctrl.abort();
  };
}
