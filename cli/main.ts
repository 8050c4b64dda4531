#!/usr/bin/env node
/**
 * The `leasehold` command: a distributed `flock` (`exec`), active/passive supervision (`lead`)
 * and a holder lookup (`status`) on every backend a command line reaches (cli/backend.ts). Runs on Node 20+, Bun
 * and Deno (`deno run -A`). The library in src/ uses no Node built-ins; this folder does.
 *
 * @module
 */
import { readFileSync } from "node:fs";
import process from "node:process";
import { isLockError } from "../src/index.ts";
import { parse } from "./args.ts";
import { backendFrom } from "./backend.ts";
import { exec } from "./exec.ts";
import { EXIT } from "./help.ts";
import { lead } from "./lead.ts";
import { describe, misconfigured } from "./mutex.ts";
import { messageOf, say, UsageError, write } from "./output.ts";
import { status } from "./status.ts";
import { runWatchdog, WATCHDOG_ARG } from "./watchdog.ts";

/** Runs the command line; resolves with the exit status. */
async function main(args: readonly string[], env: Record<string, string | undefined>): Promise<number> {
  if (args[0] === WATCHDOG_ARG) {
    runWatchdog();
    return new Promise(() => {}); // it ends the process itself
  }
  let label: string | undefined;
  try {
    const o = parse(args);
    if ("version" in o) {
      write(process.stdout, `${version()}\n`);
      return 0;
    }
    if ("help" in o) {
      write(o.usage ? process.stderr : process.stdout, o.help);
      return o.usage ? EXIT.usage : 0;
    }
    const store = backendFrom(o, env);
    label = store.label;
    if (o.verbose) say(`using ${store.label}`);
    try {
      return await (o.command === "exec" ? exec : o.command === "lead" ? lead : status)(
        o,
        store.backend,
        store.label,
      );
    } finally {
      await store.close();
    }
  } catch (error) {
    if (error instanceof UsageError) {
      say(error.message);
      const command = args[0] === "exec" || args[0] === "lead" || args[0] === "status" ? `${args[0]} ` : "";
      say(`run "leasehold ${command}--help" for usage`);
      return EXIT.usage;
    }
    if (isLockError(error)) {
      say(`${describe(error)}${label === undefined ? "" : ` (${label})`}`);
      return misconfigured(error) ? EXIT.usage : EXIT.unavailable;
    }
    say(messageOf(error));
    return EXIT.internal;
  }
}

/**
 * The version in the package.json leasehold ships with: beside cli/ in the sources, two folders
 * up from dist/cli/main.js once built. Read when asked, so no other command pays for it.
 */
function version(): string {
  for (const path of ["../package.json", "../../package.json"]) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(path, import.meta.url), "utf8")) as {
        name?: unknown;
        version?: unknown;
      };
      if (pkg.name === "leasehold" && typeof pkg.version === "string") return pkg.version;
    } catch {
      // Not there: the other layout.
    }
  }
  throw new Error("leasehold's package.json was not found beside the command");
}

// A wait that nothing will ever end (a promise no timer or socket can settle) would otherwise let
// the event loop empty and the process exit 0 having done nothing: report it as the bug it is.
if (process.argv[2] !== WATCHDOG_ARG) {
  process.once("beforeExit", () => {
    say(
      "internal error: leasehold stopped waiting without an outcome (nothing left to wait for); please report it",
    );
    process.exit(EXIT.internal);
  });
}

main(process.argv.slice(2), process.env).then(
  (code) => process.exit(code),
  (error: unknown) => {
    say(`internal error: ${messageOf(error)}`);
    process.exit(EXIT.internal);
  },
);
