// Shared by the backends over a client the user passes (redis, postgres): what they know of the
// client's secrets, and messages and causes with those secrets and any URL's password removed.
import { redact, scrub } from "./http.ts";

/** A URL's user and password (`scheme://user:password@`), wherever a message quotes one. */
const USERINFO = /([a-z][a-z0-9+.-]*:\/\/)[^/\s@]*@/gi;

/**
 * The secrets among `values` (strings); for each connection URL among `urls`, the URL and its
 * password too.
 */
export function secretsIn(values: unknown[], urls: unknown[] = []): string[] {
  const found = [...values];
  for (const url of urls) {
    if (typeof url !== "string") continue;
    found.push(url);
    try {
      found.push(decodeURIComponent(new URL(url).password));
    } catch {
      // not a URL: the string itself is redacted
    }
  }
  return found.filter((s): s is string => typeof s === "string" && s !== "");
}

/** `clean` a text and make a safe `cause` of an error: no secret, no URL password. */
export function cleaner(secrets: readonly string[]): {
  clean: (text: string) => string;
  cause: (error: unknown) => Error;
} {
  const clean = (text: string) => redact(text, secrets).replace(USERINFO, "$1[redacted]@");
  const cause = (error: unknown) => {
    const copy = scrub(error, secrets);
    for (let e: unknown = copy; e instanceof Error; e = e.cause) {
      e.message = clean(e.message);
      e.stack = `${e.name}: ${e.message}`;
    }
    return copy;
  };
  return { clean, cause };
}
