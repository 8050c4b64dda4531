// The lock keys of a semaphore's slots, shared by createSemaphore and the backends that keep all
// the slots of one semaphore together (the Durable Object; docs/DESIGN.md §5.6, §15). No imports.

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
