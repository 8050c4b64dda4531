// `leasehold exec --once` (cli/exec.ts over runOnce): the command runs once per fire across
// processes, a done fire exits 0 without running it, a failed command leaves the fire runnable,
// and a standby takes over from a runner killed with SIGKILL. Real processes against the shared
// Upstash bridge; each command appends to a file, so the runs are counted.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { nearestTick } from "../../src/index.ts";
import { cli, sdk, sh, sleep, stopChildren, unique } from "../harness/cli.ts";

afterEach(stopChildren);

const dir = mkdtempSync(join(tmpdir(), "leasehold-once-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
/** A fresh file path in the test's directory. */
const file = (what: string) => join(dir, `${what}-${crypto.randomUUID()}`);
/** The lines a command appended to `path`. */
function lines(path: string): string[] {
  try {
    return readFileSync(path, "utf8").split("\n").filter(Boolean);
  } catch {
    return [];
  }
}

// Each test starts CLI processes one after another (each a runtime's start-up, seconds on a
// loaded 2-core machine), so it gets twice the default time.
describe("leasehold exec --once", { timeout: 60_000 }, () => {
  it("two calls of one fire at once run the command once; a later call exits 0 without running it and says who ran it", async () => {
    const name = unique("once");
    const runs = file("runs");
    // Each run appends its fire, name and token; the sleep makes two runs overlap if both ran.
    const script = `echo "$LEASEHOLD_FIRE $LEASEHOLD_NAME $LEASEHOLD_TOKEN" >> ${runs}; sleep 0.3`;
    const both = [0, 1].map((n) =>
      sh(["exec", "--once", "--fire", "2026-11-24", "--name", name, "--owner", `host-${n}`], script),
    );
    const statuses = await Promise.all(both.map((r) => r.status));
    expect(lines(runs)).toHaveLength(1);
    const [fire, lockName, token] = lines(runs)[0]!.split(" ");
    expect([fire, lockName]).toEqual(["2026-11-24", name]);
    // The one that ran exits 0; the other found the fire running (75) or already done (0).
    expect(statuses.filter((s) => s === 0).length).toBeGreaterThanOrEqual(1);
    for (const s of statuses) expect([0, 75]).toContain(s);
    const runner = statuses[0] === 0 && both[0]!.stderr === "" ? "host-0" : "host-1";

    // Later calls (at once: they do not depend on each other): done, done quietly, another fire.
    const late = sh(["exec", "--once", "--fire", "2026-11-24", "--name", name], `echo LATE-RAN >> ${runs}`);
    const quiet = sh(
      ["exec", "--once", "--fire", "2026-11-24", "--name", name, "-q"],
      `echo Q-RAN >> ${runs}`,
    );
    const next = sh(["exec", "--once", "--fire", "2026-11-25", "--name", name], `echo NEXT >> ${runs}`);
    expect(await Promise.all([late.status, quiet.status, next.status])).toEqual([0, 0, 0]);
    expect(late.stderr).toBe(
      `leasehold: fire 2026-11-24 of "${name}" is already done by ${runner} (token ${token}); not running the command\n`,
    );
    expect(quiet.stdout + quiet.stderr).toBe("");
    expect(lines(runs).slice(1)).toEqual(["NEXT"]);
  });

  it("a fire running elsewhere: exit 75 at once with its holder (--standby --timeout: 75 after it); --standby waits and exits 0 once it is done, without running", async () => {
    const name = unique("running");
    const runs = file("runs");
    const gate = file("gate");
    const first = sh(
      ["exec", "--once", "--fire", "f1", "--name", name, "--owner", "first", "--ttl", "6000"],
      `echo first >> ${runs}; echo started; while [ ! -e ${gate} ]; do sleep 0.05; done`,
    );
    await first.printed("started");
    const busy = sh(["exec", "--once", "--fire", "f1", "--name", name], `echo BUSY-RAN >> ${runs}`);
    const standby = sh(
      ["exec", "--once", "--fire", "f1", "--name", name, "--standby", "--retry-delay", "100"],
      `echo STANDBY-RAN >> ${runs}`,
    );
    const bounded = sh(
      ["exec", "--once", "--fire", "f1", "--name", name, "--standby", "--timeout", "1000"],
      `echo BOUNDED-RAN >> ${runs}`,
    );
    expect(await bounded.status).toBe(75);
    expect(bounded.stderr).toMatch(
      new RegExp(`fire f1 of "${name}" is still running elsewhere after 1000 ms; not running the command`),
    );
    expect(await busy.status).toBe(75);
    expect(busy.stderr).toMatch(
      new RegExp(
        `fire f1 of "${name}" is running elsewhere by first \\(token \\d+\\); not running the command`,
      ),
    );
    await sleep(500);
    expect(standby.child.exitCode).toBeNull(); // still waiting while the first runs
    writeFileSync(gate, "");
    expect(await first.status).toBe(0);
    expect(await standby.status).toBe(0);
    expect(standby.stderr).toMatch(/is already done by first/);
    expect(lines(runs)).toEqual(["first"]);
  });

  it("a failing command leaves the fire runnable: exits with its status, the next call runs it", async () => {
    const name = unique("fails");
    const runs = file("runs");
    const call = (script: string) => sh(["exec", "--once", "--fire", "job-7", "--name", name], script);
    const failed = call(`echo failed >> ${runs}; exit 3`);
    expect(await failed.status).toBe(3);
    const retried = call(`echo retried >> ${runs}`);
    expect(await retried.status).toBe(0);
    const late = call(`echo LATE-RAN >> ${runs}`);
    expect(await late.status).toBe(0);
    expect(late.stderr).toMatch(/is already done/);
    expect(lines(runs)).toEqual(["failed", "retried"]);
  });

  it("a command that succeeded on a lease lost before the record: exit 76, and the fire stays runnable", async () => {
    const name = unique("unrecorded");
    const runs = file("runs");
    const gate = file("gate");
    // A long ttl: the first renewal, which would notice the loss first, is 20 s away.
    const first = sh(
      ["exec", "--once", "--fire", "f2", "--name", name, "--ttl", "60000"],
      `echo first >> ${runs}; echo started; while [ ! -e ${gate} ]; do sleep 0.05; done`,
    );
    await first.printed("started");
    const fireKey = `leasehold:{${name}}:fire:f2`; // the upstash backend's key of the fire's lock
    expect(await sdk.del(fireKey)).toBe(1); // behind the runner's back
    writeFileSync(gate, "");
    expect(await first.status).toBe(76);
    expect(first.stderr).toMatch(
      new RegExp(
        `the command succeeded but fire f2 of "${name}" could not be recorded as done, so it may run again: .*lost`,
      ),
    );
    // Its key was deleted: the backend does not say someone else holds it.
    expect(first.stderr).toMatch(
      /the backend no longer ha(s|d) it \(it expired there or was deleted, or another owner took it\)/,
    );
    expect(first.stderr).not.toMatch(/another owner holds it/);
    const again = sh(["exec", "--once", "--fire", "f2", "--name", name], `echo again >> ${runs}`);
    expect(await again.status).toBe(0);
    expect(lines(runs)).toEqual(["first", "again"]);
  });

  it("--every names the tick nearest to now, the same for two calls and for --fire with its epoch ms", async () => {
    const name = unique("every");
    const runs = file("runs");
    const hour = 3_600_000;
    const before = nearestTick(hour);
    const first = sh(
      ["exec", "--once", "--every", String(hour), "--name", name],
      `echo "$LEASEHOLD_FIRE" >> ${runs}`,
    );
    expect(await first.status).toBe(0);
    const second = sh(
      ["exec", "--once", "--every", String(hour), "--name", name],
      `echo SECOND-RAN >> ${runs}`,
    );
    expect(await second.status).toBe(0);
    const after = nearestTick(hour);
    // The tick flips at the half hour: the test may straddle it (then both calls may differ).
    const [tick] = lines(runs);
    expect([String(before), String(after)]).toContain(tick);
    const iso = new Date(Number(tick)).toISOString();
    if (before === after) {
      expect(lines(runs)).toEqual([tick]);
      expect(second.stderr).toMatch(new RegExp(`fire ${tick} \\(${iso}\\) of "${name}" is already done`));
    }
    const byFire = sh(["exec", "--once", "--fire", tick!, "--name", name], `echo FIRE-RAN >> ${runs}`);
    expect(await byFire.status).toBe(0);
    expect(byFire.stderr).toMatch(/is already done/);
    expect(lines(runs)).not.toContain("FIRE-RAN");
  });

  it("--standby takes over from a runner killed with SIGKILL mid-command, with a greater token, and runs the fire once", async () => {
    const name = unique("standby");
    const tokens = file("tokens");
    const runner = sh(
      ["exec", "--once", "--fire", "tick", "--name", name, "--owner", "runner", "--ttl", "5000"],
      `echo "$LEASEHOLD_TOKEN" >> ${tokens}; echo started; sleep 30; echo RUNNER-FINISHED >> ${tokens}`,
    );
    await runner.printed("started");
    const standby = sh(
      [
        "exec",
        "--once",
        "--fire",
        "tick",
        "--name",
        name,
        "--owner",
        "standby",
        "--standby",
        "--retry-delay",
        "200",
      ],
      `echo "$LEASEHOLD_TOKEN" >> ${tokens}`,
    );
    await sleep(500);
    expect(standby.child.exitCode).toBeNull(); // it waits while the runner holds the fire
    runner.child.kill("SIGKILL");
    expect(await standby.status).toBe(0);
    const [first, second] = lines(tokens).map(Number);
    expect(lines(tokens)).toHaveLength(2);
    expect(second).toBeGreaterThan(first!);
    const late = sh(["exec", "--once", "--fire", "tick", "--name", name], `echo LATE >> ${tokens}`);
    expect(await late.status).toBe(0);
    expect(late.stderr).toMatch(new RegExp(`already done by standby \\(token ${second}\\)`));
    expect(lines(tokens)).toHaveLength(2);
  });

  it("usage errors exit 2 naming what is valid", async () => {
    const run = ["--name", "x"];
    const cases: [string[], RegExp][] = [
      [
        ["exec", ...run, "--fire", "a", "--", "true"],
        /--fire needs --once: leasehold exec --once \(--fire ID \| --every MS\)/,
      ],
      [["exec", ...run, "--every", "1000", "--", "true"], /--every needs --once/],
      [["exec", ...run, "--standby", "--", "true"], /--standby needs --once/],
      [["exec", ...run, "--retain", "1000", "--", "true"], /--retain needs --once/],
      [
        ["exec", ...run, "--once", "--", "true"],
        /--once needs exactly one of --fire ID .* or --every MS .*, got neither/,
      ],
      [
        ["exec", ...run, "--once", "--fire", "a", "--every", "1000", "--", "true"],
        /exactly one of .*, got both/,
      ],
      [
        ["exec", ...run, "--once", "--every", "0", "--", "true"],
        /--every must be a whole number of ms from 1 to/,
      ],
      [["exec", ...run, "--once", "--every", "1h", "--", "true"], /--every must be a whole number of ms/],
      [
        ["exec", ...run, "--once", "--fire", "a", "--limit", "2", "--", "true"],
        /--limit cannot be used with --once/,
      ],
      [
        ["exec", ...run, "--once", "--fire", "a", "--wait", "--", "true"],
        /--wait is not an option of exec --once: --standby/,
      ],
      [
        ["exec", ...run, "--once", "--fire", "a", "--timeout", "100", "--", "true"],
        /--timeout with --once needs --standby/,
      ],
      [["exec", ...run, "--once", "--fire", "", "--", "true"], /--fire must be a string of 1-128 characters/],
      [
        ["exec", ...run, "--once", "--fire", "x".repeat(129), "--", "true"],
        /--fire must be a string of 1-128 .*got 129/,
      ],
      [
        ["exec", ...run, "--once", "--fire", "a", "--retain", "0", "--", "true"],
        /--retain must be an integer number of ms from 1 to 2147483647, got 0/,
      ],
      [["lead", ...run, "--once", "--", "true"], /--once is not an option of "lead"/],
    ];
    const runs = cases.map(([args]) => cli(args));
    const statuses = await Promise.all(runs.map((r) => r.status));
    cases.forEach(([args, message], i) => {
      expect(statuses[i], args.join(" ")).toBe(2);
      expect(runs[i]!.stderr, args.join(" ")).toMatch(message);
      expect(runs[i]!.stdout, args.join(" ")).toBe("");
    });
  });
});
