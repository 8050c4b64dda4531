/** Stable codes carried by every {@link LockError}. */
export type LockErrorCode =
  | "ERR_LOCK"
  | "ERR_LOCK_TIMEOUT"
  | "ERR_LEASE_LOST"
  | "ERR_BACKEND"
  | "ERR_BACKEND_AUTH";

/**
 * Base class of every error leasehold raises on purpose. `code` is stable across versions;
 * match on it (or use {@link isLockError}), not on the message.
 */
export class LockError extends Error {
  /** A stable, machine-readable code. */
  declare readonly code: LockErrorCode;

  /** An error with `message`, `code` (default `ERR_LOCK`) and `cause`. */
  constructor(message: string, options?: { code?: LockErrorCode; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = options?.code ?? "ERR_LOCK";
  }

  /** `"LockError"`. */
  override get name(): string {
    return "LockError";
  }
}

/** `acquire()` gave up after its `timeout`. Code `ERR_LOCK_TIMEOUT`. */
export class LockTimeoutError extends LockError {
  /** A timeout error with `message` and `cause` (the last backend failure, if any). */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, { code: "ERR_LOCK_TIMEOUT", cause: options?.cause });
  }

  /** `"LockTimeoutError"`. */
  override get name(): string {
    return "LockTimeoutError";
  }
}

/**
 * The lease is no longer held: its local deadline passed without a successful renewal, the
 * backend said it belongs to someone else, or it was released. It is the `reason` of
 * `lease.signal`. Code `ERR_LEASE_LOST`.
 */
export class LeaseLostError extends LockError {
  /** A lost-lease error with `message` and `cause`. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, { code: "ERR_LEASE_LOST", cause: options?.cause });
  }

  /** `"LeaseLostError"`. */
  override get name(): string {
    return "LeaseLostError";
  }
}

/**
 * The backend failed or answered something unexpected. Code `ERR_BACKEND`, or
 * `ERR_BACKEND_AUTH` when the credentials were refused (HTTP 401/403 or the backend's own
 * permission error). `retryable` tells whether trying again may help (network failures, 5xx,
 * garbled replies); the core retries those on its own.
 */
export class BackendError extends LockError {
  /** The backend's name, such as `"upstash"` or `"azure-blob"`. */
  declare readonly backend: string;
  /** The HTTP status, when there was an HTTP answer. */
  declare readonly status: number | undefined;
  /** Whether the same request may succeed if sent again. */
  declare readonly retryable: boolean;

  /** A failure of `options.backend`, its message prefixed with that name. */
  constructor(
    message: string,
    options: { backend: string; status?: number; retryable: boolean; auth?: boolean; cause?: unknown },
  ) {
    super(`[leasehold] [${options.backend}] ${message}`, {
      code: options.auth ? "ERR_BACKEND_AUTH" : "ERR_BACKEND",
      cause: options.cause,
    });
    this.backend = options.backend;
    this.status = options.status;
    this.retryable = options.retryable;
  }

  /** `"BackendError"`. */
  override get name(): string {
    return "BackendError";
  }
}

/**
 * The error for an acquire of `key` whose fencing token would pass `Number.MAX_SAFE_INTEGER`: the
 * lock's fence counter is exhausted, and no later acquire can succeed (a token past it is not a
 * number that can be compared exactly). Non-retryable. Raised by the core for a grant whose token
 * is an integer past the safe range, and by a backend that refuses such a grant before making it.
 * @internal
 */
export function fenceExhausted(backend: string, key: string): BackendError {
  return new BackendError(
    `the fence counter of lock ${JSON.stringify(key)} is exhausted: its next token would pass ` +
      `Number.MAX_SAFE_INTEGER (${Number.MAX_SAFE_INTEGER}), and no lease can be granted with it. ` +
      "Use a new lock name (the resources it fences must accept the new name's tokens), or reset the " +
      "counter once no holder or fenced resource depends on the old tokens",
    { backend, retryable: false },
  );
}

/**
 * `error`'s message, then each cause's message in parentheses (3 deep, a message the text already
 * contains left out), without the leading `[leasehold] ` and, when `backend` is given, its
 * `[<backend>] `: one line that says what failed and why (a fetch's "fetch failed" says little
 * without its cause's "connect ECONNREFUSED"). The library's errors and causes carry no secret.
 * @internal
 */
export function explain(error: unknown, backend?: string): string {
  let text = error instanceof Error ? error.message : String(error);
  for (let e = error, depth = 0; e instanceof Error && e.cause instanceof Error && depth < 3; depth++) {
    e = e.cause;
    if (e instanceof Error && !text.includes(e.message)) text += ` (${e.message})`;
  }
  text = text.replace(/^\[leasehold\] /, "");
  return backend !== undefined && text.startsWith(`[${backend}] `) ? text.slice(backend.length + 3) : text;
}

const names = new Set(["LockError", "LockTimeoutError", "LeaseLostError", "BackendError"]);

/**
 * Whether `value` is a leasehold error. Works across realms and across duplicate copies of
 * the package, because it checks `name` and `code` rather than `instanceof`.
 *
 * @example Telling a timeout from other failures
 * ```ts
 * import { isLockError, type Mutex } from "leasehold";
 *
 * declare const mutex: Mutex;
 *
 * const lease = await mutex.acquire({ timeout: 1_000 }).catch((e: unknown) => {
 *   if (isLockError(e) && e.code === "ERR_LOCK_TIMEOUT") return null; // busy: try again later
 *   throw e;
 * });
 * ```
 */
export function isLockError(value: unknown): value is LockError {
  if (typeof value !== "object" || value === null) return false;
  const { name, code } = value as { name?: unknown; code?: unknown };
  return typeof name === "string" && names.has(name) && typeof code === "string" && code.startsWith("ERR_");
}

/**
 * Throws `new Err("[leasehold] <where> <message>")`. `where` is a call (`"createMutex:"`) or a
 * backend (`"[upstash]"`).
 */
export function fail(
  where: string,
  message: string,
  Err: typeof TypeError | typeof RangeError = TypeError,
): never {
  throw new Err(`[leasehold] ${where} ${message}`);
}

/** {@link fail} unless `ok`. */
export function check(
  ok: boolean,
  where: string,
  message: string,
  Err: typeof TypeError | typeof RangeError = TypeError,
): asserts ok {
  if (!ok) fail(where, message, Err);
}
