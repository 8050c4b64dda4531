// lockHandler: the Worker route that lets durableObject({ url, token }) reach the objects.
import { check } from "../../options.ts";
import { checkToken, type DurableObjectNamespaceLike } from "./backend.ts";
import { json, NAME, objectOf, parseRequest, readRequest } from "./protocol.ts";

/** Options of {@link lockHandler}. */
export interface LockHandlerOptions {
  /**
   * The bearer secret clients must send (`durableObject({ url, token })`): 16 characters or more,
   * kept as a Worker secret (`wrangler secret put LEASEHOLD_DO_SECRET`).
   */
  token: string;
}

const encoder = new TextEncoder();
const digest = async (text: string): Promise<Uint8Array> =>
  new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text)));

/**
 * Whether `given` equals the digest `expected` of the right header, in time that does not depend
 * on where they differ nor on the secret's length: both sides are hashed to 32 bytes, and every
 * byte is compared.
 */
async function sameSecret(expected: Promise<Uint8Array>, given: string): Promise<boolean> {
  const [a, b] = await Promise.all([expected, digest(given)]);
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

/**
 * The request handler of the route that {@link durableObject} `({ url, token })` talks to:
 * checks the bearer token in constant time (a wrong or missing one is HTTP 401, which the
 * backend reports as `ERR_BACKEND_AUTH`), then forwards the operation to the lock's object
 * (`namespace.idFromName(name)`; a semaphore's slots are all in the object of its name). Mount it on a path of your Worker's `fetch`.
 *
 * @param namespace The namespace binding of {@link LeaseholdLock} (`env.LOCKS`).
 * @param options The bearer `token`.
 * @returns `(request) => Promise<Response>`.
 * @throws {TypeError} When `namespace` is not a namespace binding or `token` is not a string of
 *   16 characters or more that a header can carry. The token is never part of a message.
 *
 * @example A Worker that serves the route on /leasehold
 * ```ts
 * import { type DurableObjectNamespaceLike, lockHandler } from "leasehold/cloudflare";
 * export { LeaseholdLock } from "leasehold/cloudflare";
 *
 * interface Env {
 *   LOCKS: DurableObjectNamespaceLike;
 *   LEASEHOLD_DO_SECRET: string;
 * }
 *
 * export default {
 *   fetch(request: Request, env: Env): Promise<Response> | Response {
 *     if (new URL(request.url).pathname === "/leasehold")
 *       return lockHandler(env.LOCKS, { token: env.LEASEHOLD_DO_SECRET })(request);
 *     return new Response("not found", { status: 404 });
 *   },
 * };
 * ```
 */
export function lockHandler(
  namespace: DurableObjectNamespaceLike,
  options: LockHandlerOptions,
): (request: Request) => Promise<Response> {
  check(
    typeof namespace?.idFromName === "function" && typeof namespace.get === "function",
    `[${NAME}]`,
    "lockHandler() needs the Durable Object namespace binding of LeaseholdLock (env.LOCKS)",
  );
  const token = options?.token;
  checkToken(token, "option token");
  const expected = digest(`Bearer ${token}`);
  return async (request) => {
    if (!(await sameSecret(expected, request.headers.get("authorization") ?? ""))) {
      return json({ error: "unauthorized: a wrong or missing bearer token" }, 401);
    }
    if (request.method !== "POST") return json({ error: "POST only" }, 405);
    const body = await readRequest(request);
    if (body === undefined) return json({ error: "request too large" }, 413);
    const r = parseRequest(body);
    if (typeof r === "string") return json({ error: r }, 400);
    const stub = namespace.get(namespace.idFromName(objectOf(r)) as never);
    const reply = await stub.fetch("https://leasehold.internal/", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    return reply as Response;
  };
}
