#!/usr/bin/env node
/**
 * The `leasehold` command: a distributed `flock` (`exec`), active/passive supervision (`lead`)
 * and a holder lookup (`status`) on every backend a command line reaches (cli/backend.ts). Runs on Node 20+, Bun
 * and Deno (`deno run -A`). The library in src/ uses no Node built-ins; this folder does.
 *
 * @module
 */
import process from "node:process";
import { isLockError } from "../src/index.ts";
import { parse } from "./args.ts";
import { backendFrom } from "./backend.ts";
import { exec } from "./exec.ts";
import { EXIT } from "./help.ts";
import { lead } from "./lead.ts";
import { misconfigured } from "./mutex.ts";
import { messageOf, say, UsageError, write } from "./output.ts";
import { status } from "./status.ts";
import { runWatchdog, WATCHDOG_ARG } from "./watchdog.ts";

/** Runs the command line; resolves with the exit status. */
async function main(args: readonly string[], env: Record<string, string | undefined>): Promise<number> {
  if (args[0] === WATCHDOG_ARG) {
    runWatchdog();
    return new Promise(() => {}); // it ends the process itself
  }
  try {
    const o = parse(args);
    if ("help" in o) {
      write(process.stdout, o.help);
      return 0;
    }
    const store = backendFrom(o, env);
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
    say(messageOf(error).replace(/^\[leasehold\] /, ""));
    if (isLockError(error)) {
      if (/does not exist.*createContainer/.test(error.message))
        say("(pass --create-container to create it)");
      return misconfigured(error) ? EXIT.usage : EXIT.unavailable;
    }
    return EXIT.internal;
  }
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
