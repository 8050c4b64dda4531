// The lock keys of a semaphore's slots, shared by createSemaphore and the backends that keep all
// the slots of one semaphore together (the Durable Object; docs/DESIGN.md §5.6, §15). No imports.

/** The largest `limit` of a semaphore. */
export const MAX_LIMIT = 1_000;

/** Between a semaphore's name and a slot number in the slot's lock key: `name:permit:3`. */
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
 * The semaphore name and slot of a key of the slot form (`name:permit:<digits>`, split at the last
 * `:permit:`), or `null` for any other key. `slot` is exact only when `key` is what
 * {@link slotKey} makes of it (no leading zeros, a safe integer): check `slotKey(name, slot) === key`.
 */
export function slotOf(key: string): { name: string; slot: number } | null {
  const m = SLOT_KEY.exec(key);
  return m ? { name: m[1]!, slot: Number(m[2]) } : null;
}
