// leasehold status: who holds the lock.
import process from "node:process";
import type { Backend } from "../src/backend.ts";
import { createMutex } from "../src/index.ts";
import type { Options } from "./args.ts";
import { messageOf, UsageError, write } from "./output.ts";

/** Prints the holder of `--name` on `backend` (`label`: which one, and where). */
export async function status(o: Options, backend: Backend, label: string): Promise<number> {
  try {
    createMutex(backend, { name: o.name });
  } catch (error) {
    throw new UsageError(messageOf(error).replace(/^createMutex: name/, "--name"));
  }
  const info = await backend.inspect({ key: o.name, signal: AbortSignal.timeout(30_000) });
  if (o.json) {
    const holder = info ? { owner: info.owner, token: info.token, ttlLeft: info.ttlLeft } : null;
    write(process.stdout, `${JSON.stringify({ name: o.name, holder, backend: label })}\n`);
  } else if (info) {
    const left = info.ttlLeft === undefined ? "" : `, ttl left ${info.ttlLeft} ms`;
    write(process.stdout, `"${o.name}" is held by ${info.owner} (token ${info.token}${left}) on ${label}\n`);
  } else {
    write(process.stdout, `"${o.name}" is free on ${label}\n`);
  }
  return 0;
}
