// The command line's one table of options and exit statuses, and the help text built from it.

/** The commands. */
export type CommandName = "exec" | "lead" | "status";
const ALL: readonly CommandName[] = ["exec", "lead", "status"];
const RUNS: readonly CommandName[] = ["exec", "lead"];

/** The backends the command line reaches. */
export const BACKENDS = ["redis", "postgres", "upstash", "azure-blob", "dynamodb", "cloudflare"] as const;
export type BackendName = (typeof BACKENDS)[number];

/** Exit statuses (sysexits.h where one fits). */
export const EXIT = {
  /** A failure nobody planned for (a bug): the message says what. */
  internal: 1,
  /** Usage or configuration error, including credentials the backend refused. */
  usage: 2,
  /** The backend failed or could not be reached. */
  unavailable: 69,
  /** exec: the lock is taken (without --wait), or --timeout passed while waiting; --once: the fire runs elsewhere. */
  taken: 75,
  /** exec: the lease was lost while the command ran; the command was stopped. */
  lost: 76,
  /** The command was found but could not be run. */
  cannotRun: 126,
  /** The command was not found. */
  notFound: 127,
} as const;

/**
 * What each exit status means, per command: the one table `--help` prints, and that the tables of
 * docs/cli.md and README.md must match row for row (test/cli/help.test.ts compares them).
 */
export const STATUSES: readonly (readonly [
  status: string,
  commands: readonly CommandName[],
  meaning: string,
])[] = [
  ["0-255", ["exec"], "the command's own status (128+n when it was killed by signal n)"],
  [
    "0",
    ["exec"],
    "with --once, the fire is already done, here or elsewhere, within --retain; the command did not run (stderr says who ran it, unless --quiet)",
  ],
  ["0", ["lead"], "stopped by SIGINT, SIGTERM or SIGHUP"],
  ["0", ["status"], "held or free (with --limit: the permits held, none or some)"],
  [`${EXIT.internal}`, ALL, "an internal error (a bug): the message says what; please report it"],
  [
    `${EXIT.usage}`,
    ALL,
    "usage or configuration error (no command, missing variables, bad option, credentials refused, a missing Azure container or lock table)",
  ],
  [
    `${EXIT.unavailable}`,
    ALL,
    "the backend failed, could not be reached or did not answer in time (status: within max(ttl/5, 1 s), 3 s; exec: also when a wait ended so; with --once, also when recording a fire failed after the command exited 0: it may run again)",
  ],
  [
    `${EXIT.taken}`,
    ["exec"],
    "the lock is taken (without --wait), or --timeout passed; with --once, the fire runs elsewhere (without --standby)",
  ],
  [
    `${EXIT.lost}`,
    ["exec"],
    "the lease was lost while the command ran; the command was stopped (with --once, also: it exited 0 but the lease was lost before the fire was recorded as done, so it may run again)",
  ],
  [`${EXIT.cannotRun}`, RUNS, "the command could not be run"],
  [`${EXIT.notFound}`, RUNS, "the command was not found"],
];

/** One option: its value's name (none for a switch), the commands that take it, its help and default. */
export interface Flag {
  arg?: string;
  alias?: string;
  in: readonly CommandName[];
  help: string;
  default?: string;
}

/** Every option of every command. */
export const FLAGS: Readonly<Record<string, Flag>> = {
  "--name": { arg: "N", in: ALL, help: "The lock name (required): 1-255 letters, digits, - _ . : / @ +." },
  "--backend": {
    arg: "B",
    in: ALL,
    help: `The backend: ${BACKENDS.join(", ")}. Needed when the environment configures more than one.`,
    default: "the one the environment configures",
  },
  "--verbose": { in: ALL, help: "Print which backend is used (never a secret) to stderr." },
  "--table": {
    arg: "T",
    in: ALL,
    help: "DynamoDB: the lock table (partition key pk, String). PostgreSQL: the lock table.",
    default: "$LEASEHOLD_DYNAMODB_TABLE; PostgreSQL $LEASEHOLD_POSTGRES_TABLE, else leasehold_locks",
  },
  "--create-table": {
    in: ALL,
    help: "PostgreSQL, DynamoDB: create the lock table when it is missing (needs the right to).",
  },
  "--container": {
    arg: "C",
    in: ALL,
    help: "Azure container holding the lock blobs.",
    default: "$LEASEHOLD_AZURE_CONTAINER",
  },
  "--create-container": { in: ALL, help: "Create the Azure container when it is missing." },
  "--limit": {
    arg: "N",
    in: ["exec", "status"],
    help: "A semaphore of N permits named --name (1-1000). exec: at most N copies of the command at once across hosts; LEASEHOLD_SLOT tells the command which permit it holds; every copy must give the same N (a larger one lets more run). status: the permits held and by whom.",
  },
  "--shared": {
    in: ["exec"],
    help: 'Take the lock in shared mode: any number of "exec --shared" of the name run at once, never beside an exclusive exec (or lease) of it; an exclusive exec that waits keeps new shared ones out. Needs a backend that takes shared mode (not azure-blob, dynamodb).',
  },
  "--wait": { in: ["exec"], help: "Wait until the lock is free instead of exiting 75." },
  "--timeout": {
    arg: "MS",
    in: ["exec"],
    help: "Wait at most MS ms (implies --wait; with --once, bounds --standby's wait), then exit 75 (69 when the backend was failing); 0 makes one attempt.",
  },
  "--quiet": {
    alias: "-q",
    in: ["exec"],
    help: "Print nothing when the lock is taken, or with --once when the fire is done or runs elsewhere (cron mails any output).",
  },
  "--once": {
    in: ["exec"],
    help: "Run the command once per fire across hosts: the first to take the fire runs it; when it exits 0 the fire is recorded as done for --retain ms, and every later call of that fire exits 0 without running it. A non-zero exit leaves the fire to run again. Needs --fire or --every.",
  },
  "--fire": {
    arg: "ID",
    in: ["exec"],
    help: "With --once: the fire, as every host names it; a string taken as given: a date (2026-11-24), a scheduler's fire time (\"$SCHEDULED_TIME\"; epoch ms names the same fire as runOnce's number), an idempotency key. 1-128 characters, no control characters.",
  },
  "--every": {
    arg: "MS",
    in: ["exec"],
    help: "With --once: the fire is the tick of this period nearest to now (epoch ms rounded to a multiple of MS), for a scheduler that gives no fire time; every host must start within MS/2 of the tick. 1 ms to 365 days.",
  },
  "--standby": {
    in: ["exec"],
    help: "With --once: when the fire runs elsewhere, wait until it is done (exit 0) or its runner's lease is lost (then run it here, with a greater token) instead of exiting 75.",
  },
  "--retain": {
    arg: "MS",
    in: ["exec"],
    help: "With --once: how long the record of a completed fire lasts (1-2147483647); keep it longer than the spread of the hosts' fires.",
    default: "86400000 (24 h)",
  },
  "--ttl": {
    arg: "MS",
    in: RUNS,
    help: "Lease duration on the backend (Azure: 15000-60000); a crashed leader is replaced within ttl + retry delay.",
    default: "15000",
  },
  "--grace": {
    arg: "MS",
    in: RUNS,
    help: "Time between SIGTERM and SIGKILL; grace + min(250, ttl/10) must be < ttl/2, so the command is gone before the lock can expire.",
    default: "ttl/4, at most 5000",
  },
  "--retry-delay": {
    arg: "MS",
    in: RUNS,
    help: "Longest pause between attempts while waiting or campaigning.",
    default: "1000",
  },
  "--owner": {
    arg: "S",
    in: RUNS,
    help: 'The identity "status" shows: 1-256 characters, no control characters.',
    default: "<hostname>:<pid>",
  },
  "--restart-delay": {
    arg: "MS",
    in: ["lead"],
    help: "The pause before campaigning again after the command exited on its own; it doubles with each exit in a row, up to 60 times MS, and starts over after a run that lasted that long (jittered by up to 25 %).",
    default: "1000 (so at most 60 s)",
  },
  "--children": {
    arg: "wait|kill",
    in: RUNS,
    help: "Processes the command leaves in its group when it exits: keep the lock until they end (wait, as flock(1) does), or stop them (SIGTERM, SIGKILL after --grace) and release (kill).",
    default: "wait",
  },
  "--json": { in: ["status"], help: "Machine-readable output." },
};

/** The variables the backend is read from. */
export const ENV = {
  upstashUrl: "UPSTASH_REDIS_REST_URL",
  upstashToken: "UPSTASH_REDIS_REST_TOKEN",
  azure: "AZURE_STORAGE_CONNECTION_STRING",
  container: "LEASEHOLD_AZURE_CONTAINER",
  redis: "REDIS_URL",
  postgres: "DATABASE_URL",
  postgresTable: "LEASEHOLD_POSTGRES_TABLE",
  dynamodbTable: "LEASEHOLD_DYNAMODB_TABLE",
  /** The Durable Object route's URL and bearer secret (not LEASEHOLD_TOKEN: exec gives the command that name for its fencing token). */
  doUrl: "LEASEHOLD_DO_URL",
  doSecret: "LEASEHOLD_DO_SECRET",
} as const;

/** Words wrapped to `width` columns, every line after the first indented by `indent`. */
function wrap(text: string, indent: number, width = 96): string {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line !== "" && indent + line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === "" ? word : `${line} ${word}`;
  }
  lines.push(line);
  return lines.join(`\n${" ".repeat(indent)}`);
}

function options(names: readonly string[]): string {
  return names
    .map((name) => {
      const f = FLAGS[name]!;
      const label = `${f.alias ? `${f.alias}, ` : ""}${name}${f.arg ? ` ${f.arg}` : ""}`;
      const help = f.default ? `${f.help} Default ${f.default}.` : f.help;
      return `  ${label.padEnd(24)} ${wrap(help, 27)}`;
    })
    .join("\n");
}

function statuses(command?: CommandName): string {
  return STATUSES.filter(([, cmds]) => command === undefined || cmds.includes(command))
    .map(([status, cmds, meaning]) => {
      const which = command === undefined && cmds.length < ALL.length ? `${cmds.join(", ")}: ` : "";
      return `  ${status.padEnd(7)} ${wrap(which + meaning, 10)}`;
    })
    .join("\n");
}

const COMMON_FLAGS = Object.keys(FLAGS).filter((n) => FLAGS[n]!.in.length === ALL.length);

const COMMON = `Backend (from the environment; exactly one, or choose with --backend):
  ${ENV.redis}
        redis://[user:password@]host[:port][/db], rediss:// for TLS (leasehold's own client).
  ${ENV.postgres}
        postgres://user:password@host:port/db[?sslmode=disable|prefer|require|verify-ca|
        verify-full] (leasehold's own client; also connect_timeout, application_name, and
        require_auth=md5 or password to send those without verified TLS); the table from
        --table or ${ENV.postgresTable}.
  ${ENV.upstashUrl}, ${ENV.upstashToken}
        Upstash Redis REST URL and token (Vercel's KV_REST_API_URL/_TOKEN also work).
  ${ENV.azure}
        An Azure Storage connection string; the container comes from --container or
        ${ENV.container}.
  ${ENV.dynamodbTable} (or --table)
        A DynamoDB table, with AWS_REGION (or AWS_DEFAULT_REGION), AWS_ACCESS_KEY_ID,
        AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_ENDPOINT_URL(_DYNAMODB).
  ${ENV.doUrl}, ${ENV.doSecret}
        A Cloudflare Durable Object: the URL of the route lockHandler serves, and its secret.

Common options:
${options(COMMON_FLAGS)}
  -h, --help               Show help.
  -V, --version            Print leasehold's version.`;

const INTRO: Record<CommandName, string> = {
  exec: `leasehold exec --name N [options] -- command [args...]
leasehold exec --once (--fire ID | --every MS) --name N [options] -- command [args...]

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

With --limit N, up to N copies run at once across hosts (a semaphore: N permits, each an
ordinary lock named N:permit:<slot>); "taken" then means all N permits are held, and the command
also gets LEASEHOLD_SLOT (0 to N-1; the token increases per slot).

With --once (and --fire ID or --every MS) the command runs once per fire across hosts, under a
lease on the fire's own lock (stopped on lease loss as above): when it exits 0 the fire is
recorded as done for --retain ms, and every call of that fire within it exits 0 at once without
running it (stderr says who ran it). A non-zero exit (or a lost lease) records nothing: a
--standby or the next call runs the fire again, and leasehold exits with the command's status.
A fire running elsewhere exits 75, or with --standby is waited for. The command also gets
LEASEHOLD_FIRE (the fire's id; LEASEHOLD_NAME is --name).`,
  lead: `leasehold lead --name N [options] -- command [args...]

Active/passive: campaigns for leadership of the lock and runs the command while this process
leads. Every host runs the same "leasehold lead"; one runs the command, the others wait.

  - Leadership lost: the command's process group gets SIGTERM, then SIGKILL after --grace ms,
    before the lock can expire on the backend; leasehold campaigns again and starts the
    command again when it leads again.
  - The command exits on its own (any status): once the processes it left in its group have
    ended too (or were stopped, with --children kill), the term ends and the lock is released, so
    another waiting host may take over; leasehold campaigns again after --restart-delay ms (said
    on stderr), doubled with each exit in a row up to 60 times that, and back to --restart-delay
    after a run that lasted as long as the cap: a command that keeps crashing is not restarted
    every second forever.
  - leasehold killed or frozen: a watchdog process beside the command stops it before the lock
    can expire on the backend.
  - SIGINT, SIGTERM or SIGHUP: stops the command (SIGTERM, then SIGKILL after --grace ms),
    releases the lock so a follower leads within about --retry-delay ms, and exits 0.

The command gets LEASEHOLD_NAME, LEASEHOLD_OWNER and LEASEHOLD_TOKEN (this term's fencing
token) in its environment.`,
  status: `leasehold status --name N [--limit N] [--json]

Prints who holds the lock, and on which backend: '"N" is held by OWNER (token T, ttl left MS ms)
on BACKEND' or '"N" is free on BACKEND' (BACKEND such as "redis at HOST:PORT, database 0").
With --json: {"name":N,"holder":{"owner":S,"token":T,"ttlLeft":MS},"backend":BACKEND} or
{"name":N,"holder":null,"backend":BACKEND} (ttlLeft only when the backend reports it).
Advisory: the holder may change right after.

With --limit N, the semaphore "exec --limit N" takes: '"N": H of N permits held on BACKEND: slot
S by OWNER (token T, ttl left MS ms), ...'; --json: {"name":N,"limit":N,"held":[{"slot":S,
"owner":O,"token":T,"ttlLeft":MS}],"backend":BACKEND}. Without --limit, a name that is free as a
lock but whose permit 0 is held is said to be used as a semaphore ("usedAsSemaphore":true in
--json); a semaphore whose permit 0 happens to be free is not seen without --limit.

It waits at most 3 s for the backend (max(ttl/5, 1 s) for the default ttl, as holder() does),
then exits 69 naming the backend.`,
};

function commandHelp(command: CommandName): string {
  const own = Object.keys(FLAGS).filter((n) => FLAGS[n]!.in.includes(command) && !COMMON_FLAGS.includes(n));
  return `${INTRO[command]}

Options:
${options(own)}

${COMMON}

Exit status:
${statuses(command)}
`;
}

/** The help of each command, and the main one. */
export const HELP: Record<"main" | CommandName, string> = {
  main: `leasehold: a distributed lock and leader election for scripts and cron.

Usage:
  leasehold exec   --name N [options] -- command [args...]   run a command while holding the lock
  leasehold exec   --once (--fire ID | --every MS) --name N [options] -- command [args...]
                                                             run a command once per fire across hosts
  leasehold lead   --name N [options] -- command [args...]   keep a command running while leading
  leasehold status --name N [--limit N] [--json]             print who holds the lock
  leasehold --version                                        print the version

Run "leasehold <command> --help" for the options of each command.

${COMMON}

Exit status:
${statuses()}
`,
  exec: commandHelp("exec"),
  lead: commandHelp("lead"),
  status: commandHelp("status"),
};
