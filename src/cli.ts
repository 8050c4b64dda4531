#!/usr/bin/env node
/**
 * The `leasehold` command: a distributed `flock` (`exec`), active/passive supervision (`lead`)
 * and a holder lookup (`status`) on the Upstash or Azure Blob backend. Runs on Node 20+, Bun
 * and Deno (`deno run -A`); it is the only file in src/ that uses Node built-ins.
 *
 * @module
 */
import { spawn } from "node:child_process";
import { hostname } from "node:os";
import process from "node:process";
import type { Backend } from "./backend.ts";
import { azureBlob } from "./backends/azure-blob.ts";
import { fromEnv } from "./backends/upstash.ts";
import {
  type FromWatchdog,
  GROUP_POLL,
  groupAlive,
  killGroup,
  runWatchdog,
  signalStatus,
  type ToWatchdog,
  WATCHDOG_ARG,
  watchdogCommand,
} from "./cli/watchdog.ts";
import { aborted, sleep } from "./clock.ts";
import { redact as redactWith } from "./http.ts";
import { createMutex, isLockError, type Lease } from "./index.ts";

/** Exit statuses; the README's "Command line" section lists the same. */
const EXIT = {
  /** A failure nobody planned for (a bug): the message says what. */
  internal: 1,
  /** Usage or configuration error, including credentials the backend refused. */
  usage: 2,
  /** The backend failed or could not be reached. */
  unavailable: 69,
  /** exec: the lock is taken (without --wait), or --timeout passed while waiting. */
  taken: 75,
  /** exec: the lease was lost while the command ran; the command was stopped. */
  lost: 76,
  /** The command was found but could not be run. */
  cannotRun: 126,
  /** The command was not found. */
  notFound: 127,
} as const;

const FORWARDED = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
type Forwarded = (typeof FORWARDED)[number];

const ENV = {
  upstashUrl: "UPSTASH_REDIS_REST_URL",
  upstashToken: "UPSTASH_REDIS_REST_TOKEN",
  azure: "AZURE_STORAGE_CONNECTION_STRING",
  container: "LEASEHOLD_AZURE_CONTAINER",
} as const;

const COMMON = `Backend (from the environment):
  ${ENV.upstashUrl}, ${ENV.upstashToken}
        Upstash Redis REST URL and token (Vercel's KV_REST_API_URL/_TOKEN also work).
  ${ENV.azure}
        An Azure Storage connection string; the container comes from --container or
        ${ENV.container}. Used when the Upstash variables are not set.
  --backend upstash|azure-blob   Use this backend even when the other one is configured.
  --container C                  Azure container holding the lock blobs.
  --create-container             Create the Azure container when it is missing.

  --name N        The lock name (required): 1-255 letters, digits, - _ . : / @ +.
  -h, --help      Show help.`;

const HELP: Record<string, string> = {
  main: `leasehold: a distributed lock and leader election for scripts and cron.

Usage:
  leasehold exec   --name N [options] -- command [args...]   run a command while holding the lock
  leasehold lead   --name N [options] -- command [args...]   keep a command running while leading
  leasehold status --name N [--json]                         print who holds the lock

Run "leasehold <command> --help" for the options of each command.

${COMMON}

Exit status:
  0-255  exec: the command's own status (128+n when it was killed by signal n)
  2      usage or configuration error (missing variables, bad option, credentials refused)
  69     the backend failed or could not be reached
  75     exec: the lock is taken (without --wait), or --timeout passed
  76     exec: the lock was lost while the command ran; the command was stopped
  126    the command could not be run;  127  the command was not found
`,
  exec: `leasehold exec --name N [options] -- command [args...]

Runs the command while holding the lock, like flock(1) across hosts: takes the lock, runs the
command (stdio inherited, in its own process group) while the lease renews in the background,
and when the command exits keeps the lock until every process it left in its group has ended
too (--children kill stops them instead), then releases it and exits with the command's status.
Without --wait it makes one attempt and exits 75 at once when the lock is taken.

If the lease is lost while the command runs, the command's process group gets SIGTERM, then
SIGKILL after --grace ms, and leasehold exits 76. The lease is set up so that this happens
before the lock can expire on the backend (the grace period is part of its stop margin). A
watchdog process beside the command holds the same deadline, so this holds even when leasehold
itself is killed or frozen: without its heartbeats the command is stopped in time.
SIGINT, SIGTERM and SIGHUP sent to leasehold go to the command (SIGKILL after --grace ms);
the lock is released once it exited. While waiting, backend failures are reported (at most one
line every 10 s); a wait that ends while the backend fails exits 69, not 75.

The command gets LEASEHOLD_NAME, LEASEHOLD_OWNER and LEASEHOLD_TOKEN (the fencing token) in its
environment.

Options:
  --wait               Wait until the lock is free instead of exiting 75.
  --timeout MS         Wait at most MS ms (implies --wait), then exit 75.
  -q, --quiet          Print nothing when the lock is taken (cron mails any output).
  --ttl MS             Lease duration on the backend. Default 15000 (Azure: 15000-60000).
  --grace MS           Time between SIGTERM and SIGKILL. Default ttl/4, at most 5000;
                       must leave the lease some margin: grace + min(250, ttl/10) < ttl/2.
  --retry-delay MS     Longest pause between attempts while waiting. Default 1000.
  --owner S            The identity "status" shows. Default <hostname>:<pid>.
  --children wait|kill What to do with processes the command leaves in its group when it
                       exits: keep the lock until they end (wait, the default, as flock(1)
                       does), or stop them (SIGTERM, SIGKILL after --grace ms) and release.

${COMMON}

Exit status: the command's status (128+n when killed by signal n); 2 usage or configuration
error; 69 backend failure; 75 lock taken or --timeout passed; 76 lease lost while the command
ran; 126 command not executable; 127 command not found.
`,
  lead: `leasehold lead --name N [options] -- command [args...]

Active/passive: campaigns for leadership of the lock and runs the command while this process
leads. Every host runs the same "leasehold lead"; one runs the command, the others wait.

  - Leadership lost: the command's process group gets SIGTERM, then SIGKILL after --grace ms,
    before the lock can expire on the backend; leasehold campaigns again and starts the
    command again when it leads again.
  - The command exits on its own (any status): once the processes it left in its group have
    ended too (or were stopped, with --children kill), the term ends, the lock is released, and
    after about --retry-delay ms leasehold campaigns again, so another waiting host may take over.
  - leasehold killed or frozen: a watchdog process beside the command stops it before the lock
    can expire on the backend.
  - SIGINT, SIGTERM or SIGHUP: stops the command (SIGTERM, then SIGKILL after --grace ms),
    releases the lock so a follower leads within about --retry-delay ms, and exits 0.

The command gets LEASEHOLD_NAME, LEASEHOLD_OWNER and LEASEHOLD_TOKEN (this term's fencing
token) in its environment.

Options:
  --ttl MS             Lease duration on the backend; a crashed leader is replaced within
                       ttl + retry delay. Default 15000 (Azure: 15000-60000).
  --grace MS           Time between SIGTERM and SIGKILL. Default ttl/4, at most 5000;
                       grace + min(250, ttl/10) must be < ttl/2.
  --retry-delay MS     Longest pause between campaign attempts. Default 1000.
  --owner S            The identity "status" shows. Default <hostname>:<pid>.
  --children wait|kill Processes the command leaves in its group when it exits: lead until
                       they end (wait, the default), or stop them (kill).

Backend failures while campaigning are reported, at most one line every 10 s.

${COMMON}

Exit status: 0 after SIGINT/SIGTERM/SIGHUP; 2 usage or configuration error (also when the backend
refuses the credentials while campaigning); 69 the backend failed permanently.
`,
  status: `leasehold status --name N [--json]

Prints who holds the lock: '"N" is held by OWNER (token T, ttl left MS ms)' or '"N" is free'.
With --json: {"name":N,"holder":{"owner":S,"token":T,"ttlLeft":MS}} or {"name":N,"holder":null}
(ttlLeft only when the backend reports it). Advisory: the holder may change right after.

Options:
  --json               Machine-readable output.

${COMMON}

Exit status: 0 held or free; 2 usage or configuration error; 69 backend failure.
`,
};

/** A usage or configuration problem: printed, exit 2. */
class UsageError extends Error {}

/** Values that must never be printed: tokens, keys, connection strings. */
const secrets: string[] = [];

const redact = (text: string): string => redactWith(text, secrets);

// A reader that went away (`2>&1 | logger` after logger exited) must never end supervision: a
// failed write is dropped, never thrown, and the stream's error event is handled.
process.stderr.on("error", () => {});
process.stdout.on("error", () => {});

function write(stream: NodeJS.WriteStream, text: string): void {
  try {
    stream.write(text);
  } catch {
    // The reader is gone; the message is lost, the supervision goes on.
  }
}

function say(message: string): void {
  write(process.stderr, `leasehold: ${redact(message)}\n`);
}

/**
 * Reports a failure that is being retried: the first at once, then at most one line every 10 s
 * with the number of failures since the last line, so a long outage neither floods nor hides.
 */
function retryReporter(what: string): (error: unknown) => void {
  let last = Number.NEGATIVE_INFINITY;
  let count = 0;
  return (error) => {
    count++;
    if (performance.now() - last < 10_000) return;
    last = performance.now();
    say(
      `${what}: ${messageOf(error)}${count > 1 ? ` (${count} failures since the last report)` : ""}; retrying`,
    );
    count = 0;
  };
}

/** The message, with its causes' messages (already free of secrets; redacted again by {@link say}). */
function messageOf(error: unknown): string {
  let text = error instanceof Error ? error.message : String(error);
  for (let e = error, depth = 0; e instanceof Error && e.cause instanceof Error && depth < 3; depth++) {
    e = e.cause;
    if (e instanceof Error && !text.includes(e.message)) text += ` (${e.message})`;
  }
  return text.replace(/^\[leasehold\] /, "");
}

interface Options {
  command: "exec" | "lead" | "status";
  name: string;
  backend?: string;
  container?: string;
  createContainer: boolean;
  ttl: number;
  grace?: number;
  retryDelay: number;
  owner: string;
  wait: boolean;
  timeout?: number;
  quiet: boolean;
  json: boolean;
  /** What happens to processes the command leaves in its group when it exits: wait for them, or stop them. */
  children: "wait" | "kill";
  argv: string[];
}

const FLAGS = {
  "--name": { value: true, in: ["exec", "lead", "status"] },
  "--backend": { value: true, in: ["exec", "lead", "status"] },
  "--container": { value: true, in: ["exec", "lead", "status"] },
  "--create-container": { value: false, in: ["exec", "lead", "status"] },
  "--ttl": { value: true, in: ["exec", "lead"] },
  "--grace": { value: true, in: ["exec", "lead"] },
  "--retry-delay": { value: true, in: ["exec", "lead"] },
  "--owner": { value: true, in: ["exec", "lead"] },
  "--children": { value: true, in: ["exec", "lead"] },
  "--wait": { value: false, in: ["exec"] },
  "--timeout": { value: true, in: ["exec"] },
  "--quiet": { value: false, in: ["exec"] },
  "--json": { value: false, in: ["status"] },
} as const satisfies Record<string, { value: boolean; in: readonly string[] }>;

function ms(flag: string, text: string): number {
  if (!/^\d+$/.test(text))
    throw new UsageError(`${flag} must be a whole number of ms, got ${JSON.stringify(text)}`);
  return Number(text);
}

/**
 * Options come first, then the command: parsing stops at `--` or at the first argument that is
 * not an option, as with env(1) and timeout(1), so the command's own flags stay its own.
 */
function parse(args: readonly string[]): Options | { help: string } {
  const [command, ...rest] = args;
  if (command === undefined || command === "-h" || command === "--help" || command === "help") {
    return { help: HELP.main! };
  }
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
    if (arg === "-h" || arg === "--help") return { help: HELP[command]! };
    if (!arg.startsWith("-")) break;
    const eq = arg.indexOf("=");
    const flag = arg === "-q" ? "--quiet" : eq > 0 ? arg.slice(0, eq) : arg;
    const spec = (FLAGS as Record<string, { value: boolean; in: readonly string[] }>)[flag];
    if (!spec) throw new UsageError(`unknown option ${flag} for "${command}"`);
    if (!spec.in.includes(command)) throw new UsageError(`${flag} is not an option of "${command}"`);
    if (spec.value) {
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
    ttl: num("--ttl") ?? 15_000,
    retryDelay: num("--retry-delay") ?? 1_000,
    owner: str("--owner") ?? `${hostname()}:${process.pid}`,
    wait: values.has("--wait") || timeout !== undefined,
    quiet: values.has("--quiet"),
    json: values.has("--json"),
    children,
    argv,
  };
  for (const [key, flag] of [
    ["backend", "--backend"],
    ["container", "--container"],
  ] as const) {
    const v = str(flag);
    if (v !== undefined) options[key] = v;
  }
  if (timeout !== undefined) options.timeout = timeout;
  if (grace !== undefined) options.grace = grace;
  return options;
}

/** The backend the environment and flags describe; a UsageError names what is missing. */
function backendFrom(o: Options, env: Record<string, string | undefined>): Backend {
  const set = (name: string) => (env[name] ?? "") !== "";
  const upstashSet = [ENV.upstashUrl, ENV.upstashToken, "KV_REST_API_URL", "KV_REST_API_TOKEN"].some(set);
  const kind = o.backend ?? (upstashSet ? "upstash" : set(ENV.azure) ? "azure-blob" : undefined);
  if (kind === undefined) {
    throw new UsageError(
      `no backend configured: set ${ENV.upstashUrl} and ${ENV.upstashToken}, or ${ENV.azure} and --container (or ${ENV.container})`,
    );
  }
  if (kind === "upstash") {
    const missing = [ENV.upstashUrl, ENV.upstashToken].filter(
      (v, n) => !set(v) && !set(n === 0 ? "KV_REST_API_URL" : "KV_REST_API_TOKEN"),
    );
    if (missing.length > 0)
      throw new UsageError(`the upstash backend needs ${missing.join(" and ")} (not set)`);
    for (const v of [ENV.upstashToken, "KV_REST_API_TOKEN"]) if (set(v)) secrets.push(env[v]!);
    for (const v of [ENV.upstashUrl, "KV_REST_API_URL"]) {
      try {
        if (set(v)) secrets.push(decodeURIComponent(new URL(env[v]!).password));
      } catch {}
    }
    try {
      return fromEnv(env);
    } catch (error) {
      throw new UsageError(`${ENV.upstashUrl} / ${ENV.upstashToken}: ${messageOf(error)}`);
    }
  }
  if (kind === "azure-blob") {
    const container = o.container ?? env[ENV.container];
    const missing = [
      ...(set(ENV.azure) ? [] : [ENV.azure]),
      ...(container ? [] : [`--container (or ${ENV.container})`]),
    ];
    if (missing.length > 0) throw new UsageError(`the azure-blob backend needs ${missing.join(" and ")}`);
    const connectionString = env[ENV.azure]!;
    secrets.push(connectionString);
    for (const part of connectionString.split(";")) {
      const eq = part.indexOf("=");
      if (/^(AccountKey|SharedAccessSignature)$/i.test(part.slice(0, eq).trim())) {
        const value = part.slice(eq + 1).trim();
        secrets.push(value, encodeURIComponent(value));
        const sig = /(?:^|&)sig=([^&]+)/.exec(value)?.[1];
        if (sig) secrets.push(sig, decodeURIComponent(sig));
      }
    }
    try {
      return azureBlob({ connectionString, container: container!, createContainer: o.createContainer });
    } catch (error) {
      throw new UsageError(`${ENV.azure} / --container: ${messageOf(error)}`);
    }
  }
  throw new UsageError(`--backend must be upstash or azure-blob, got ${JSON.stringify(kind)}`);
}

/** Milliseconds between SIGKILL and the lock's earliest expiry, for the kill to land. */
const killSlack = (ttl: number) => Math.min(250, Math.floor(ttl / 10));

/** A command run under the watchdog (see cli/watchdog.ts), in its own process group. */
interface Command {
  /** The command's own exit status: 128+n for signal n, 126/127 when it could not start. */
  exited: Promise<number>;
  /** Resolves once no process of the command's group is left. */
  gone: Promise<void>;
  /** Whether processes of the command's group are still running. */
  running(): boolean;
  /** Sends a signal to the command's whole process group. */
  kill(signal: NodeJS.Signals): void;
  /** SIGTERM to the group, SIGKILL after the grace period; resolves once the group is gone. */
  stop(): Promise<void>;
  /** Whether the stop needed SIGKILL. */
  readonly killed: boolean;
}

/**
 * Starts `argv` under a watchdog process that holds `lease`'s deadline: heartbeats from here move
 * it forward while the lease is valid; if they stop (this process killed or frozen) or the IPC
 * channel closes, the watchdog stops the command's group before the lease can expire on the
 * backend. This process also signals the group itself, so a frozen watchdog cannot keep a
 * command alive either.
 */
function supervise(argv: string[], lease: Lease, grace: number, beat: number): Command {
  let pgid: number | undefined;
  let killed = false;
  let stopping: Promise<void> | undefined;
  let settleExit: (status: number) => void = () => {};
  let settleGone: () => void = () => {};
  const exited = new Promise<number>((resolve) => (settleExit = resolve));
  const gone = new Promise<void>((resolve) => (settleGone = resolve));
  const [program, args] = watchdogCommand();
  const watchdog = spawn(program, args, {
    stdio: ["inherit", "inherit", "inherit", "ipc"],
    env: childEnv(lease),
  });
  watchdog.on("error", () => {});
  const send = (message: ToWatchdog): void => {
    try {
      if (watchdog.connected) watchdog.send(message);
    } catch {
      // The watchdog is gone; its exit handler below takes over.
    }
  };
  const heartbeat = (): void => {
    if (lease.valid) send({ t: "deadline", deadline: lease.expiresAt - Date.now() });
  };
  const beats = setInterval(heartbeat, beat);
  /** Polls until the group has no live process left (the watchdog may be frozen and not tell). */
  const untilGone = async (): Promise<void> => {
    while (pgid !== undefined && groupAlive(pgid)) await sleep(GROUP_POLL);
  };
  const done = (): void => {
    clearInterval(beats);
    settleGone();
    if (watchdog.exitCode === null && watchdog.signalCode === null) watchdog.kill("SIGKILL");
  };
  watchdog.on("message", (raw: unknown) => {
    const m = raw as FromWatchdog;
    if (m.t === "started") pgid = m.pid;
    else if (m.t === "exit") {
      if (m.error) say(`cannot run ${JSON.stringify(argv[0])}: ${m.error}`);
      settleExit(m.status);
    } else if (m.t === "empty") done();
    else if (m.t === "killed") killed = true;
    else if (m.t === "stopping" && m.why !== "leasehold asked")
      say(`the watchdog is stopping the command: ${m.why}`);
  });
  watchdog.once("exit", () => {
    // Normal after "empty". Otherwise the watchdog died: nothing guards the command but us.
    if (pgid === undefined) {
      say("the watchdog could not start the command");
      settleExit(126);
      done();
      return;
    }
    if (groupAlive(pgid)) {
      say("the watchdog died: stopping the command");
      killed = true;
      killGroup(pgid, "SIGKILL");
    }
    untilGone().then(() => {
      settleExit(signalStatus("SIGKILL"));
      done();
    });
  });
  send({ t: "start", argv, grace, deadline: lease.expiresAt - Date.now() });
  return {
    exited,
    gone,
    running: () => pgid !== undefined && groupAlive(pgid),
    kill(signal) {
      send({ t: "signal", signal });
      if (pgid !== undefined) killGroup(pgid, signal);
    },
    stop() {
      stopping ??= (async () => {
        send({ t: "stop" });
        if (pgid !== undefined) killGroup(pgid, "SIGTERM");
        const waited = await Promise.race([gone.then(() => true), sleep(grace).then(() => false)]);
        if (!waited && pgid !== undefined && groupAlive(pgid)) {
          killed = true;
          killGroup(pgid, "SIGKILL");
        }
        await Promise.race([gone, untilGone()]);
        done();
      })();
      return stopping;
    },
    get killed() {
      return killed;
    },
  };
}

/** Stops the command and describes its status, when the watchdog could tell it: ` (status N)`. */
async function statusOf(command: Command): Promise<string> {
  await command.stop();
  const status = await Promise.race([command.exited, sleep(1_000).then(() => undefined)]);
  return status === undefined ? "" : ` (status ${status})`;
}

/** Calls `handler` for SIGINT, SIGTERM and SIGHUP until the returned function is called. */
function onSignals(handler: (signal: Forwarded) => void): () => void {
  const listeners = FORWARDED.map((s) => [s, () => handler(s)] as const);
  for (const [s, l] of listeners) process.on(s, l);
  return () => {
    for (const [s, l] of listeners) process.off(s, l);
  };
}

function childEnv(lease: Lease): Record<string, string | undefined> {
  return {
    ...process.env,
    LEASEHOLD_NAME: lease.name,
    LEASEHOLD_OWNER: lease.owner,
    LEASEHOLD_TOKEN: String(lease.token),
  };
}

function mutexFor(o: Options, backend: Backend) {
  const slack = killSlack(o.ttl);
  const grace = o.grace ?? Math.min(5_000, Math.floor(o.ttl / 4));
  if (o.grace !== undefined && grace + slack >= o.ttl / 2) {
    throw new UsageError(
      `--grace must be less than ttl/2 - ${slack} = ${o.ttl / 2 - slack} ms with --ttl ${o.ttl}: the command must be stopped before the lock can expire`,
    );
  }
  try {
    // The signal aborts grace + slack before the lock could expire on the backend: time for a
    // SIGTERM, the grace period and a SIGKILL before anyone else can take the lock.
    const mutex = createMutex(backend, {
      name: o.name,
      ttl: o.ttl,
      owner: o.owner,
      retryDelay: o.retryDelay,
      stopMargin: grace + slack,
    });
    // Heartbeats to the watchdog: often enough that a renewal reaches it long before the deadline
    // it holds (renewals come every ttl/3; the deadline is about ttl away).
    const beat = Math.max(20, Math.min(1_000, Math.floor(o.ttl / 10)));
    return { mutex, grace, beat };
  } catch (error) {
    const text = messageOf(error).replace(/^createMutex: /, "");
    throw new UsageError(
      text.replace(/^(ttl|name|owner|retryDelay)\b/, (f) => `--${f.replace("retryDelay", "retry-delay")}`),
    );
  }
}

/** Whether an error means the backend failed (rather than the lock being taken). */
function backendFailed(error: unknown): boolean {
  return isLockError(error) && (error.code === "ERR_BACKEND" || error.code === "ERR_BACKEND_AUTH");
}

async function exec(o: Options, backend: Backend): Promise<number> {
  const { mutex, grace, beat } = mutexFor(o, backend);
  let received: Forwarded | undefined;
  let command: Command | undefined;
  const waiting = new AbortController();
  let escalation: ReturnType<typeof setTimeout> | undefined;
  const off = onSignals((signal) => {
    received ??= signal;
    if (!command) return waiting.abort();
    command.kill(signal);
    escalation ??= setTimeout(() => command?.kill("SIGKILL"), grace);
  });
  try {
    let lease: Lease | null;
    try {
      lease = o.wait
        ? await mutex.acquire({
            signal: waiting.signal,
            onError: retryReporter(`waiting for "${o.name}": the backend failed`),
            ...(o.timeout === undefined ? {} : { timeout: o.timeout }),
          })
        : await mutex.tryAcquire({ signal: waiting.signal });
    } catch (error) {
      if (received) return signalStatus(received);
      if (isLockError(error) && error.code === "ERR_LOCK_TIMEOUT") {
        // The wait ended while the backend was failing or silent: that is not "taken".
        if (backendFailed(error.cause)) {
          say(`could not reach the backend within ${o.timeout} ms: ${messageOf(error.cause)}`);
          return EXIT.unavailable;
        }
        if (!o.quiet) say(`"${o.name}" is still taken after ${o.timeout} ms; not running the command`);
        return EXIT.taken;
      }
      throw error;
    }
    if (!lease) {
      if (o.quiet) return EXIT.taken;
      const holder = await mutex.holder().catch(() => null);
      say(
        `"${o.name}" is taken${holder ? ` by ${holder.owner} (token ${holder.token})` : ""}; not running the command`,
      );
      return EXIT.taken;
    }
    if (received) {
      await lease.release().catch(() => {});
      return signalStatus(received);
    }
    const running = supervise(o.argv, lease, grace, beat);
    command = running;
    const lost = aborted(lease.signal).then(() => undefined);
    const status = await Promise.race([running.exited, lost]);
    if (status !== undefined) {
      if (o.children === "kill") running.stop();
      else if (running.running()) {
        say(`the command exited (status ${status}); keeping the lock until the processes it left have ended`);
      }
      const end = await Promise.race([running.gone.then(() => true), lost.then(() => false)]);
      if (end) {
        await lease
          .release()
          .catch((error: unknown) => say(`could not release "${o.name}": ${messageOf(error)}`));
        return status;
      }
    }
    say(
      `lost the lock "${o.name}" (token ${lease.token}) while the command ran: ${messageOf(lease.signal.reason)}`,
    );
    say("stopping the command: SIGTERM" + (grace > 0 ? `, SIGKILL after ${grace} ms` : ""));
    const stopped = await statusOf(running);
    say(`the command was stopped${running.killed ? " with SIGKILL" : ""}${stopped}; exiting ${EXIT.lost}`);
    await lease.release().catch(() => {});
    return EXIT.lost;
  } finally {
    off();
    clearTimeout(escalation);
  }
}

/** The command of a `lead` term ended on its own. */
class CommandExited extends Error {
  constructor(readonly status: number) {
    super(`the command exited with status ${status}`);
  }
}

async function lead(o: Options, backend: Backend): Promise<number> {
  const { mutex, grace, beat } = mutexFor(o, backend);
  const stop = new AbortController();
  let status = 0;
  const off = onSignals((signal) => {
    if (!stop.signal.aborted) say(`${signal}: stopping`);
    stop.abort();
  });
  const retrying = retryReporter(`campaigning for "${o.name}": the backend failed`);
  try {
    await mutex.lead(
      async (signal, lease) => {
        say(`leading "${o.name}" (token ${lease.token}): starting the command`);
        const command = supervise(o.argv, lease, grace, beat);
        const stopped = aborted(signal).then(() => undefined);
        const ended = await Promise.race([command.exited, stopped]);
        if (ended !== undefined) {
          if (o.children === "kill") command.stop();
          else if (command.running()) {
            say(`the command exited (status ${ended}); leading until the processes it left have ended`);
          }
          if (await Promise.race([command.gone.then(() => true), stopped.then(() => false)])) {
            throw new CommandExited(ended);
          }
        }
        if (!stop.signal.aborted) say(`lost leadership of "${o.name}": ${messageOf(signal.reason)}`);
        const described = await statusOf(command);
        say(`the command was stopped${command.killed ? " with SIGKILL" : ""}${described}`);
      },
      {
        signal: stop.signal,
        // Keep the lease (it still renews) until the command is gone, so no follower starts early.
        stopTimeout: grace + 1_000,
        onError(error) {
          if (error instanceof CommandExited) {
            say(`${error.message}; leadership released, campaigning again in about ${o.retryDelay} ms`);
          } else if (isLockError(error) && "retryable" in error && error.retryable === false) {
            // Refused credentials, a missing container: waiting will not fix it.
            say(messageOf(error));
            status = error.code === "ERR_BACKEND_AUTH" ? EXIT.usage : EXIT.unavailable;
            stop.abort();
          } else if (backendFailed(error)) {
            retrying(error);
          } else {
            say(messageOf(error));
          }
        },
      },
    );
    return status;
  } finally {
    off();
  }
}

async function status(o: Options, backend: Backend): Promise<number> {
  try {
    createMutex(backend, { name: o.name });
  } catch (error) {
    throw new UsageError(messageOf(error).replace(/^createMutex: name/, "--name"));
  }
  const info = await backend.inspect(o.name, AbortSignal.timeout(30_000));
  if (o.json) {
    const holder = info ? { owner: info.owner, token: info.token, ttlLeft: info.ttlLeft } : null;
    write(process.stdout, `${JSON.stringify({ name: o.name, holder })}\n`);
  } else if (info) {
    const left = info.ttlLeft === undefined ? "" : `, ttl left ${info.ttlLeft} ms`;
    write(process.stdout, `"${o.name}" is held by ${info.owner} (token ${info.token}${left})\n`);
  } else {
    write(process.stdout, `"${o.name}" is free\n`);
  }
  return 0;
}

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
    const backend = backendFrom(o, env);
    return await (o.command === "exec" ? exec : o.command === "lead" ? lead : status)(o, backend);
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
      return error.code === "ERR_BACKEND_AUTH" ? EXIT.usage : EXIT.unavailable;
    }
    return EXIT.internal;
  }
}

main(process.argv.slice(2), process.env).then(
  (code) => process.exit(code),
  (error: unknown) => {
    say(`internal error: ${messageOf(error)}`);
    process.exit(EXIT.internal);
  },
);
