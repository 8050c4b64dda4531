// Option checks: createMutex's, and those of the calls made later (acquire, lead, watch). Every
// bad option is a TypeError (wrong type) or RangeError (wrong value) that names where, what was
// wrong and what is valid, made by the one helper `fail` (the backends use it too).
import { type Backend, checkBackend } from "./backend.ts";
import { check } from "./errors.ts";
import type { Emit, LockEvent } from "./events.ts";
import { MAX_DELAY } from "./time.ts";
import { defaultStopMargin, guardOf } from "./timing.ts";
import type { MutexOptions } from "./types.ts";

// `fail` and `check` live in errors.ts, below the contract (backend.ts's checkBackend uses them);
// the option checks of the core and of the backends import them from here.
export { check, fail } from "./errors.ts";

/** A finite number. */
export function isNumber(value: unknown): value is number {
  return typeof value === "number" && Number.isFinite(value);
}

/** What a value is, for a message: its type, or `null`; never its content (it may be a secret). */
export function kind(value: unknown): string {
  return value === null ? "null" : Array.isArray(value) ? "an array" : typeof value;
}

const NAME = /^[A-Za-z0-9_:@+-](?:[A-Za-z0-9_.:@+/-]*[A-Za-z0-9_:@+-])?$/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
/** Unicode's control characters (category Cc): U+0000–U+001F and U+007F–U+009F. */
const CONTROL = /\p{Cc}/u;

/** What every backend stores and `holder()` gives back exactly (docs/DESIGN.md §3). */
const OWNER_RULE =
  "owner must be 1-256 characters (UTF-16 code units) of well-formed Unicode without control characters (U+0000-U+001F, U+007F-U+009F)";

/**
 * What is wrong with `text` for a rule of 1 to `max` UTF-16 code units of well-formed Unicode
 * without control characters (an owner: {@link OWNER_RULE}; a fire id), for the message; never its
 * content. `undefined` when nothing is.
 */
export function textProblem(text: unknown, max: number): string | undefined {
  if (typeof text !== "string") return kind(text);
  if (text.length < 1 || text.length > max) return `${text.length} characters`;
  const lone = LONE_SURROGATE.exec(text);
  if (lone) return `a lone surrogate at index ${lone.index}`;
  const control = CONTROL.exec(text);
  if (!control) return undefined;
  const code = text.charCodeAt(control.index).toString(16).toUpperCase();
  return `a control character (U+${code.padStart(4, "0")}) at index ${control.index}`;
}

/** createMutex's options, checked, with their defaults, the backend and the guard. */
export interface CheckedMutexOptions {
  backend: Backend;
  /** The deadline is t_send + ttl − guard (docs/DESIGN.md §4.2). */
  guard: number;
  name: string;
  ttl: number;
  renew: boolean;
  retryDelay: number;
  stopMargin: number;
  owner: string;
  onEvent: ((event: LockEvent) => void) | undefined;
}

/** A mutex's or semaphore's checked options, with its backend, guard and event emitter. @internal */
export type Core = CheckedMutexOptions & { emit?: Emit | undefined; mode?: "shared" | undefined };

/**
 * The checked options behind each Mutex that createMutex made (it records them there), for
 * createElection: a Mutex keeps them to itself. @internal
 */
export const cores: WeakMap<object, Core> = new WeakMap();

/**
 * Checks the backend (backend.ts `checkBackend`) and every option of createMutex (or of `where`,
 * such as createSemaphore, which takes the same ones); fills in the defaults.
 */
export function checkMutexOptions(
  backend: Backend,
  options: MutexOptions,
  where = "createMutex",
): CheckedMutexOptions {
  const at = `${where}:`;
  checkBackend(backend, at);
  check(typeof options === "object" && options !== null, at, "options must be an object with a name");

  const { name, ttl = 15_000, renew = true, retryDelay = 1_000 } = options;
  check(typeof name === "string", at, "name must be a string");
  check(
    name.length >= 1 && name.length <= 255,
    at,
    `name must be 1-255 characters, got ${name.length}`,
    RangeError,
  );
  check(
    NAME.test(name) && !name.includes("//") && !name.split("/").some((s) => s === "." || s === ".."),
    at,
    `name ${JSON.stringify(name)} is invalid: use letters, digits and - _ . : / @ +, not starting or ending with / or ., without // or a . or .. segment`,
    RangeError,
  );
  check(
    Number.isSafeInteger(ttl) && ttl >= 10 && ttl <= MAX_DELAY,
    at,
    `ttl must be an integer number of ms from 10 to ${MAX_DELAY}, got ${String(ttl)}`,
    RangeError,
  );
  checkBackendRange(at, "ttl", ttl, backend.ttlRange, backend.name);
  const stopMargin = options.stopMargin ?? defaultStopMargin(ttl);
  check(
    isNumber(stopMargin) && stopMargin >= 0 && stopMargin < ttl / 2,
    at,
    `stopMargin must be a number of ms >= 0 and < ttl / 2 (${ttl / 2}), got ${String(stopMargin)}`,
    RangeError,
  );
  check(
    isNumber(retryDelay) && retryDelay >= 0 && retryDelay <= MAX_DELAY,
    at,
    `retryDelay must be a number of ms from 0 to ${MAX_DELAY}, got ${String(retryDelay)}`,
    RangeError,
  );
  check(typeof renew === "boolean", at, "renew must be a boolean");
  const owner = options.owner ?? crypto.randomUUID();
  const wrong = textProblem(owner, 256);
  check(wrong === undefined, at, `${OWNER_RULE}, got ${wrong}`);
  checkFunction(where, "onEvent", options.onEvent);
  const onEvent = options.onEvent;
  return {
    backend,
    guard: guardOf(ttl, stopMargin),
    name,
    ttl,
    renew,
    retryDelay,
    stopMargin,
    owner,
    onEvent,
  };
}

/** The options object of the call `where`: `undefined` becomes `{}`; anything but an object is a TypeError. */
export function optionsOf<T extends object>(where: string, options: T | undefined): Partial<T> {
  if (options === undefined) return {};
  check(
    typeof options === "object" && options !== null,
    `${where}:`,
    `options must be an object, got ${kind(options)}`,
  );
  return options;
}

/**
 * Throws a RangeError from `at` unless `value` (ms) lies in a backend's declared `range` (its
 * `ttlRange` or `retainRange`), naming the option, the range and the backend; no range, no limit.
 */
export function checkBackendRange(
  at: string,
  what: string,
  value: number,
  range: readonly [number, number] | undefined,
  backendName: string,
): void {
  check(
    !range || (value >= range[0] && value <= range[1]),
    at,
    `${what} must be from ${range?.[0]} to ${range?.[1]} ms for the ${backendName} backend, got ${value}`,
    RangeError,
  );
}

/** Checks that `signal`, when given, is an AbortSignal (any realm's). */
export function checkSignal(where: string, signal: unknown): asserts signal is AbortSignal | undefined {
  // Early, so that the common call builds no message (this runs on every tryAcquire).
  if (signal === undefined) return;
  const s = signal as { aborted?: unknown; addEventListener?: unknown } | null;
  check(
    typeof s === "object" &&
      s !== null &&
      typeof s.aborted === "boolean" &&
      typeof s.addEventListener === "function",
    `${where}:`,
    `signal must be an AbortSignal, got ${kind(signal)}`,
  );
}

/** Checks that `fn`, when given, is a function. */
export function checkFunction(where: string, name: string, fn: unknown): void {
  if (fn === undefined) return;
  check(typeof fn === "function", `${where}:`, `${name} must be a function, got ${kind(fn)}`);
}

/** Checks that `ms`, when given, is a number of ms >= 0 (finite unless `infinite`). */
export function checkMs(where: string, name: string, ms: unknown, infinite = false): void {
  if (ms === undefined) return;
  check(
    typeof ms === "number" && ms >= 0 && (infinite || Number.isFinite(ms)),
    `${where}:`,
    `${name} must be a ${infinite ? "" : "finite "}number of ms >= 0, got ${typeof ms === "number" ? ms : kind(ms)}`,
    typeof ms === "number" ? RangeError : TypeError,
  );
}
