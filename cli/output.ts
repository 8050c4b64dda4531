// What the command line prints: to stderr, never a secret, and never able to end supervision.
import process from "node:process";
import { redact as redactWith } from "../src/backends/shared/redact.ts";
import { explain } from "../src/errors.ts";

/** A usage or configuration problem: printed, exit 2. */
export class UsageError extends Error {}

/** Values that must never be printed: tokens, keys, connection strings. */
export const secrets: string[] = [];

const redact = (text: string): string => redactWith(text, secrets);

// A reader that went away (`2>&1 | logger` after logger exited) must never end supervision: a
// failed write is dropped, never thrown, and the stream's error event is handled.
process.stderr.on("error", () => {});
process.stdout.on("error", () => {});

export function write(stream: NodeJS.WriteStream, text: string): void {
  try {
    stream.write(text);
  } catch {
    // The reader is gone; the message is lost, the supervision goes on.
  }
}

export function say(message: string): void {
  write(process.stderr, `leasehold: ${redact(message)}\n`);
}

/**
 * Reports a failure that is being retried: the first at once, then at most one line every 10 s
 * with the number of failures since the last line, so a long outage neither floods nor hides.
 */
export function retryReporter(what: string): (error: unknown) => void {
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
export const messageOf = (error: unknown): string => explain(error);
