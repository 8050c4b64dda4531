// `leasehold --help` and usage errors (cli/help.ts, cli/args.ts).
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { STATUSES } from "../../cli/help.ts";
import { bare, cli, stopChildren } from "../harness/cli.ts";

afterEach(stopChildren);

const root = new URL("../../", import.meta.url);

describe("leasehold --help and usage errors", () => {
  it("--help documents every command, flag, default, exit status and variable, and exits 0", async () => {
    const runs = [["help"], ["--help"], ["exec", "--help"], ["lead", "-h"], ["status", "--help"]].map((a) =>
      cli(a, { env: bare }),
    );
    expect(await Promise.all(runs.map((r) => r.status))).toEqual([0, 0, 0, 0, 0]);
    const [, main, exec, lead, status] = runs.map((r) => r.stdout);
    for (const text of [main, exec, lead, status]) {
      for (const v of [
        "UPSTASH_REDIS_REST_URL",
        "UPSTASH_REDIS_REST_TOKEN",
        "AZURE_STORAGE_CONNECTION_STRING",
        "LEASEHOLD_AZURE_CONTAINER",
        "--container",
        "--create-container",
        "--backend",
        "--name",
        "REDIS_URL",
        "DATABASE_URL",
        "LEASEHOLD_POSTGRES_TABLE",
        "LEASEHOLD_DYNAMODB_TABLE",
        "AWS_ENDPOINT_URL",
        "LEASEHOLD_DO_URL",
        "LEASEHOLD_DO_SECRET",
        "--table",
        "--create-table",
        "--verbose",
      ]) {
        expect(text).toContain(v);
      }
    }
    for (const flag of [
      "--wait",
      "--timeout",
      "--ttl",
      "--grace",
      "--retry-delay",
      "--owner",
      "--quiet",
      "15000",
      " 75 ",
      " 76 ",
      "--once",
      "--fire ID",
      "--every MS",
      "--standby",
      "--retain MS",
      "86400000",
      "LEASEHOLD_FIRE",
    ]) {
      expect(exec).toContain(flag);
    }
    // exec --once's "already done" status, in the one table every help shows.
    for (const text of [main, exec])
      expect(text).toMatch(/ 0 +(exec: )?with --once, the fire is already done/);
    for (const flag of ["--ttl", "--grace", "--retry-delay", "--owner", "SIGTERM"])
      expect(lead).toContain(flag);
    expect(status).toContain("--json");
    for (const code of ["75", "76", "69", "126", "127"]) expect(main).toContain(code);
  });

  it("no command: the usage on stderr and exit 2 (a usage error); --version and -V print the package's version", async () => {
    const runs = [cli([], { env: bare }), cli(["--version"], { env: bare }), cli(["-V"], { env: bare })];
    expect(await Promise.all(runs.map((r) => r.status))).toEqual([2, 0, 0]);
    const [bareRun, long, short] = runs;
    expect(bareRun!.stdout).toBe("");
    expect(bareRun!.stderr).toMatch(/^leasehold: a distributed lock .*\nUsage:\n {2}leasehold exec/s);
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
    expect(long!.stdout).toBe(`${pkg.version}\n`);
    expect(short!.stdout).toBe(`${pkg.version}\n`);
  });

  it("README.md and docs/cli.md list the exit statuses of the one table --help prints, row for row", () => {
    const expected = STATUSES.map(([status, commands, meaning]) => [
      status,
      commands.length === 3 ? "all" : commands.join(", "),
      meaning,
    ]);
    for (const file of ["README.md", "docs/cli.md"]) {
      const text = readFileSync(new URL(`../../${file}`, import.meta.url), "utf8");
      const lines = text.split("\n");
      const header = lines.findIndex((l) => /^\| exit status +\| commands +\| meaning +\|$/.test(l));
      expect(header, `${file}: no "| exit status | commands | meaning |" table`).toBeGreaterThan(-1);
      const rows: string[][] = [];
      for (const line of lines.slice(header + 2)) {
        if (!line.startsWith("|")) break;
        rows.push(
          line
            .split("|")
            .slice(1, -1)
            .map((cell) => cell.trim().replaceAll("`", "")),
        );
      }
      expect(rows, file).toEqual(expected);
    }
  });

  it("LEASEHOLD_TOKEN has one meaning, exec's fencing token: nothing reads it as a secret or a backend's setting", () => {
    // The Durable Object route's secret is LEASEHOLD_DO_SECRET; a script run under exec reads
    // LEASEHOLD_TOKEN as its fencing token and must never find a secret there.
    const misuse = [
      /(?<!process\.)\benv\.LEASEHOLD_TOKEN\b/, // a Worker's or a config's env object
      /["']LEASEHOLD_TOKEN["']/, // a variable name in a list, such as the secrets a backend reads
      /LEASEHOLD_TOKEN\b.*\bsecret|\bsecret\b.*LEASEHOLD_TOKEN\b/i,
    ];
    const files = execFileSync("git", ["ls-files"], { cwd: root, encoding: "utf8" }).split("\n");
    const found: string[] = [];
    for (const file of files) {
      if (!/\.(ts|mts|mjs|js|md|json|toml|sh)$/.test(file)) continue;
      if (file === "CHANGELOG.md" || file === "test/cli/help.test.ts") continue; // history; these rules
      let text: string;
      try {
        text = readFileSync(new URL(file, root), "utf8");
      } catch {
        continue; // listed but deleted in this working tree
      }
      text.split("\n").forEach((line, i) => {
        // "not LEASEHOLD_TOKEN" says which name the secret is not.
        if (/\bnot `?LEASEHOLD_TOKEN\b/.test(line)) return;
        if (misuse.some((m) => m.test(line))) found.push(`${file}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(found).toEqual([]);
  });

  it("exits 2 with a usage message for unknown options, a missing --name or command, bad numbers, a bad --owner", async () => {
    const cases: [string[], RegExp][] = [
      [["exec", "--name", "x", "--bogus", "--", "true"], /unknown option --bogus/],
      [["exec", "--", "true"], /--name is required/],
      [["exec", "--name", "x"], /needs a command/],
      [["lead", "--name", "x", "--"], /needs a command/],
      [["status", "--name", "x", "--wait"], /--wait is not an option of "status"/],
      [["exec", "--name", "x", "--ttl", "soon", "--", "true"], /--ttl must be a whole number of ms/],
      [["frobnicate"], /unknown command/],
      [["exec", "--name", "bad//name", "--", "true"], /name .* is invalid/],
      [["exec", "--name", "x", "--ttl", "1000", "--grace", "900", "--", "true"], /--grace must be less than/],
      // An argument cannot carry U+0000; any other control character is refused the same way.
      [
        ["exec", "--name", "x", "--owner", "host\t1", "--", "true"],
        /--owner must be 1-256 characters .* without control characters .*, got a control character \(U\+0009\) at index 4/,
      ],
      [
        ["lead", "--name", "x", "--owner", "\u001b[31mred", "--", "true"],
        /--owner must be .* without control characters .*, got a control character \(U\+001B\) at index 0/,
      ],
      [
        ["exec", "--name", "x", "--limit", "2", "--owner", "x".repeat(257), "--", "true"],
        /--owner must be 1-256 characters .*, got 257 characters/,
      ],
    ];
    const runs = cases.map(([args]) => cli(args));
    const statuses = await Promise.all(runs.map((r) => r.status));
    cases.forEach(([args, message], i) => {
      expect(statuses[i], args.join(" ")).toBe(2);
      expect(runs[i]!.stderr, args.join(" ")).toMatch(message);
      expect(runs[i]!.stderr).toMatch(/--help/);
    });
  });
});
