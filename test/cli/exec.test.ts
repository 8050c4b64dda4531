// `leasehold exec` (cli/exec.ts): a distributed flock. Exit statuses, contention, lease loss and
// signal forwarding, against the shared Upstash bridge.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { alive, cli, gone, lockKey, sdk, sh, sleep, stopChildren, unique } from "../harness/cli.ts";

afterEach(stopChildren);

describe("leasehold exec", () => {
  it("passes the command's exit status through (128+n for a signal; 127 not found) and gives it the lease", async () => {
    const name = unique("exit");
    const seven = sh(["exec", "--name", name], 'echo "$LEASEHOLD_NAME $LEASEHOLD_TOKEN"; exit 7');
    expect(await seven.status).toBe(7);
    expect(seven.stdout).toMatch(new RegExp(`^${name} \\d+\\n$`));
    const runs = [
      sh(["exec", "--name", `${name}-a`], "kill -TERM $$"),
      cli(["exec", "--name", `${name}-b`, "--", "true"]),
      cli(["exec", "--name", `${name}-c`, "--", "leasehold-no-such-command"]),
    ];
    expect(await Promise.all(runs.map((r) => r.status))).toEqual([143, 0, 127]);
    expect(runs[2]!.stderr).toMatch(/command not found/);
    // released afterwards
    expect(await sdk.exists(lockKey(name), lockKey(`${name}-a`), lockKey(`${name}-b`))).toBe(0);
  });

  it("two at once: one runs, the other exits 75 at once without running; --timeout gives up with 75, --wait runs after", async () => {
    const name = unique("flock");
    // The first holds the lock until the test opens its gate: no race with a sleep on a slow machine.
    const gate = join(mkdtempSync(join(tmpdir(), "leasehold-gate-")), "open");
    const first = sh(
      ["exec", "--name", name, "--ttl", "6000", "--owner", "first"],
      `echo started; while [ ! -e ${gate} ]; do sleep 0.05; done; echo done`,
    );
    await first.printed("started");
    const second = sh(["exec", "--name", name], "echo SECOND-RAN");
    const timed = sh(["exec", "--name", name, "--timeout", "1000"], "echo TIMED-RAN");
    const zero = sh(["exec", "--name", name, "--timeout", "0"], "echo ZERO-RAN");
    const quiet = sh(["exec", "--name", name, "-q"], "echo QUIET-RAN");
    const waiter = sh(["exec", "--name", name, "--wait", "--retry-delay", "100"], "echo WAITER-RAN");
    expect(await second.status).toBe(75);
    expect(await timed.status).toBe(75);
    expect(await zero.status).toBe(75);
    expect(await quiet.status).toBe(75);
    expect(quiet.stdout + quiet.stderr).toBe("");
    expect(first.child.exitCode).toBeNull(); // all three gave up while the first still ran
    expect(waiter.child.exitCode).toBeNull(); // and the waiter still waits
    expect(second.stdout).toBe("");
    expect(second.stderr).toMatch(new RegExp(`"${name}" is taken by first \\(token \\d+\\)`));
    expect(timed.stdout).toBe("");
    expect(timed.stderr).toMatch(/still taken after 1000 ms/);
    // --timeout 0 is one attempt: no "after 0 ms", as if it had waited.
    expect(zero.stdout).toBe("");
    expect(zero.stderr).toBe(
      `leasehold: "${name}" is still taken (--timeout 0: one attempt); not running the command\n`,
    );
    writeFileSync(gate, "");
    expect(await first.status).toBe(0);
    expect(first.stdout).toBe("started\ndone\n");
    expect(await waiter.status).toBe(0);
    expect(waiter.stdout).toBe("WAITER-RAN\n");
    rmSync(dirname(gate), { recursive: true, force: true });
  });

  it("on lease loss stops the command's process group with SIGTERM and exits 76 with a message", async () => {
    const name = unique("lost");
    const script = 'trap "echo got-term; exit 0" TERM; sleep 30 & echo "started $!"; wait';
    const run = sh(["exec", "--name", name, "--ttl", "1500"], script);
    await run.printed("started");
    const grandchild = Number(/started (\d+)/.exec(run.stdout)![1]);
    expect(alive(grandchild)).toBe(true);
    const deleted = performance.now();
    expect(await sdk.del(lockKey(name))).toBe(1); // behind the holder's back
    expect(await run.status).toBe(76);
    // Noticed at the next renewal (every ttl/3 ± 10 %), then the command's group stopped: the
    // bound leaves a loaded machine room and still fails for a command left running.
    expect(performance.now() - deleted).toBeLessThan(3 * 1_500);
    expect(run.stdout).toContain("got-term");
    expect(run.stderr).toMatch(new RegExp(`lost the lock "${name}" \\(token \\d+\\) while the command ran`));
    // The key was deleted and nobody holds it: not "another owner holds it".
    expect(run.stderr).toMatch(
      /lost: the backend no longer has it \(it expired there or was deleted, or another owner took it\)/,
    );
    expect(run.stderr).toContain(`"${name}" is now free on the backend`);
    expect(run.stderr).not.toMatch(/another owner holds it/);
    expect(run.stderr).toMatch(/exiting 76/);
    expect(await gone(grandchild)).toBe(true); // the whole group got the SIGTERM
  });

  it.each([
    ["", false],
    [" (also when its stderr reader is gone: writing a message never ends supervision)", true],
  ])("on lease loss SIGKILLs a command that ignores SIGTERM after --grace%s", async (_, deadStderr) => {
    const name = unique("lost-kill");
    const run = sh(
      ["exec", "--name", name, "--ttl", "1500", "--grace", "300"],
      'trap "" TERM; echo started; sleep 30; echo SURVIVED',
      { deadStderr },
    );
    await run.printed("started");
    await sdk.del(lockKey(name));
    expect(await run.status).toBe(76);
    expect(run.stdout).not.toContain("SURVIVED");
    if (deadStderr) return;
    expect(run.stderr).toMatch(/SIGKILL after 300 ms/);
    expect(run.stderr).toMatch(/stopped with SIGKILL \(status 137\)/);
  });

  it("forwards SIGTERM to the command, waits for it, releases, and exits with its status", async () => {
    const name = unique("forward");
    const run = sh(
      ["exec", "--name", name],
      'trap "echo got-term; exit 3" TERM; sleep 30 & echo started; wait',
    );
    await run.printed("started");
    run.child.kill("SIGTERM");
    expect(await run.status).toBe(3);
    expect(run.stdout).toBe("started\ngot-term\n");
    expect(await sdk.exists(lockKey(name))).toBe(0);
  });
});

describe("leasehold exec --limit", () => {
  it("runs at most N copies at once across processes; the others wait (--wait) or exit 75 at once", async () => {
    const name = unique("limit");
    // Each copy prints its slot and when it started and ended (ms since the epoch).
    const script =
      'echo "start $LEASEHOLD_SLOT $LEASEHOLD_TOKEN $(date +%s%3N)"; sleep 3; echo "end $(date +%s%3N)"';
    const copies = Array.from({ length: 5 }, () =>
      // A ttl well above the copies' run time: a loaded machine must not lose a permit mid-run.
      sh(
        ["exec", "--name", name, "--limit", "2", "--wait", "--retry-delay", "100", "--ttl", "10000"],
        script,
      ),
    );
    await Promise.any(copies.map((c) => c.printed("start")));
    while (copies.filter((c) => c.stdout.startsWith("start")).length < 2) await sleep(20);
    const refused = sh(["exec", "--name", name, "--limit", "2"], "echo REFUSED-RAN");
    expect(await refused.status).toBe(75);
    expect(refused.stdout).toBe("");
    // Each permit's holder with its slot and token, and no stray "(token T)" of one of them after.
    expect(refused.stderr).toMatch(
      new RegExp(
        `^leasehold: "${name}" is taken by all 2 permits: [^ ]+ \\(slot [01], token \\d+\\), [^ ]+ \\(slot [01], token \\d+\\); not running the command\\n$`,
      ),
    );
    expect(await Promise.all(copies.map((c) => c.status))).toEqual([0, 0, 0, 0, 0]);
    const spans = copies.map((c) => {
      const m = /^start ([01]) (\d+) (\d+)\nend (\d+)\n$/.exec(c.stdout);
      expect(m, c.stdout + c.stderr).not.toBeNull();
      return { from: Number(m![3]), to: Number(m![4]) };
    });
    // At no instant more than 2 ran; and 2 did run at once (the limit is not a mutex).
    const most = Math.max(...spans.map((s) => spans.filter((o) => o.from <= s.from && s.from < o.to).length));
    expect(most).toBe(2);
  });

  it("--shared: copies run beside each other, never beside an exclusive exec; a waiting exclusive exec keeps new ones out", async () => {
    const name = unique("shared");
    const gate = join(mkdtempSync(join(tmpdir(), "leasehold-gate-")), "open");
    const hold = `echo "start $LEASEHOLD_TOKEN"; while [ ! -e ${gate} ]; do sleep 0.05; done; echo end`;
    // A ttl well above the run: a loaded machine must not lose a lease mid-run.
    const readers = [0, 1, 2].map(() => sh(["exec", "--shared", "--name", name, "--ttl", "10000"], hold));
    // All three hold at once: each printed "start" while the gate is still closed.
    await Promise.all(readers.map((r) => r.printed("start")));
    const plain = sh(["exec", "--name", name], "echo PLAIN-RAN");
    expect(await plain.status).toBe(75);
    expect(plain.stderr).toMatch(new RegExp(`"${name}" is taken by 3 shared holders; not running`));
    // An exclusive exec that waits: once its first attempt was refused, it is marked waiting.
    const writer = sh(
      ["exec", "--name", name, "--wait", "--retry-delay", "100", "--ttl", "10000"],
      'echo "writer $LEASEHOLD_TOKEN"',
    );
    while ((await sdk.exists(`${lockKey(name)}:writers`)) === 0) await sleep(50);
    const late = sh(["exec", "--shared", "--name", name], "echo LATE-RAN");
    expect(await late.status).toBe(75);
    expect(late.stderr).toMatch(/is taken by 3 shared holders, and an exclusive holder waits for them/);
    expect(writer.child.exitCode).toBeNull();
    writeFileSync(gate, "");
    expect(await Promise.all([...readers, writer].map((r) => r.status))).toEqual([0, 0, 0, 0]);
    const tokens = readers.map((r) => Number(/^start (\d+)\nend\n$/.exec(r.stdout)?.[1]));
    const written = Number(/^writer (\d+)\n$/.exec(writer.stdout)?.[1]);
    expect(written).toBeGreaterThan(Math.max(...tokens));
    for (const bad of [
      ["--limit", "2"],
      ["--once", "--fire", "f"],
    ]) {
      const run = cli(["exec", "--shared", ...bad, "--name", name, "--", "true"]);
      expect(await run.status).toBe(2);
      expect(run.stderr).toMatch(`--shared cannot be used with ${bad[0]}`);
    }
  });

  it("checks --limit", async () => {
    for (const bad of ["0", "1001", "x"]) {
      const run = cli(["exec", "--name", "n", "--limit", bad, "--", "true"]);
      expect(await run.status).toBe(2);
      expect(run.stderr).toMatch(/--limit must be a whole number from 1 to 1000/);
    }
    const lead = cli(["lead", "--name", "n", "--limit", "2", "--", "true"]);
    expect(await lead.status).toBe(2);
    expect(lead.stderr).toMatch(/--limit is not an option of "lead"/);
  });
});
