// Redaction, the one module for it: every backend and the CLI keep secrets out of messages and
// causes with these. The backends over a client the user passes (redis, postgres) also learn the
// client's secrets here, and remove any URL's password.

/**
 * Replaces every occurrence of each secret with `[redacted]`, in each form a secret can take in a
 * message: as is, URL-encoded, and JSON-escaped (a `"` or `\` in a token becomes `\"` or `\\`
 * once a reply is quoted with `JSON.stringify`; the URL-encoded form has none). Secrets of any
 * length count: a short token garbles a message, which is better than showing it.
 */
export function redact(text: string, secrets: readonly string[]): string {
  const forms = new Set<string>();
  for (const secret of secrets) {
    if (typeof secret === "string" && secret !== "") {
      forms.add(secret).add(encodeURIComponent(secret)).add(JSON.stringify(secret).slice(1, -1));
    }
  }
  // Longest first, so that a secret containing another is replaced whole.
  return [...forms]
    .sort((a, b) => b.length - a.length)
    .reduce((out, form) => out.split(form).join("[redacted]"), text);
}

/** A copy of an error that is safe to expose as `cause`: name and redacted message only. */
export function scrub(error: unknown, secrets: readonly string[], depth = 0): Error {
  const e = error instanceof Error ? error : new Error(String(error));
  // Causes are copied 4 deep at most: enough to explain, and a cyclic chain cannot recurse forever.
  const inner =
    e.cause === undefined || depth >= 4 ? undefined : { cause: scrub(e.cause, secrets, depth + 1) };
  const copy = new Error(redact(e.message, secrets), inner);
  copy.name = e.name;
  copy.stack = `${copy.name}: ${copy.message}`;
  return copy;
}

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
