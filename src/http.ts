// Shared by the HTTP backends: one request, mapped to BackendError with secrets removed.
import type { FetchLike } from "./backend.ts";
import { BackendError } from "./errors.ts";

/** Replaces every occurrence of each secret (and its URL-encoded form) with `[redacted]`. */
export function redact(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) {
    if (s.length < 4) continue;
    for (const form of new Set([s, encodeURIComponent(s)])) out = out.split(form).join("[redacted]");
  }
  return out;
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

/** The answer of {@link send}: status, a header reader and the whole body as text. */
export interface HttpReply {
  status: number;
  header(name: string): string | null;
  body: string;
}

/**
 * Sends one request and reads the whole body. Abort rethrows `signal.reason`; a network failure
 * or a body cut short becomes a retryable {@link BackendError} whose message and cause carry no
 * secret.
 */
export async function send(
  backend: string,
  fetchFn: FetchLike,
  url: string,
  init: { method: string; headers: Record<string, string>; body?: string; signal?: AbortSignal | undefined },
  secrets: readonly string[],
): Promise<HttpReply> {
  const { signal, ...rest } = init;
  try {
    const res = await fetchFn(url, signal ? { ...rest, signal } : rest);
    const body = await res.text();
    return { status: res.status, header: (n) => res.headers.get(n), body };
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    // The request's own credentials (a SharedKey signature, a bearer token) are secrets too.
    const auth = rest.headers.authorization ?? rest.headers.Authorization;
    const hidden = auth ? [...secrets, auth, ...auth.split(/[\s:]+/).filter((p) => p.length >= 16)] : secrets;
    const cause = scrub(error, hidden);
    throw new BackendError(`request failed: ${cause.message}`, { backend, retryable: true, cause });
  }
}
