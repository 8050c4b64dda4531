// leasehold status: who holds the lock, or (--limit) the permits of a semaphore.
import process from "node:process";
import type { Backend, HolderInfo } from "../src/backend.ts";
import { core, inspectKey } from "../src/engine.ts";
import { createSemaphore, type SlotHolder } from "../src/index.ts";
import { slotKey } from "../src/slots.ts";
import type { Options } from "./args.ts";
import { messageOf, UsageError, write } from "./output.ts";

/**
 * Prints the holder of `--name` on `backend` (`label`: which one, and where), or with `--limit`
 * the permits held. Each read is bounded by max(ttl/5, 1 s), as `holder()` is: a backend that does
 * not answer rejects with a retryable BackendError naming the bound (exit 69).
 */
export async function status(o: Options, backend: Backend, label: string): Promise<number> {
  if (o.limit !== undefined) return permits(o, o.limit, backend, label);
  let c: ReturnType<typeof core>;
  try {
    c = core(backend, { name: o.name, ttl: o.ttl });
  } catch (error) {
    throw new UsageError(messageOf(error).replace(/^createMutex: name/, "--name"));
  }
  // Permit 0 of a semaphore of that name, read at the same time: a lock that is free but whose
  // permit 0 is held is in use as a semaphore, which "free" would hide.
  // A probe that fails (a name too long for a permit's key) only leaves that out.
  const [info, permit] = await Promise.all([
    inspectKey(c, o.name),
    inspectKey(c, slotKey(o.name, 0)).catch(() => null),
  ]);
  const semaphore = !info && permit !== null;
  if (o.json) {
    const holder = info
      ? {
          owner: info.owner,
          token: info.token,
          ttlLeft: info.ttlLeft,
          ...(info.readers ? { readers: info.readers } : {}),
        }
      : null;
    const json = { name: o.name, holder, backend: label, ...(semaphore ? { usedAsSemaphore: true } : {}) };
    write(process.stdout, `${JSON.stringify(json)}\n`);
  } else if (info?.readers) {
    const n = info.readers === 1 ? "1 reader" : `${info.readers} readers`;
    write(
      process.stdout,
      `"${o.name}" is held shared by ${n} on ${label}; the newest: ${info.owner} (${details(info)})\n`,
    );
  } else if (info) {
    write(process.stdout, `"${o.name}" is held by ${info.owner} (${details(info)}) on ${label}\n`);
  } else if (semaphore) {
    write(
      process.stdout,
      `"${o.name}" is free as a lock on ${label}, but is used as a semaphore: its permit 0 is held by ${permit.owner} (${details(permit)}); "leasehold status --limit N --name ${o.name}" shows its permits\n`,
    );
  } else {
    write(process.stdout, `"${o.name}" is free on ${label}\n`);
  }
  return 0;
}

/** status --limit: the permits of the semaphore `exec --limit` takes, held or not. */
async function permits(o: Options, limit: number, backend: Backend, label: string): Promise<number> {
  let held: SlotHolder[];
  try {
    held = await createSemaphore(backend, { name: o.name, limit, ttl: o.ttl }).holders();
  } catch (error) {
    if (!(error instanceof TypeError || error instanceof RangeError)) throw error;
    throw new UsageError(messageOf(error).replace(/^createSemaphore: name/, "--name"));
  }
  if (o.json) {
    write(process.stdout, `${JSON.stringify({ name: o.name, limit, held, backend: label })}\n`);
    return 0;
  }
  const list = held.map((h) => `slot ${h.slot} by ${h.owner} (${details(h)})`).join(", ");
  write(
    process.stdout,
    `"${o.name}": ${held.length} of ${limit} permits held on ${label}${list === "" ? "" : `: ${list}`}\n`,
  );
  return 0;
}

/** `token T, ttl left MS ms` (the ttl only when the backend reports it). */
const details = (h: Pick<HolderInfo, "token" | "ttlLeft">): string =>
  `token ${h.token}${h.ttlLeft === undefined ? "" : `, ttl left ${h.ttlLeft} ms`}`;
