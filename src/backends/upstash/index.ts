// The backend keeps its state (the read-only fallback) in one closure; the Lua scripts and the
// lock logic (the fence memory included) are in ../shared/redis-scripts.ts, shared with the redis
// backend.
/**
 * The Upstash Redis backend: speaks Upstash's REST API with `fetch` only, no client library.
 * Each operation is one Lua script and one HTTP round trip (inspect: see below).
 *
 * Keys, for a lock named `n` and the default prefix: `leasehold:{n}` holds the lease (a string
 * `nonce|token|owner` with a PX expiry) and `leasehold:{n}:fence` the fence counter, which
 * never expires so tokens keep increasing across holders. The braces are a Redis hash tag: both
 * keys of a name live in one slot, as a multi-key script needs on a cluster. A fire of runOnce
 * (`n:fire:<id>`) is `leasehold:{n}:fire:<id>` and draws its tokens from `leasehold:{n}:fence`.
 *
 * Upstash replicates asynchronously. The acquire, renew and release scripts are writes, so they
 * run on the primary; a failover that loses the last writes can let a second holder in while the
 * first still runs, and can set the fence counter back, so a token can repeat. A database with
 * eviction on can do the same by evicting either key: keep eviction off (the default). Treat
 * Upstash locks as efficiency locks (no duplicate work) unless the fenced resource survives such
 * a loss on its own. Each backend remembers the highest token it has seen per lock name (the
 * last 4 096 names); when a fresh lease's token is not above the highest seen before the request
 * was sent, the counter went back: the backend raises it above every token it saw (one more
 * request), grants the lease with that token and tells `onFenceHealed` (default `console.warn`).
 * So a token this backend instance saw is never handed out again, and a process that outlives
 * the loss is not locked out of the name.
 *
 * `inspect` (behind `holder()` and `leasehold status`) runs its script with `EVAL_RO`, so a
 * read-only token can use it; when the token may not run `EVAL_RO` (NOPERM) or the server does
 * not know it, it reads with `GET` and `PTTL` in one pipeline from then on. Upstash's plan
 * limits (`ERR max daily request limit exceeded`, `ERR max request size exceeded`, ...) are
 * non-retryable errors.
 *
 * @example From the environment (Node, Bun, Deno)
 * ```ts
 * import { createMutex } from "leasehold";
 * import { fromEnv } from "leasehold/upstash";
 *
 * const mutex = createMutex(fromEnv(), { name: "nightly-report" });
 * ```
 *
 * @module
 */
import type { Backend, FetchLike } from "../../backend.ts";
import { BackendError } from "../../errors.ts";
import { check } from "../../options.ts";
import { malformed as malformedReply, REDIS_TRANSIENT } from "../shared/errors.ts";
import { sendJson } from "../shared/http.ts";
import { fetchOption, httpUrl, retryableStatus } from "../shared/options.ts";
import { redact } from "../shared/redact.ts";
import { INSPECT } from "../shared/redis-lua.ts";
import { type FenceHealed, scriptBackend } from "../shared/redis-scripts.ts";

export type { FenceHealed } from "../shared/redis-scripts.ts";

/** Options of {@link upstash}. */
export interface UpstashOptions {
  /** The database's REST URL (`UPSTASH_REDIS_REST_URL`), `https://…` (or `http://` for local servers). */
  url: string;
  /**
   * The REST token (`UPSTASH_REDIS_REST_TOKEN`). A read-only token can only inspect (`holder()`,
   * `leasehold status`); taking, renewing and releasing locks fails with `ERR_BACKEND_AUTH`.
   */
  token: string;
  /** The `fetch` to use. Default: the global `fetch`. */
  fetch?: FetchLike;
  /** Prepended to every key, so one database can serve several apps. Default `"leasehold:"`. */
  prefix?: string;
  /**
   * Called when a lock's fence counter went back (eviction, a failover or flush that lost
   * writes) and this backend raised it above every token it had seen for the lock, granting the
   * lease with that token instead of repeating one: the lock's name, the tokens and the likely
   * cause, no secret. Default: `console.warn` of `info.message`. A function that throws is ignored.
   */
  onFenceHealed?: (info: FenceHealed) => void;
}

/**
 * Where {@link fromEnv} reads the variables: Workers' `env` (any `interface Env`, such as the one
 * `wrangler types` generates), `process.env`, or any object.
 */
export type UpstashEnv = object;

const NAME = "upstash";

const LIMIT_HINT =
  ": a limit of the Upstash database or plan, not retried (see the database's usage and limits in the Upstash console)";

const READ_ONLY_HINT =
  ": the token is read-only (or restricted): it can only inspect (holder(), leasehold status); taking, renewing and releasing locks needs the database's standard REST token";

/**
 * Creates an Upstash Redis backend for {@link createMutex}.
 *
 * @param options `url` and `token` of the database (the REST ones from the Upstash console),
 *   plus an optional `fetch`, key `prefix` and `onFenceHealed`.
 * @returns A backend named `"upstash"` with no ttl bounds of its own.
 * @throws {TypeError} When `url` is not an http(s) URL, `token` is empty or not a valid header
 *   value, `prefix` is not a string or `onFenceHealed` not a function. The token is never part
 *   of the message.
 *
 * @example A mutex on Upstash
 * ```ts
 * import { createMutex } from "leasehold";
 * import { upstash } from "leasehold/upstash";
 *
 * const backend = upstash({ url: "https://eu1-example.upstash.io", token: "AX…" });
 * await using lease = await createMutex(backend, { name: "nightly-report" }).acquire();
 * ```
 */
export function upstash(options: UpstashOptions): Backend {
  const { url, token, prefix = "leasehold:", onFenceHealed } = options ?? ({} as UpstashOptions);
  check(
    typeof url === "string" && url !== "",
    `[${NAME}]`,
    "option url is required: the database's REST URL",
  );
  httpUrl(`[${NAME}]`, "option url", url, (scheme) =>
    /^rediss?:$/.test(scheme) ? " (that is the Redis protocol URL; use the REST URL)" : "",
  );
  check(
    typeof token === "string" && token !== "",
    `[${NAME}]`,
    "option token is required: the database's REST token",
  );
  // A token that is not a valid header value would make fetch throw with the value in its message.
  check(
    /^[\x21-\x7e]+$/.test(token),
    `[${NAME}]`,
    "option token contains characters that are not allowed in a header",
  );
  check(typeof prefix === "string", `[${NAME}]`, "option prefix must be a string");
  const fetchFn = fetchOption(`[${NAME}]`, options.fetch);
  const endpoint = `${url.replace(/\/+$/, "")}/`;
  const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  const secrets = [token];

  // Always EVAL, never EVALSHA with a NOSCRIPT fallback: EVALSHA saves a few request bytes and
  // no time worth having (bench/upstash-script.ts compares them); EVAL is always exactly one
  // round trip (no NOSCRIPT detour after a failover or SCRIPT FLUSH), needs no SHA-1, and is less
  // code. Redis caches the compiled script either way. (inspect runs its script with EVAL_RO,
  // below.)

  /**
   * One request to `path` ("" for a command, "pipeline"); the parsed JSON of a 200 answer without
   * `error`. `hint` is appended to a NOPERM message.
   */
  async function call(
    path: string,
    command: unknown[],
    signal: AbortSignal | undefined,
    hint = "",
  ): Promise<unknown> {
    const body = JSON.stringify(command);
    const { status, json } = await sendJson(
      NAME,
      fetchFn,
      endpoint + path,
      { method: "POST", headers, body, signal },
      secrets,
    );
    const error = (json as { error?: unknown } | null)?.error;
    if (typeof error === "string" || status !== 200) {
      throw replyError(status, typeof error === "string" ? error : "", hint);
    }
    return json;
  }

  /** The error for an answer `{"error": text}` (or no text) with this status. */
  function replyError(status: number, error: string, hint = ""): BackendError {
    const text = redact(error, secrets);
    // Upstash's plan and size limits: another try cannot help before the limit resets or the
    // plan changes, whatever the status (a 429 included).
    const limit = /^ERR (max .+ exceeded|DB capacity quota exceeded)/i.test(text);
    // Redis' own transient states are worth another try; so are 5xx, 408 and 429.
    const transient = REDIS_TRANSIENT.test(text);
    const auth = text.startsWith("NOPERM");
    const http = status === 200 ? "" : ` (HTTP ${status})`;
    const why = limit ? LIMIT_HINT : auth ? hint : "";
    return new BackendError(text ? text + http + why : `HTTP ${status}`, {
      backend: NAME,
      status,
      retryable: !limit && (retryableStatus(status) || transient),
      auth,
    });
  }

  function result(json: unknown): unknown {
    if (typeof json !== "object" || json === null || !("result" in json)) throw malformed(json);
    return (json as { result: unknown }).result;
  }

  // The writing scripts; NOPERM here means a token without write rights.
  const evaluate = async (script: string, keys: string[], args: (string | number)[], signal?: AbortSignal) =>
    result(await call("", ["EVAL", script, keys.length, ...keys, ...args], signal, READ_ONLY_HINT));

  const malformed = (reply: unknown): BackendError =>
    malformedReply(NAME, reply, (text) => redact(text, secrets), 200);

  // inspect reads with EVAL_RO. If the token may not run it (an ACL of read commands only:
  // Redis puts EVAL_RO in @scripting, not @read) or the server does not know it (Redis < 7),
  // inspect reads with GET and PTTL in one pipeline from then on: one round trip, not atomic,
  // which a read that is advisory anyway can afford.
  let plainReads = false;
  async function read(k: string, signal: AbortSignal | undefined): Promise<unknown> {
    if (!plainReads) {
      try {
        return result(await call("", ["EVAL_RO", INSPECT, 2, k, `${k}:readers`], signal));
      } catch (error) {
        if (!(error instanceof BackendError && /\] (NOPERM|ERR unknown command)/.test(error.message)))
          throw error;
        plainReads = true;
      }
    }
    const json = await call(
      "pipeline",
      [
        ["GET", k],
        ["PTTL", k],
        // Held shared (§18): the readers, lapsed ones not yet dropped counted too (no TIME here).
        ["ZCARD", `${k}:readers`],
      ],
      signal,
    );
    if (!Array.isArray(json) || json.length !== 3) throw malformed(json);
    const [value, pttl, readers] = json.map((entry: { error?: unknown }) => {
      if (typeof entry?.error === "string") throw replyError(200, entry.error);
      return result(entry);
    });
    if (value === null) return null;
    return typeof value === "string" && value.startsWith("*|") ? [value, pttl, readers] : [value, pttl];
  }

  return scriptBackend({
    name: NAME,
    prefix,
    evaluate,
    read,
    malformed,
    counterLoss:
      "by eviction (turn Eviction off for this database in the Upstash console) or by a failover or flush that lost writes",
    onFenceHealed,
  });
}

/**
 * Creates an Upstash Redis backend from `UPSTASH_REDIS_REST_URL` and `UPSTASH_REDIS_REST_TOKEN`
 * (or Vercel's `KV_REST_API_URL` and `KV_REST_API_TOKEN`).
 *
 * @param env Where to read the variables: Workers' `env` binding, or any record. Default:
 *   `process.env` (Node, Bun) or `Deno.env` (Deno, needs `--allow-env`).
 * @param options The other {@link UpstashOptions}: `fetch`, `prefix` and `onFenceHealed`.
 * @returns The backend, as {@link upstash} makes it.
 * @throws {TypeError} When a variable is missing or invalid.
 *
 * @example In a Cloudflare Worker
 * ```ts
 * import { createMutex } from "leasehold";
 * import { fromEnv } from "leasehold/upstash";
 *
 * interface Env {
 *   UPSTASH_REDIS_REST_URL: string;
 *   UPSTASH_REDIS_REST_TOKEN: string;
 * }
 * declare function doWork(signal: AbortSignal): Promise<void>; // your job
 *
 * export default {
 *   async scheduled(_controller: ScheduledController, env: Env, ctx: ExecutionContext) {
 *     const lease = await createMutex(fromEnv(env), { name: "cron" }).tryAcquire();
 *     if (lease) ctx.waitUntil(doWork(lease.signal).finally(() => lease.release()));
 *   },
 * };
 * ```
 */
export function fromEnv(env?: UpstashEnv, options?: Omit<UpstashOptions, "url" | "token">): Backend {
  const read = env ? (name: string) => (env as Record<string, unknown>)[name] : readGlobalEnv;
  const url = read("UPSTASH_REDIS_REST_URL") || read("KV_REST_API_URL");
  const token = read("UPSTASH_REDIS_REST_TOKEN") || read("KV_REST_API_TOKEN");
  check(typeof url === "string" && url !== "", "[upstash]", "UPSTASH_REDIS_REST_URL is not set");
  check(typeof token === "string" && token !== "", "[upstash]", "UPSTASH_REDIS_REST_TOKEN is not set");
  return upstash({ ...options, url: url as string, token: token as string });
}

function readGlobalEnv(name: string): unknown {
  const g = globalThis as {
    process?: { env?: Record<string, string | undefined> };
    Deno?: { env?: { get(name: string): string | undefined } };
  };
  if (g.Deno?.env) return g.Deno.env.get(name);
  return g.process?.env?.[name];
}
