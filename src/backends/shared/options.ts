// Option checks and defaults that every HTTP backend shares.
import type { FetchLike } from "../../backend.ts";
import { check, fail } from "../../options.ts";

/**
 * The URL in option `option` of backend `where` (such as `"[upstash]"`): an http(s) URL without a
 * user name or password (fetch would quote such a URL, password included, in its errors). A
 * message shows at most the scheme, never the URL: it may carry a password.
 */
export function httpUrl(where: string, option: string, value: unknown, hint = (_scheme: string) => ""): URL {
  check(typeof value === "string" && value !== "", where, `${option} must be a URL string`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return fail(where, `${option} must be an http(s) URL, got something that is not a URL`);
  }
  check(
    /^https?:$/.test(url.protocol),
    where,
    `${option} must be an http(s) URL, got ${url.protocol}${hint(url.protocol)}`,
  );
  check(
    url.username === "" && url.password === "",
    where,
    `${option} must not contain a user name or password`,
  );
  return url;
}

/** The `fetch` option of backend `where`: a function, or by default the global `fetch`. */
export function fetchOption(where: string, value: unknown): FetchLike {
  check(value === undefined || typeof value === "function", where, "option fetch must be a function");
  return (value as FetchLike | undefined) ?? ((url, init) => fetch(url, init));
}

/** Whether an HTTP status may succeed if the same request is sent again: 5xx, 408, 429. */
export function retryableStatus(status: number): boolean {
  return status >= 500 || status === 408 || status === 429;
}

/** Whether an HTTP status says the credentials were refused: 401, 403. */
export function authStatus(status: number): boolean {
  return status === 401 || status === 403;
}

/**
 * Throws a RangeError from backend `where` (such as `"[dynamodb]"`) unless `retain`, a done
 * record's lifetime for `complete`, is an integer from 1 to 2 147 483 647 ms (the contract's range).
 */
export function checkRetain(where: string, retain: number): void {
  check(
    Number.isSafeInteger(retain) && retain >= 1 && retain <= 2_147_483_647,
    where,
    `retain must be an integer from 1 to 2147483647 ms, got ${retain}`,
    RangeError,
  );
}
