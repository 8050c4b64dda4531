// `leasehold lead` (cli/lead.ts): active/passive supervision of a command.
import { afterEach, describe, expect, it } from "vitest";
import { cli, lockKey, sdk, sh, sleep, stopChildren, unique } from "../harness/cli.ts";

afterEach(stopChildren);

describe("leasehold lead", () => {
  it("runs the command on one leader; SIGTERM hands over; after a loss it stops and restarts the command", {
    timeout: 60_000,
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
    await b.printed("run b", 1);

    await sdk.del(lockKey(name)); // b loses its lease behind its back
    await b.printed("run b", 2);
    expect(b.stderr).toMatch(new RegExp(`lost leadership of "${name}"`));
    const tokens = [...`${a.stdout}${b.stdout}`.matchAll(/run \w (\d+)/g)].map((m) => Number(m[1]));
    expect(tokens).toHaveLength(3);
    expect(tokens).toEqual([...tokens].sort((x, y) => x - y));
    b.child.kill("SIGINT");
    expect(await b.status).toBe(0);
    expect(await sdk.exists(lockKey(name))).toBe(0);
  });

  it("a command that exits on its own ends the term and is started again after about --retry-delay", {
    timeout: 60_000,
  }, async () => {
    const name = unique("lead-exit");
    const run = sh(
      ["lead", "--name", name, "--ttl", "1500", "--retry-delay", "200"],
      'echo "run $LEASEHOLD_TOKEN"; exit 3',
    );
    // Three terms (each about --retry-delay after the last): a second or two when idle; a loaded
    // machine started each shell seconds late (15 s did not see the first), so 40 s.
    await run.printed("run", 3, 40_000);
    run.child.kill("SIGTERM");
    expect(await run.status).toBe(0);
    expect(run.stderr).toMatch(/the command exited with status 3; leadership released/);
  });
});
