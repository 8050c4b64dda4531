// Checks of the options a caller passes at run time (acquire, lead, watch): the same TypeError
// and RangeError shape as createMutex's, naming the method, the option and what is valid.

/** Throws `new Err("[leasehold] <where>: <message>")` unless `ok`. */
export function check(
  ok: boolean,
  where: string,
  message: string,
  Err: typeof TypeError | typeof RangeError = TypeError,
): asserts ok {
  if (!ok) throw new Err(`[leasehold] ${where}: ${message}`);
}

/** The options object of `where`: `undefined` becomes `{}`; anything but an object is a TypeError. */
export function optionsOf<T extends object>(where: string, options: T | undefined): Partial<T> {
  if (options === undefined) return {};
  check(
    typeof options === "object" && options !== null,
    where,
    `options must be an object, got ${kind(options)}`,
  );
  return options;
}

/** Checks that `signal`, when given, is an AbortSignal (any realm's). */
export function checkSignal(where: string, signal: unknown): asserts signal is AbortSignal | undefined {
  const s = signal as { aborted?: unknown; addEventListener?: unknown } | null | undefined;
  check(
    signal === undefined ||
      (typeof s === "object" &&
        s !== null &&
        typeof s.aborted === "boolean" &&
        typeof s.addEventListener === "function"),
    where,
    `signal must be an AbortSignal, got ${kind(signal)}`,
  );
}

/** Checks that `fn`, when given, is a function. */
export function checkFunction(where: string, name: string, fn: unknown): void {
  check(fn === undefined || typeof fn === "function", where, `${name} must be a function, got ${kind(fn)}`);
}

/** Checks that `ms`, when given, is a number of ms ≥ 0 (finite unless `infinite`). */
export function checkMs(where: string, name: string, ms: unknown, infinite = false): void {
  check(
    ms === undefined || (typeof ms === "number" && ms >= 0 && (infinite || Number.isFinite(ms))),
    where,
    `${name} must be a ${infinite ? "" : "finite "}number of ms >= 0, got ${typeof ms === "number" ? ms : kind(ms)}`,
    typeof ms === "number" ? RangeError : TypeError,
  );
}

/** What a value is, for a message: its type, or `null`; never its content (it may be a secret). */
function kind(value: unknown): string {
  return value === null ? "null" : Array.isArray(value) ? "an array" : typeof value;
}
