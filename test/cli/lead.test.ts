// `leasehold lead` (cli/lead.ts): active/passive supervision of a command.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { cli, lockKey, sdk, sh, sleep, stopChildren, unique } from "../harness/cli.ts";

afterEach(stopChildren);

describe("leasehold lead", () => {
  it("runs the command on one leader; SIGTERM hands over; after a loss it stops and restarts the command", {
    timeout: 100_000,
  }, async () => {
    const name = unique("lead");
    const args = (who: string) => [
      "lead",
      "--name",
      name,
      "--ttl",
      "1500",
      "--retry-delay",
      "200",
      "--owner",
      who,
      "--",
      "sh",
      "-c",
      `echo "run ${who} $LEASEHOLD_TOKEN"; exec sleep 30`,
    ];
    const a = cli(args("a"));
    await a.printed("run a");
    const b = cli(args("b"));
    await sleep(1_500); // b campaigns, a keeps leading
    expect(b.stdout).toBe("");
    a.child.kill("SIGTERM");
    expect(await a.status).toBe(0);
    expect(a.stderr).toMatch(/SIGTERM: stopping/);
    // b leads once a released the lock; its command starts under a watchdog process, which a
    // loaded machine takes seconds to start (3 s was missed under a load average of 15).
    // A loaded run took over 15 s (b's attempts got no answer from the bridge for a while).
    await b.printed("run b", 1, 40_000);

    await sdk.del(lockKey(name)); // b loses its lease behind its back
    await b.printed("run b", 2, 40_000);
    expect(b.stderr).toMatch(new RegExp(`lost leadership of "${name}"`));
    const tokens = [...`${a.stdout}${b.stdout}`.matchAll(/run \w (\d+)/g)].map((m) => Number(m[1]));
    expect(tokens).toHaveLength(3);
    expect(tokens).toEqual([...tokens].sort((x, y) => x - y));
    b.child.kill("SIGINT");
    expect(await b.status).toBe(0);
    expect(await sdk.exists(lockKey(name))).toBe(0);
  });

  it("a command that keeps exiting is started again after --restart-delay, doubled each time in a row, said on stderr", {
    timeout: 60_000,
  }, async () => {
    const name = unique("lead-exit");
    const run = sh(
      ["lead", "--name", name, "--ttl", "1500", "--restart-delay", "100"],
      'echo "run $LEASEHOLD_TOKEN"; exit 3',
    );
    // Five terms: pauses of about 100, 200, 400 and 800 ms between them (it restarted every
    // --retry-delay, about 1 s, forever). A few seconds when idle; a loaded machine starts each
    // command's watchdog seconds late, so 40 s.
    await run.printed("run", 5, 40_000);
    run.child.kill("SIGTERM");
    expect(await run.status).toBe(0);
    const pauses = [
      ...run.stderr.matchAll(
        /the command exited with status 3 after \d+ ms; leadership released, campaigning again in (\d+) ms/g,
      ),
    ].map((m) => Number(m[1]));
    expect(pauses.length, run.stderr).toBeGreaterThanOrEqual(4);
    // Each within the 25 % jitter of 100 ms doubled: so each strictly longer than the last.
    pauses.slice(0, 4).forEach((pause, i) => {
      expect(pause).toBeGreaterThanOrEqual(0.75 * 100 * 2 ** i);
      expect(pause).toBeLessThanOrEqual(1.25 * 100 * 2 ** i);
    });
  });

  it("the pause starts over after a run that lasted 60 times --restart-delay", {
    timeout: 60_000,
  }, async () => {
    const name = unique("lead-reset");
    const dir = mkdtempSync(join(tmpdir(), "leasehold-lead-"));
    const count = join(dir, "count");
    // Runs 1, 2, 4 and 5 exit at once; run 3 lasts 4 s, longer than 60 x 50 ms = 3 s. A run is
    // timed from the command's start (not its watchdog's, seconds on a loaded machine).
    const run = sh(
      ["lead", "--name", name, "--ttl", "6000", "--restart-delay", "50"],
      `n=$(( $(cat ${count} 2>/dev/null || echo 0) + 1 )); echo $n > ${count}; echo "run $n"; [ $n -eq 3 ] && sleep 4; exit 1`,
    );
    await run.printed("run 5", 1, 40_000);
    run.child.kill("SIGTERM");
    expect(await run.status).toBe(0);
    rmSync(dir, { recursive: true, force: true });
    const pauses = [...run.stderr.matchAll(/campaigning again in (\d+) ms/g)].map((m) => Number(m[1]));
    expect(pauses.length, run.stderr).toBeGreaterThanOrEqual(4);
    // 50, 100, then (after the long run) 50 again, then 100: each within the 25 % jitter.
    const expected = [50, 100, 50, 100];
    pauses.slice(0, 4).forEach((pause, i) => {
      expect(pause, run.stderr).toBeGreaterThanOrEqual(Math.floor(0.75 * expected[i]!));
      expect(pause, run.stderr).toBeLessThanOrEqual(Math.ceil(1.25 * expected[i]!));
    });
  });

  it("checks --restart-delay", async () => {
    const run = cli(["lead", "--name", "n", "--restart-delay", "0", "--", "true"]);
    expect(await run.status).toBe(2);
    expect(run.stderr).toMatch(/--restart-delay must be a whole number of ms from 1 to 60000, got 0/);
  });
});
