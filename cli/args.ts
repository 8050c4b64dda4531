// The command line's arguments: options first, then the command to run.
import { hostname } from "node:os";
import process from "node:process";
import { type CommandName, FLAGS, HELP } from "./help.ts";
import { UsageError } from "./output.ts";

/** What the arguments ask for. */
export interface Options {
  command: CommandName;
  name: string;
  backend?: string;
  container?: string;
  createContainer: boolean;
  /** PostgreSQL, DynamoDB: the lock table, and whether to create it. */
  table?: string;
  createTable: boolean;
  /** Print which backend is used. */
  verbose: boolean;
  ttl: number;
  grace?: number;
  retryDelay: number;
  owner: string;
  wait: boolean;
  timeout?: number;
  /** exec: a semaphore of this many permits instead of a mutex; status: that semaphore's permits. */
  limit?: number;
  /** exec --shared: the lock in shared mode (readers beside readers, never beside a writer). */
  shared: boolean;
  /** lead: the first pause before campaigning again after the command exited on its own, ms. */
  restartDelay: number;
  /** exec --once: the fire (`--fire`'s id as given, or `--every`'s period), `--standby`, `--retain`. */
  once?: Once;
  quiet: boolean;
  json: boolean;
  /** What happens to processes the command leaves in its group when it exits: wait for them, or stop them. */
  children: "wait" | "kill";
  argv: string[];
}

/** exec --once's fire and how to take it. */
export interface Once {
  /** `--fire`: the fire's id, a string as given. */
  fire?: string;
  /** `--every`: the period whose tick nearest to now is the fire, ms. */
  every?: number;
  standby: boolean;
  retain?: number;
}

/** The longest `--every`: 365 days. */
const YEAR = 31_536_000_000;

/** The flags that only mean something with `--once`. */
const ONCE_ONLY = ["--fire", "--every", "--standby", "--retain"] as const;

function ms(flag: string, text: string): number {
  if (!/^\d+$/.test(text))
    throw new UsageError(`${flag} must be a whole number of ms, got ${JSON.stringify(text)}`);
  return Number(text);
}

/**
 * Options come first, then the command: parsing stops at `--` or at the first argument that is
 * not an option, as with env(1) and timeout(1), so the command's own flags stay its own.
 */
export function parse(args: readonly string[]): Options | { help: string; usage?: true } | { version: true } {
  const [command, ...rest] = args;
  // No command is a usage error: the usage goes to stderr, and the status is 2 (--help's is 0).
  if (command === undefined) return { help: HELP.main, usage: true };
  if (command === "-h" || command === "--help" || command === "help") return { help: HELP.main };
  if (command === "-V" || command === "--version") return { version: true };
  if (command !== "exec" && command !== "lead" && command !== "status") {
    throw new UsageError(`unknown command ${JSON.stringify(command)}: use exec, lead or status`);
  }
  const values = new Map<string, string | true>();
  let i = 0;
  for (; i < rest.length; i++) {
    const arg = rest[i]!;
    if (arg === "--") {
      i++;
      break;
    }
    if (arg === "-h" || arg === "--help") return { help: HELP[command] };
    if (!arg.startsWith("-")) break;
    const eq = arg.indexOf("=");
    const flag = arg === "-q" ? "--quiet" : eq > 0 ? arg.slice(0, eq) : arg;
    const spec = FLAGS[flag];
    if (!spec) throw new UsageError(`unknown option ${flag} for "${command}"`);
    if (!spec.in.includes(command)) throw new UsageError(`${flag} is not an option of "${command}"`);
    if (spec.arg !== undefined) {
      const value = eq > 0 ? arg.slice(eq + 1) : rest[++i];
      if (value === undefined) throw new UsageError(`${flag} needs a value`);
      values.set(flag, value);
    } else {
      if (eq > 0) throw new UsageError(`${flag} takes no value`);
      values.set(flag, true);
    }
  }
  const argv = rest.slice(i);
  const str = (flag: string) => values.get(flag) as string | undefined;
  const name = str("--name");
  if (name === undefined) throw new UsageError(`--name is required`);
  if (command === "status" && argv.length > 0) {
    throw new UsageError(`"status" takes no command, got ${JSON.stringify(argv[0])}`);
  }
  if (command !== "status" && argv.length === 0) {
    throw new UsageError(
      `"${command}" needs a command to run: leasehold ${command} --name N -- command [args...]`,
    );
  }
  const num = (flag: string) => {
    const v = str(flag);
    return v === undefined ? undefined : ms(flag, v);
  };
  const timeout = num("--timeout");
  const children = str("--children") ?? "wait";
  if (children !== "wait" && children !== "kill") {
    throw new UsageError(`--children must be wait or kill, got ${JSON.stringify(children)}`);
  }
  const grace = num("--grace");
  const options: Options = {
    command,
    name,
    createContainer: values.has("--create-container"),
    createTable: values.has("--create-table"),
    verbose: values.has("--verbose"),
    ttl: num("--ttl") ?? 15_000,
    retryDelay: num("--retry-delay") ?? 1_000,
    restartDelay: num("--restart-delay") ?? 1_000,
    owner: str("--owner") ?? `${hostname()}:${process.pid}`,
    wait: values.has("--wait") || timeout !== undefined,
    quiet: values.has("--quiet"),
    json: values.has("--json"),
    shared: values.has("--shared"),
    children,
    argv,
  };
  for (const [key, flag] of [
    ["backend", "--backend"],
    ["container", "--container"],
    ["table", "--table"],
  ] as const) {
    const v = str(flag);
    if (v !== undefined) options[key] = v;
  }
  if (timeout !== undefined) options.timeout = timeout;
  const limit = str("--limit");
  if (limit !== undefined) {
    if (!/^\d+$/.test(limit) || Number(limit) < 1 || Number(limit) > 1_000)
      throw new UsageError(`--limit must be a whole number from 1 to 1000, got ${JSON.stringify(limit)}`);
    options.limit = Number(limit);
  }
  if (grace !== undefined) options.grace = grace;
  if (!(options.restartDelay >= 1 && options.restartDelay <= 60_000))
    throw new UsageError(
      `--restart-delay must be a whole number of ms from 1 to 60000, got ${options.restartDelay}`,
    );
  if (options.shared && (options.limit !== undefined || values.has("--once")))
    throw new UsageError(
      `--shared cannot be used with ${options.limit !== undefined ? "--limit" : "--once"}: shared mode is a mutex's, for commands that may run beside each other but never beside an exclusive one`,
    );
  if (values.has("--once")) options.once = once(values, num, options);
  else {
    const stray = ONCE_ONLY.find((f) => values.has(f));
    if (stray !== undefined)
      throw new UsageError(
        `${stray} needs --once: leasehold exec --once (--fire ID | --every MS) [--standby] [--retain MS]`,
      );
  }
  return options;
}

/** `--once`'s options: exactly one of `--fire` and `--every`; `--limit` and `--wait` do not apply. */
function once(
  values: Map<string, string | true>,
  num: (flag: string) => number | undefined,
  o: Options,
): Once {
  const fire = values.get("--fire") as string | undefined;
  const every = num("--every");
  if ((fire === undefined) === (every === undefined)) {
    throw new UsageError(
      `--once needs exactly one of --fire ID (the fire's id, the same on every host) or --every MS (the tick of that period nearest to now), got ${fire === undefined ? "neither" : "both"}`,
    );
  }
  if (every !== undefined && !(every >= 1 && every <= YEAR))
    throw new UsageError(`--every must be a whole number of ms from 1 to ${YEAR} (365 days), got ${every}`);
  if (o.limit !== undefined)
    throw new UsageError("--limit cannot be used with --once: a fire runs once, not N at a time");
  const standby = values.has("--standby");
  if (values.has("--wait"))
    throw new UsageError(
      "--wait is not an option of exec --once: --standby waits while the fire runs elsewhere",
    );
  if (o.timeout !== undefined && !standby)
    throw new UsageError("--timeout with --once needs --standby: it bounds the standby's wait");
  o.wait = standby;
  const retain = num("--retain");
  return {
    ...(fire === undefined ? { every: every! } : { fire }),
    standby,
    ...(retain === undefined ? {} : { retain }),
  };
}
