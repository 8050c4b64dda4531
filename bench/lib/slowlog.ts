// Redis' own time per operation: how long redis-server itself spent on each command a cycle sent
// (SLOWLOG with a threshold of 0 µs), apart from the client, the network and the event loop. A
// Lua script's duration includes the commands it calls; those are logged too, by the script's
// client, and left out here.
import type IORedis from "ioredis";
import { summarize } from "./stats.ts";

/** One SLOWLOG entry as ioredis answers it: id, time, duration (µs), arguments, client address. */
type Entry = [number, number, number, string[], string, string];

/**
 * Runs `cycle` (which sends its commands on `client`) `n` times, one after another, with every
 * command logged; for each command of a cycle in the order sent, the median of redis-server's own
 * time in µs. Cycles that sent another number of commands than most did (a background renewal
 * landing in one) are left out. `admin` (another connection) sets SLOWLOG and puts it back after.
 */
export async function serverTime(
  admin: IORedis,
  client: IORedis,
  cycle: () => Promise<unknown>,
  n = 300,
): Promise<number[]> {
  const addr = /\baddr=(\S+)/.exec(String(await client.call("CLIENT", "INFO")))?.[1];
  if (!addr) throw new Error("bench: CLIENT INFO answered no addr");
  const [, threshold] = (await admin.config("GET", "slowlog-log-slower-than")) as [string, string];
  const [, length] = (await admin.config("GET", "slowlog-max-len")) as [string, string];
  await admin.config("SET", "slowlog-log-slower-than", "0");
  await admin.config("SET", "slowlog-max-len", "1024");
  const cycles: number[][] = [];
  try {
    for (let i = 0; i < n; i++) {
      await admin.slowlog("RESET");
      await cycle();
      const log = (await admin.slowlog("GET", 1024)) as Entry[];
      // Newest first: the cycle's own commands, in the order sent.
      cycles.push(
        log
          .filter((e) => e[4] === addr)
          .reverse()
          .map((e) => e[2]),
      );
    }
  } finally {
    await admin.config("SET", "slowlog-log-slower-than", threshold);
    await admin.config("SET", "slowlog-max-len", length);
  }
  const counts = new Map<number, number>();
  for (const c of cycles) counts.set(c.length, (counts.get(c.length) ?? 0) + 1);
  const usual = [...counts].sort((a, b) => b[1] - a[1])[0]![0];
  const kept = cycles.filter((c) => c.length === usual);
  return Array.from({ length: usual }, (_, j) => summarize(kept.map((c) => c[j]!)).median);
}
