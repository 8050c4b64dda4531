#!/usr/bin/env bun
// A distributed `flock` for Bun: run a command on one host at a time, across every host that
// shares the Upstash database.
//
//   bun flock.ts <lock-name> <command> [args…]
//   UPSTASH_REDIS_REST_URL=… UPSTASH_REDIS_REST_TOKEN=… bun flock.ts db-backup ./backup.sh
//
// It waits for the lock (FLOCK_TIMEOUT_MS, default: forever), runs the command with the fencing
// token in LEASEHOLD_TOKEN, and exits with the command's status. If the lease is lost while the
// command runs, the command is killed and flock exits with 76, as `leasehold exec` does; a wait
// that timed out exits 75 (EX_TEMPFAIL), as there.
import { spawn } from "node:child_process";
import { createMutex, isLockError } from "leasehold";
import { fromEnv } from "leasehold/upstash";

const [name, command, ...args] = process.argv.slice(2);
if (!name || !command) {
  console.error("usage: bun flock.ts <lock-name> <command> [args…]");
  process.exit(64);
}

/** The lease was lost while the command ran: `leasehold exec`'s status for it. */
const LOST = 76;

const mutex = createMutex(fromEnv(), { name, ttl: 10_000 });
const timeout = process.env.FLOCK_TIMEOUT_MS ? Number(process.env.FLOCK_TIMEOUT_MS) : undefined;

let status: number;
try {
  await using lease = await mutex.acquire(timeout === undefined ? {} : { timeout });
  status = await new Promise<number>((resolve, reject) => {
    const child = spawn(command, args, {
      stdio: "inherit",
      env: { ...process.env, LEASEHOLD_TOKEN: String(lease.token) },
      signal: lease.signal, // lease lost → the command is killed
    });
    child.once("error", (error) => (lease.signal.aborted ? resolve(LOST) : reject(error)));
    child.once("exit", (code, signal) => resolve(lease.signal.aborted ? LOST : (code ?? (signal ? 128 : 1))));
  });
} catch (error) {
  console.error(isLockError(error) ? `flock: ${error.message}` : error);
  status = isLockError(error) && error.code === "ERR_LOCK_TIMEOUT" ? 75 : 1;
}
process.exit(status);
