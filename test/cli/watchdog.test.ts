// The command never outlives the lease (cli/watchdog.ts, cli/supervise.ts): when leasehold is
// killed or frozen, or its stderr reader is gone, and with background children (flock's way).
import { readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type Command, ended } from "../../cli/supervise.ts";
import { cli, gone, lockKey, type Run, sdk, sh, sleep, stopChildren, unique } from "../harness/cli.ts";

afterEach(stopChildren);

/** Nanosecond wall-clock stamps a shell command appends to `file`, one per line. */
function stamps(file: string): bigint[] {
  let text = "";
  try {
    text = readFileSync(file, "utf8");
  } catch {}
  return text
    .split("\n")
    .filter((l) => /^\d+$/.test(l))
    .map((l) => BigInt(l));
}

const tmp = (what: string) => join(tmpdir(), `leasehold-${what}-${crypto.randomUUID()}`);

/** A shell command that prints "started", then stamps `file` every 20 ms until stopped. */
const ticking = (file: string) => `echo started; while :; do date +%s%N >> ${file}; sleep 0.02; done`;

describe("the command never outlives the lease", () => {
  // Two "hosts" (two leasehold processes) on one lock: the second one's command stamps the time it
  // started; every stamp of the first command must come before it, whatever happened to the first
  // leasehold process.
  async function handover(
    disturb: (first: Run) => Promise<void>,
  ): Promise<{ first: Run; a: bigint[]; b: bigint }> {
    const name = unique("handover");
    const fileA = tmp("a");
    const fileB = tmp("b");
    const first = sh(["exec", "--name", name, "--ttl", "2000"], ticking(fileA));
    await first.printed("started");
    const second = sh(["exec", "--name", name, "--wait"], `date +%s%N > ${fileB}`);
    await disturb(first);
    expect(await second.status).toBe(0);
    const b = stamps(fileB)[0]!;
    await sleep(300); // a command still running would stamp again meanwhile
    const a = stamps(fileA);
    rmSync(fileA, { force: true });
    rmSync(fileB, { force: true });
    return { first, a, b };
  }

  it("kill -9 of leasehold exec: the watchdog stops the command before the lock can pass on", async () => {
    const { a, b } = await handover(async (first) => {
      await sleep(500);
      first.child.kill("SIGKILL");
    });
    expect(a.length).toBeGreaterThan(5);
    expect(a.at(-1)! < b).toBe(true);
  });

  it("SIGSTOP of leasehold exec for 4 s: the command is stopped before the lock can pass on; exec then exits 76", async () => {
    const { first, a, b } = await handover(async (run) => {
      await sleep(500);
      run.child.kill("SIGSTOP");
      setTimeout(() => run.child.kill("SIGCONT"), 4_000);
    });
    expect(a.length).toBeGreaterThan(5);
    expect(a.at(-1)! < b).toBe(true);
    expect(await first.status).toBe(76);
    expect(first.stderr).toMatch(/the watchdog is stopping the command: the lease's deadline passed/);
  });

  it("a dead stderr reader: lead keeps supervising, and stops the command when asked", async () => {
    const name = unique("lead-epipe");
    const run = sh(["lead", "--name", name], "echo started; exec sleep 30", {
      deadStderr: true,
    });
    await run.printed("started");
    await sleep(1_000); // "leading ..." went to the dead pipe meanwhile
    expect(run.child.exitCode).toBeNull();
    expect((await sdk.get<string>(lockKey(name)))?.split("|")[1]).toBeDefined();
    run.child.kill("SIGTERM");
    expect(await run.status).toBe(0);
    expect(await sdk.exists(lockKey(name))).toBe(0);
  });

  it("background children keep the lock until they end (flock's way); --children kill stops them", async () => {
    const name = unique("bg");
    const file = tmp("bg");
    const run = sh(["exec", "--name", name], `(sleep 1.5; echo bg-done > ${file}) & exit 5`);
    await sleep(800);
    // the command itself has exited; its background job still runs, so the lock stays taken
    expect(run.child.exitCode).toBeNull();
    const status = cli(["status", "--name", name]);
    expect(await status.status).toBe(0);
    expect(status.stdout).toMatch(/is held by/);
    expect(await run.status).toBe(5);
    expect(readFileSync(file, "utf8")).toBe("bg-done\n"); // released only after the job ended
    rmSync(file, { force: true });
    expect(await sdk.exists(lockKey(name))).toBe(0);

    const killing = sh(
      ["exec", "--name", `${name}-kill`, "--children", "kill"],
      "sleep 30 & echo bg $!; exit 4",
    );
    const started = performance.now();
    expect(await killing.status).toBe(4);
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(await gone(Number(/bg (\d+)/.exec(killing.stdout)![1]))).toBe(true);
    expect(await sdk.exists(lockKey(`${name}-kill`))).toBe(0);
  });

  it("lead: a command that exits leaving a background job leads until the job ends", async () => {
    const name = unique("lead-bg");
    const run = sh(["lead", "--name", name, "--restart-delay", "5000"], "sleep 1.2 & echo started; exit 0");
    await run.printed("started");
    await sleep(600);
    expect(await sdk.exists(lockKey(name))).toBe(1); // the job still runs: still leading
    await sleep(1_500);
    expect(await sdk.exists(lockKey(name))).toBe(0); // job done: term over, lock released
    expect(run.stderr).toMatch(
      /the command exited with status 0 after \d+ ms; leadership released, campaigning again in \d+ ms/,
    );
  });
});

describe("ended(): whose end it was", () => {
  /** A command that exited with `status` (its group gone), stopped on its own by the watchdog when `stoppedBy`. */
  const command = (status: number, stoppedBy?: string): Command => ({
    exited: Promise.resolve(status),
    gone: Promise.resolve(),
    running: () => false,
    kill() {},
    stop: () => Promise.resolve(),
    killed: false,
    startedAt: 0,
    stoppedBy,
  });
  const never = new Promise<never>(() => {});

  it("a command the watchdog stopped is the lease's end, even when its exit is heard before the lease's own timer", async () => {
    // After a freeze (SIGSTOP), the watchdog's "stopping" and the command's exit (143) can reach
    // leasehold before its own lease's timer fires: exec must exit 76 (lost), not 143.
    const why = "the lease's deadline passed without a heartbeat from leasehold";
    expect(await ended(command(143, why), "wait", never, "keeping the lock")).toBeUndefined();
  });

  it("a command that ended on its own gives its status", async () => {
    expect(await ended(command(3), "wait", never, "keeping the lock")).toBe(3);
  });
});
