// The lock keys of a semaphore's slots, shared by createSemaphore and the backends that keep all
// the slots of one semaphore together (the Durable Object; docs/DESIGN.md §5.6, §15), and the
// fence counter a fire's key draws its tokens from (counterOf, docs/DESIGN.md §17). No imports.

/** The largest `limit` of a semaphore. */
export const MAX_LIMIT = 1_000;

/**
 * Between a semaphore's name and a slot number in the slot's lock key: `name:permit:3` (a permit
 * is the lease held in a slot). A stored format: changing it would break live locks across
 * versions, so the word stays `permit` where the code says slot.
 */
const SLOT = ":permit:";

/** A slot key: the semaphore's name, `:permit:`, and the slot in decimal digits. */
const SLOT_KEY = /^(.+):permit:(\d+)$/;

/**
 * The lock key of slot `slot` of the semaphore `name`: `name:permit:<slot>`. A mutex of exactly
 * that name is that slot (it excludes, and is excluded by, the semaphore's permit in it).
 */
export function slotKey(name: string, slot: number): string {
  return `${name}${SLOT}${slot}`;
}

/**
 * The semaphore name and slot of a slot key: exactly what {@link slotKey} makes for a slot below
 * {@link MAX_LIMIT} (`name:permit:<digits>`, split at the last `:permit:`, no leading zero), or
 * `null` for any other key. Backends that keep a semaphore's slots together (the Durable Object's
 * object, Redis' hash tag) group only these, so mutexes that merely look alike (`doc:permit:12345`)
 * keep their own object or slot.
 */
export function slotOf(key: string): { name: string; slot: number } | null {
  const m = SLOT_KEY.exec(key);
  if (!m) return null;
  const name = m[1]!;
  const slot = Number(m[2]);
  return slot < MAX_LIMIT && slotKey(name, slot) === key ? { name, slot } : null;
}

/**
 * A fire's lock key (runOnce, src/once.ts fireKey: `name:fire:<id>`, or `name:fire@<SHA-256 hex>`
 * for a long id): the mutex's name, then `:fire:` and a non-empty id without `:` (fireKey writes
 * a `:` of the id as `+3A`), or `:fire@` and 64 hex digits. So the split is at the last `:fire`,
 * and the name may hold `:fire` itself (a mutex named `job:fire` is not `job`'s fire).
 */
const FIRE_KEY = /^(.+):fire(?::[^:]+|@[0-9A-F]{64})$/s;

/**
 * The lock key whose fence counter `key`'s leases draw their tokens from: for a fire's key, the
 * mutex's name (so a fire keeps only its expiring record, and tokens increase across the fires
 * and plain leases of a name: docs/DESIGN.md §17); for any other key (a slot key included, which
 * keeps its own counter), `key` itself. A mutex whose name has a fire key's form (`job:fire:x`)
 * shares the counter of `job` too, and so do its fires: tokens still strictly increase on every
 * key, and across a name's plain leases and fires.
 */
export function counterOf(key: string): string {
  let name = key;
  for (;;) {
    const m = slotOf(name) ? null : FIRE_KEY.exec(name);
    if (!m) return name;
    name = m[1]!;
  }
}

/**
 * Whether `key` is neither a slot's key nor a fire's (no `:permit:`, no `:fire` in it): then it is
 * its own counter ({@link counterOf}) and no {@link slotOf}, told by one plain match rather than
 * theirs (a backend's hot path: the renewals of thousands of names).
 */
export const isPlain = (key: string): boolean => !/:permit:|:fire/.test(key);
