// Shared by the HTTP backends: one request, mapped to BackendError with secrets removed.
import type { FetchLike } from "../../backend.ts";
import { BackendError } from "../../errors.ts";
import { abortable } from "../../signals.ts";
import { permissionFix } from "./errors.ts";
import { redact, scrub } from "./redact.ts";

/**
 * The largest reply body leasehold reads, in bytes. Every answer it expects is a few hundred
 * bytes (an Azure error document a few KiB); a longer one is refused without being read whole.
 */
export const MAX_REPLY_BYTES = 65_536;

/** The answer of {@link send}: status, a header reader and the whole body as text. */
export interface HttpReply {
  status: number;
  header(name: string): string | null;
  body: string;
}

/**
 * A message whose body is read under a cap: a reply of {@link FetchLike}, or a `Request` that the
 * Cloudflare route and Durable Object receive.
 */
export type CappedBody = Pick<Awaited<ReturnType<FetchLike>>, "headers" | "body" | "text">;

/**
 * Reads a body of at most `max` bytes from its stream, counting bytes as they arrive; `undefined`
 * as soon as it passes `max`, the rest unread (the stream is cancelled).
 */
async function readCapped(message: CappedBody, max: number): Promise<string | undefined> {
  const reader = message.body?.getReader();
  // A custom fetch without a body stream: the cap can only be checked after reading.
  if (!reader) return message.text().then((text) => (text.length > max ? undefined : text));
  const decoder = new TextDecoder();
  let text = "";
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text + decoder.decode();
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => {});
      return undefined;
    }
    text += decoder.decode(value, { stream: true });
  }
}

/**
 * The body of `message`, or `undefined` when it is longer than `max` bytes (default
 * {@link MAX_REPLY_BYTES}): never read past the cap, whether or not it declares its length.
 */
export function readBody(
  message: CappedBody,
  max: number = MAX_REPLY_BYTES,
): Promise<string | undefined> | undefined {
  const length = message.headers.get("content-length");
  if (length === null || message.headers.get("content-encoding") !== null) return readCapped(message, max);
  // A declared length, uncompressed: fetch delivers no more than that, so a length within the
  // cap is read whole (the fast path, every answer of Upstash and Azure), and a longer one is
  // refused unread. A compressed body is counted as it is decoded: a small one can expand
  // without bound. A body without a declared length (chunked) is counted as it streams.
  if (Number(length) <= max) return message.text();
  message.body?.cancel().catch(() => {});
  return undefined;
}

/**
 * The fetch functions that refused the `cache` field (workerd before compatibility date
 * 2024-11-11 throws on it): learned from the first refusal, then the field is left out for them.
 */
const refusedCache = new WeakSet<FetchLike>();

/**
 * Sends one request and reads the whole body. Every request says `cache: "no-store"` (a
 * framework's patched `fetch`, such as Next.js', may otherwise answer a renewal from its cache)
 * and `redirect: "manual"` (a redirect is an error, never followed: another server's answer is
 * not the lock's). Abort rethrows `signal.reason`, while the body is being read too (Node's
 * fetch may leave the read pending forever then, nodejs/node#56917); a network failure, a body
 * cut short or longer than {@link MAX_REPLY_BYTES} becomes a retryable {@link BackendError}, a
 * redirect or a permission the runtime refused (Deno without `--allow-net`) a non-retryable one
 * naming the fix; no message or cause carries a secret.
 */
export async function send(
  backend: string,
  fetchFn: FetchLike,
  url: string,
  init: { method: string; headers: Record<string, string>; body?: string; signal?: AbortSignal | undefined },
  secrets: readonly string[],
): Promise<HttpReply> {
  const { signal, headers } = init;
  const request: Parameters<FetchLike>[1] = { method: init.method, headers, redirect: "manual" };
  if (init.body !== undefined) request.body = init.body;
  if (signal) request.signal = signal;
  const withoutCache = refusedCache.has(fetchFn);
  if (!withoutCache) request.cache = "no-store";
  let status: number;
  let redirect: boolean;
  let body: string | undefined;
  let res: Awaited<ReturnType<FetchLike>>;
  try {
    try {
      res = await fetchFn(url, request);
    } catch (error) {
      // A fetch refusing the field, not a network failure. workerd says "The 'cache' field on
      // 'RequestInitializerDict' is not implemented." (a plain Error).
      const message = error instanceof Error ? error.message : "";
      if (withoutCache || !/\bcache\b/i.test(message) || /fetch failed/i.test(message)) throw error;
      refusedCache.add(fetchFn);
      delete request.cache;
      res = await fetchFn(url, request);
    }
    status = res.status;
    redirect = status >= 300 && status < 400;
    if (redirect) res.body?.cancel().catch(() => {});
    else {
      const reading = readBody(res);
      body = await (signal && reading ? abortable(reading, signal) : reading);
    }
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    // The request's own credentials (a SharedKey signature, a bearer token) are secrets too.
    const auth = headers.authorization ?? headers.Authorization;
    const hidden = auth ? [...secrets, auth, ...auth.split(/[\s:]+/).filter((p) => p.length >= 16)] : secrets;
    const cause = scrub(error, hidden);
    // A permission the runtime refused (Deno without --allow-net) fails at once, naming the fix.
    const fix = permissionFix(cause);
    throw new BackendError(`request failed: ${cause.message}${fix ? `: ${fix}` : ""}`, {
      backend,
      retryable: fix === undefined,
      cause,
    });
  }
  if (body === undefined) {
    throw new BackendError(
      redirect
        ? `the server answered with a redirect (HTTP ${status}); leasehold does not follow redirects: configure the URL it redirects to`
        : `the reply is longer than ${MAX_REPLY_BYTES} bytes; not read`,
      { backend, status, retryable: !redirect },
    );
  }
  return { status, header: (n) => res.headers.get(n), body };
}

/**
 * {@link send} to a JSON API authorized by a bearer token: 401 and 403 are non-retryable
 * `ERR_BACKEND_AUTH` errors ("check the token"), and a body that is not JSON (a proxy's error
 * page, a body cut short) a retryable error quoting a redacted snippet of it. Answers the status
 * and the parsed body.
 */
export async function sendJson(
  backend: string,
  fetchFn: FetchLike,
  url: string,
  init: { method: string; headers: Record<string, string>; body?: string; signal?: AbortSignal | undefined },
  secrets: readonly string[],
): Promise<{ status: number; json: unknown }> {
  const reply = await send(backend, fetchFn, url, init, secrets);
  const { status } = reply;
  if (status === 401 || status === 403) {
    throw new BackendError(`authentication failed (HTTP ${status}): check the token`, {
      backend,
      status,
      retryable: false,
      auth: true,
    });
  }
  try {
    return { status, json: JSON.parse(reply.body) };
  } catch {
    const snippet = redact(reply.body, secrets).slice(0, 80).replace(/\s+/g, " ");
    throw new BackendError(`HTTP ${status} with a body that is not JSON: ${JSON.stringify(snippet)}`, {
      backend,
      status,
      retryable: true,
    });
  }
}
