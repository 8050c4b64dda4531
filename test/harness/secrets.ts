// The secrets check for the whole suite, as a vitest `setupFiles` module (it runs in every test
// file's module graph before the file itself):
//   - src/errors.ts is replaced by subclasses of its own classes that scan every LockError the
//     library constructs (message, stack, cause chain, extra properties) when it is made, and
//     again after the file with any secret registered since;
//   - console.* is patched to scan everything printed (errors with their causes and stacks);
//   - unhandled rejections and uncaught exceptions are scanned too;
//   - afterAll fails the file if any scanned text contains a secret.
// Secrets: the injected ones and the secret environment variables (scripts/backends.mjs names
// them per backend), everything registered through registerSecret() (tests that make up wrong
// tokens, SAS signatures, bearer tokens), and, without
// registration, anything shaped like a SAS signature (`sig=...`), a bearer token, a JWT, an
// `AccountKey=...`. (A SharedKey request signature is not treated as a secret: it authorizes only
// that one request, and a fetch that echoes its headers shows it today.)
// Tests can also call checkNoSecrets(value) on errors the library did not construct itself
// (TypeErrors from option validation).
import { inspect as nodeInspect } from "node:util";
import { afterAll, expect, inject, type ProvidedContext, vi } from "vitest";
import { BACKENDS } from "../../scripts/backends.mjs";

vi.mock("../../src/errors.ts", async (importOriginal) => {
  const original = await importOriginal<typeof import("../../src/errors.ts")>();
  const { record } = await import("./secrets.ts");
  // Each error class of the library, recording every instance it makes. (A mixin's constructor
  // must take any[]: TypeScript requires it.)
  // biome-ignore lint/suspicious/noExplicitAny: see above
  const recorded = <C extends new (...args: any[]) => Error>(Base: C) =>
    class extends Base {
      // biome-ignore lint/suspicious/noExplicitAny: see above
      constructor(...args: any[]) {
        super(...args);
        record(this);
      }
    };
  return {
    ...original,
    LockError: recorded(original.LockError),
    LockTimeoutError: recorded(original.LockTimeoutError),
    LeaseLostError: recorded(original.LeaseLostError),
    BackendError: recorded(original.BackendError),
  };
});

interface Registry {
  secrets: Set<string>;
  /** Texts kept for a second scan at afterAll (secrets registered after they were made). */
  texts: string[];
  leaks: string[];
  counts: { lockErrors: number; console: number; checked: number };
}

const KEEP = 2_000;
const holder = globalThis as { __leaseholdSecrets?: Registry };
holder.__leaseholdSecrets ??= {
  secrets: new Set(),
  texts: [],
  leaks: [],
  counts: { lockErrors: 0, console: 0, checked: 0 },
};
const registry: Registry = holder.__leaseholdSecrets;

/** Secret shapes caught without registration; a redacted value (`[redacted]`) does not match. */
const SHAPES: [string, RegExp][] = [
  ["a SAS signature", /[?&\s"']sig=(?!\[redacted\])[A-Za-z0-9%+/]{16,}/],
  ["a bearer token", /\bBearer\s+(?!\[redacted\])[A-Za-z0-9._~+/-]{12,}=*/],
  ["a JWT", /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\./],
  ["an AccountKey", /AccountKey=(?!\[redacted\])[A-Za-z0-9+/]{16,}/],
];

/** Adds a string that must never appear in an error, its cause, its stack or console output. */
export function registerSecret(secret: string): void {
  if (secret.length < 6)
    throw new Error(`registerSecret: ${secret.length} characters is too short to search for`);
  registry.secrets.add(secret);
  registry.secrets.add(encodeURIComponent(secret));
  // As a message that quotes a reply with JSON.stringify shows it (`"` → `\"`, `\` → `\\`).
  registry.secrets.add(JSON.stringify(secret).slice(1, -1));
}

/** Everything an error shows: name, message, stack, cause chain and own properties. */
export function textOf(value: unknown, depth = 0): string {
  if (depth > 8) return "";
  if (value instanceof Error) {
    let out = `${value.name}: ${value.message}\n${value.stack ?? ""}\n`;
    out += nodeInspect(value, { depth: 8, breakLength: Number.POSITIVE_INFINITY });
    if (value.cause !== undefined) out += `\ncause: ${textOf(value.cause, depth + 1)}`;
    if (value instanceof AggregateError) for (const e of value.errors) out += `\n${textOf(e, depth + 1)}`;
    return out;
  }
  if (typeof value === "string") return value;
  return nodeInspect(value, { depth: 8, breakLength: Number.POSITIVE_INFINITY });
}

/** The leaks in `text`: which registered secret or secret shape it contains. */
export function findSecrets(text: string): string[] {
  const found: string[] = [];
  for (const s of registry.secrets)
    if (s.length >= 6 && text.includes(s)) found.push(`registered secret ${s.slice(0, 4)}…`);
  for (const [label, re] of SHAPES) {
    const m = re.exec(text);
    if (m) found.push(`${label}: ${m[0].slice(0, 24)}…`);
  }
  return found;
}

function scan(where: string, text: string): void {
  registry.counts.checked++;
  const found = findSecrets(text);
  if (found.length > 0)
    registry.leaks.push(`${where}: ${found.join(", ")} in ${JSON.stringify(text.slice(0, 300))}`);
  registry.texts.push(text);
  if (registry.texts.length > KEEP) registry.texts.splice(0, registry.texts.length - KEEP);
}

/** Called by the mocked src/errors.ts for every LockError the library constructs. @internal */
export function record(error: Error): void {
  registry.counts.lockErrors++;
  // The stack is read later too (afterAll), in case someone rewrites it; read it now as well.
  scan(`${error.name} constructed`, textOf(error));
  const keep = error;
  queueMicrotask(() => scan(`${keep.name} (after construction)`, `${keep.message}\n${keep.stack}`));
}

/** Fails the current test if `value` (an error, a string, anything) shows a secret. */
export function checkNoSecrets(value: unknown, label = "value"): void {
  const text = textOf(value);
  registry.counts.checked++;
  expect(findSecrets(text), `${label}: ${text.slice(0, 300)}`).toEqual([]);
}

/** What the check has seen so far in this worker. */
export function secretStats(): Readonly<Registry["counts"]> & { secrets: number; leaks: number } {
  return { ...registry.counts, secrets: registry.secrets.size, leaks: registry.leaks.length };
}

// The injected credentials (absent when a project runs without the global setups): the secret
// fields of what each backend's server provides, as the table of backends names them.
for (const row of BACKENDS) {
  if (row.server === null) continue;
  let ctx: unknown;
  try {
    ctx = inject(row.server as keyof ProvidedContext);
  } catch {
    continue; // not provided
  }
  for (const field of row.secrets) {
    const value = field
      .split(".")
      .reduce<unknown>((v, k) => (v as Record<string, unknown> | undefined)?.[k], ctx);
    if (typeof value === "string" && value !== "") registerSecret(value);
  }
}
// And the secret environment variables a backend reads, when this process has them.
for (const name of new Set(BACKENDS.flatMap((row) => row.env))) {
  const value = process.env[name];
  if (value !== undefined && value.length >= 6) registerSecret(value);
}

// console.*: scan what is printed, print it unchanged.
const patched = Symbol.for("leasehold.secrets.console");
const con = console as unknown as Record<string | symbol, unknown>;
if (!con[patched]) {
  con[patched] = true;
  for (const method of ["log", "info", "warn", "error", "debug", "trace"] as const) {
    const original = console[method].bind(console);
    console[method] = (...args: unknown[]) => {
      registry.counts.console++;
      scan(`console.${method}`, args.map((a) => textOf(a)).join(" "));
      original(...args);
    };
  }
  process.on("unhandledRejection", (reason) => scan("unhandled rejection", textOf(reason)));
  process.on("uncaughtExceptionMonitor", (error) => scan("uncaught exception", textOf(error)));
}

afterAll(() => {
  // Second pass: secrets registered after a text was scanned.
  for (const text of registry.texts) {
    for (const s of registry.secrets) {
      if (text.includes(s))
        registry.leaks.push(
          `late check: registered secret ${s.slice(0, 4)}… in ${JSON.stringify(text.slice(0, 300))}`,
        );
    }
  }
  registry.texts.length = 0;
  const leaks = [...new Set(registry.leaks.splice(0))];
  expect(leaks, "secrets in errors, causes, stacks or console output").toEqual([]);
});
