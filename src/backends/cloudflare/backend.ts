// durableObject(): the Backend, through a namespace binding (inside a Worker) or a Worker route
// (lockHandler) from anywhere fetch runs.
import type {
  AcquireRequest,
  AcquireResult,
  Backend,
  FetchLike,
  HolderInfo,
  RenewRequest,
} from "../../backend.ts";
import { BackendError, fenceExhausted } from "../../errors.ts";
import { check } from "../../options.ts";
import { malformed as malformedReply } from "../shared/errors.ts";
import { sendJson } from "../shared/http.ts";
import { fetchOption, httpUrl, retryableStatus } from "../shared/options.ts";
import { redact } from "../shared/redact.ts";
import { EXHAUSTED, type LockRequest, MAX_RAISE, NAME, objectOf, type Replies, slotsOf } from "./protocol.ts";

/** A Durable Object stub's `fetch`, as leasehold calls it. */
export interface DurableObjectStubLike {
  /** Sends a request to the object. */
  fetch(url: string, init: Parameters<FetchLike>[1]): ReturnType<FetchLike>;
}

/**
 * The part of a `DurableObjectNamespace` binding that leasehold uses (wrangler.toml
 * `[[durable_objects.bindings]]`, class {@link LeaseholdLock}).
 */
export interface DurableObjectNamespaceLike {
  /** The id of the object named `name`. */
  idFromName(name: string): unknown;
  /** The stub of the object with `id`. */
  get(id: never): DurableObjectStubLike;
}

/** Options of {@link durableObject} from outside a Worker: the route that `lockHandler` serves. */
export interface DurableObjectUrlOptions {
  /** The route's URL, such as `https://my-worker.example.workers.dev/leasehold`. */
  url: string;
  /** The bearer secret that the route's `lockHandler` was given (16 characters or more). */
  token: string;
  /** The `fetch` to use. Default: the global `fetch`. */
  fetch?: FetchLike;
}

const WHERE = `[${NAME}]`;

/**
 * The operations added after the first object, and what came with them: an object (or route) from
 * before refuses them as unknown (HTTP 400, its message listing the operations it knows).
 */
const ADDED: Partial<Record<LockRequest["op"], string>> = {
  complete: "complete (runOnce)",
  acquireShared: 'shared mode (mode: "shared")',
  renewShared: 'shared mode (mode: "shared")',
  releaseShared: 'shared mode (mode: "shared")',
};

/** Whether `v` looks like a namespace binding rather than options. */
function isNamespace(v: unknown): v is DurableObjectNamespaceLike {
  return (
    typeof v === "object" &&
    v !== null &&
    typeof (v as DurableObjectNamespaceLike).idFromName === "function" &&
    typeof (v as DurableObjectNamespaceLike).get === "function"
  );
}

/** The bearer token of the route; checked the same way by {@link durableObject} and lockHandler. */
export function checkToken(token: unknown, option: string): asserts token is string {
  check(
    typeof token === "string" && token.length >= 16,
    WHERE,
    `${option} must be a string of 16 characters or more (a random secret, such as the output of \`openssl rand -hex 32\`)`,
  );
  // A token that is not a valid header value would make fetch throw with the value in its message.
  check(
    /^[\x21-\x7e]+$/.test(token),
    WHERE,
    `${option} contains characters that are not allowed in a header`,
  );
}

/**
 * Creates the Durable Object backend for {@link createMutex}. Inside a Worker, pass the namespace
 * binding of {@link LeaseholdLock}; from Node, Bun, Deno (or another Worker), pass the URL and
 * bearer token of a route that serves `lockHandler`. Either way one request per operation, and
 * `acquire()` waits in line: first come, first served, woken on release.
 *
 * @param target The namespace binding (`env.LOCKS`), or `{ url, token, fetch? }`.
 * @returns A backend named `"cloudflare"` with `acquireQueued`, `acquireAny` and `releaseAny` (a
 *   semaphore's acquire, and the give-back of one that got no answer, are one request whatever its
 *   limit), `raiseFence`, `complete` (runOnce: a fire's record, in the object of its mutex's
 *   name), and `acquireShared`, `renewShared`, `releaseShared` (shared mode: readers wait in the
 *   same line as writers, first come first served across both modes).
 * @throws {TypeError} When `target` is neither, the URL is not http(s), or the token is shorter
 *   than 16 characters or not a header value. The token is never part of a message.
 *
 * @example Inside a Worker, through the binding
 * ```ts
 * import { createMutex } from "leasehold";
 * import { durableObject, type DurableObjectNamespaceLike } from "leasehold/cloudflare";
 *
 * declare const env: { LOCKS: DurableObjectNamespaceLike }; // your Worker's env
 *
 * const mutex = createMutex(durableObject(env.LOCKS), { name: "nightly-report" });
 * await using lease = await mutex.acquire({ timeout: 10_000 });
 * ```
 *
 * @example From Node, Bun or Deno, through the Worker's route
 * ```ts
 * import { createMutex } from "leasehold";
 * import { durableObject } from "leasehold/cloudflare";
 *
 * const backend = durableObject({ url: "https://locks.example.workers.dev/leasehold", token: "…a 32-byte secret…" });
 * await using lease = await createMutex(backend, { name: "nightly-report" }).acquire();
 * ```
 */
export function durableObject(target: DurableObjectNamespaceLike | DurableObjectUrlOptions): Backend {
  /** The `fetch` that reaches the object named `name`. */
  let fetchTo: (name: string) => FetchLike;
  let url: string;
  let headers: Record<string, string>;
  let secrets: string[];
  if (isNamespace(target)) {
    const ns = target;
    // One stub per call.
    fetchTo = (name) => (u, init) => ns.get(ns.idFromName(name) as never).fetch(u, init);
    url = "https://leasehold.internal/";
    headers = { "content-type": "application/json" };
    secrets = [];
  } else {
    check(
      typeof target === "object" && target !== null,
      WHERE,
      "durableObject() takes a Durable Object namespace binding (env.LOCKS) or { url, token }",
    );
    const { token } = target;
    check(
      typeof target.url === "string" && target.url !== "",
      WHERE,
      "option url is required: the route of lockHandler",
    );
    url = httpUrl(WHERE, "option url", target.url).href;
    checkToken(token, "option token");
    // The route finds the object itself.
    const fetchFn = fetchOption(WHERE, target.fetch);
    fetchTo = () => fetchFn;
    headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
    secrets = [token];
  }

  async function call<K extends LockRequest["op"]>(
    r: Extract<LockRequest, { op: K }>,
    signal: AbortSignal | undefined,
  ): Promise<Replies[K]> {
    const { status, json: body } = await sendJson(
      NAME,
      fetchTo(objectOf(r)),
      url,
      { method: "POST", headers, body: JSON.stringify(r), signal },
      secrets,
    );
    // The lock's fence counter can grant no more: the object answers 409 with `exhausted: true`,
    // and the key when it knows it (a 409 from anything else, such as a proxy, is an ordinary
    // refused request below).
    const refusal = body as { exhausted?: unknown; key?: unknown } | null;
    if (
      status === EXHAUSTED &&
      refusal?.exhausted === true &&
      (r.op === "acquire" || r.op === "acquireShared" || r.op === "acquireAny")
    )
      throw fenceExhausted(NAME, typeof refusal.key === "string" ? refusal.key : "key" in r ? r.key : r.name);
    if (status !== 200) {
      let error =
        typeof (body as { error?: unknown })?.error === "string" ? (body as { error: string }).error : "";
      // An object (or route) from before the operation does not know it: say what to do. (A newer
      // one names the operation in its message when the request is malformed.)
      const added = ADDED[r.op];
      if (status === 400 && added && !error.includes(r.op))
        error = `the Worker's LeaseholdLock or lockHandler predates ${added}; redeploy the Worker with this leasehold version (${error})`;
      throw new BackendError(`HTTP ${status}${error ? `: ${redact(error, secrets).slice(0, 300)}` : ""}`, {
        backend: NAME,
        status,
        retryable: retryableStatus(status),
      });
    }
    return body as Replies[K];
  }

  const malformed = (value: unknown): BackendError =>
    malformedReply(NAME, value, (text) => redact(text, secrets), 200);

  function acquired(r: Replies["acquire"]): AcquireResult {
    // A token past the safe range (an object from before MAX_RAISE) is passed on: the core
    // refuses it as an exhausted fence counter, non-retryable, and gives the lock back.
    if (r?.ok === true && Number.isInteger(r.token) && r.token > 0) return { ok: true, token: r.token };
    if (r?.ok === false && "retryAfter" in r && typeof r.retryAfter === "number" && r.retryAfter >= 0)
      return { ok: false, retryAfter: r.retryAfter };
    // A completed fire's record (runOnce).
    const done = r?.ok === false && "done" in r ? r.done : undefined;
    if (typeof done?.owner === "string" && Number.isSafeInteger(done.token) && done.token > 0)
      return { ok: false, done: { owner: done.owner, token: done.token } };
    throw malformed(r);
  }

  async function releaseKey(key: string, nonce: string, signal: AbortSignal | undefined): Promise<void> {
    const r = await call({ op: "release", key, nonce }, signal);
    if (r?.ok !== true) throw malformed(r);
  }

  async function renewed(op: "renew" | "renewShared", r: RenewRequest): Promise<boolean> {
    const { key, nonce, ttl, signal } = r;
    const reply = await call({ op, key, nonce, ttl: Math.ceil(ttl) }, signal);
    if (typeof reply?.ok !== "boolean") throw malformed(reply);
    return reply.ok;
  }

  /** An acquire in `op`'s mode; in line when `waiter` and `hold` are given (acquireQueued). */
  async function acquireIn(
    op: "acquire" | "acquireShared",
    { key, owner, nonce, ttl, waiter, hold, signal }: AcquireRequest & { hold?: number },
  ): Promise<AcquireResult> {
    const queued =
      waiter !== undefined && hold !== undefined ? { waiter, hold: Math.max(0, Math.floor(hold)) } : {};
    return acquired(await call({ op, key, owner, nonce, ttl: Math.ceil(ttl), ...queued }, signal));
  }

  return {
    name: NAME,
    // A plain acquire never joins the line: the waiter id goes only with a hold (acquireQueued).
    acquire: ({ waiter: _, ...r }) => acquireIn("acquire", r),
    acquireQueued: (r) => acquireIn("acquire", r),
    async acquireAny({ keys, owner, nonce, ttl, signal }) {
      const one = slotsOf(keys);
      if (!one) {
        // Not the slots of one semaphore, so not in one object: an acquire per key, in order.
        let retryAfter: number | undefined;
        for (const [index, key] of keys.entries()) {
          const r = acquired(await call({ op: "acquire", key, owner, nonce, ttl: Math.ceil(ttl) }, signal));
          if (r.ok) return { ok: true, token: r.token, index };
          // A completed fire's record counts as taken, with no time to wait for.
          if (r.retryAfter !== undefined) retryAfter = Math.min(retryAfter ?? r.retryAfter, r.retryAfter);
        }
        return retryAfter === undefined ? { ok: false } : { ok: false, retryAfter };
      }
      const r = await call({ op: "acquireAny", ...one, owner, nonce, ttl: Math.ceil(ttl) }, signal);
      // An acquire's reply, and on a grant the index of the slot taken.
      const a = acquired(r);
      if (!a.ok) return a;
      const { index } = r as { index?: unknown };
      if (Number.isSafeInteger(index) && (index as number) >= 0 && (index as number) < keys.length)
        return { ok: true, token: a.token, index: index as number };
      throw malformed(r);
    },
    renew: (r) => renewed("renew", r),
    release: ({ key, nonce, signal }) => releaseKey(key, nonce, signal),
    async releaseAny({ keys, nonce, signal }) {
      const one = slotsOf(keys);
      // Not the slots of one semaphore, so not in one object: a release per key.
      if (!one) {
        await Promise.all(keys.map((key) => releaseKey(key, nonce, signal)));
        return;
      }
      const r = await call({ op: "releaseAny", ...one, nonce }, signal);
      if (r?.ok !== true) throw malformed(r);
    },
    async raiseFence({ key, nonce, token, signal }) {
      check(Number.isSafeInteger(token) && token > 0, WHERE, "token must be a positive integer");
      check(
        token <= MAX_RAISE,
        WHERE,
        `token must be at most ${MAX_RAISE} (2^52): the Durable Object refuses a higher raise, so that no sequence of requests can exhaust a lock's fence counter`,
        RangeError,
      );
      const r = await call({ op: "raise", key, nonce, token }, signal);
      if (typeof r?.ok !== "boolean") throw malformed(r);
      return r.ok;
    },
    async inspect({ key, signal }): Promise<HolderInfo | null> {
      const r = await call({ op: "inspect", key }, signal);
      if (!r || typeof r !== "object" || !Number.isSafeInteger(r.waiters)) throw malformed(r);
      const h = r.holder;
      if (h === null) return null;
      if (typeof h?.owner !== "string" || !Number.isSafeInteger(h.token) || typeof h.ttlLeft !== "number")
        throw malformed(r);
      const info: HolderInfo = { owner: h.owner, token: h.token, ttlLeft: h.ttlLeft, waiters: r.waiters };
      if (h.readers !== undefined && !(Number.isSafeInteger(h.readers) && h.readers > 0)) throw malformed(r);
      return h.done === true ? { ...info, done: true } : h.readers ? { ...info, readers: h.readers } : info;
    },
    async complete({ key, nonce, retain, signal }) {
      const r = await call({ op: "complete", key, nonce, retain }, signal);
      if (typeof r?.ok !== "boolean") throw malformed(r);
      return r.ok;
    },
    // Shared mode (docs/DESIGN.md §18): a waiting reader's attempts carry its waiter id and a hold,
    // as acquireQueued's do, so it waits in the object's line with the writers.
    acquireShared: (r) => acquireIn("acquireShared", r),
    renewShared: (r) => renewed("renewShared", r),
    async releaseShared({ key, nonce, signal }) {
      const r = await call({ op: "releaseShared", key, nonce }, signal);
      if (r?.ok !== true) throw malformed(r);
    },
  };
}
