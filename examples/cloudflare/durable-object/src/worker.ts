// A Worker that keeps its own locks in Durable Objects (leasehold/cloudflare):
// - POST /rebuild: one site rebuild at a time, through the binding. Requests that arrive while a
//   rebuild runs wait in line (first come, first served) and each starts as soon as the one
//   before it releases, without polling. The rebuild hook gets the fencing token, so it can drop
//   a stale rebuild's writes.
// - POST /geocode: calls a rate-limited API (at most 3 calls at once, across every invocation and
//   isolate) through a semaphore whose permits live in the same Durable Objects; the 4th caller
//   waits for a permit.
// - /leasehold: the route for Node, Bun and Deno, which take the same locks with
//   durableObject({ url: "https://<worker>/leasehold", token }).
//
//   openssl rand -hex 32 | npx wrangler secret put LEASEHOLD_DO_SECRET
//   npx wrangler deploy
import { createMutex, createSemaphore } from "leasehold";
import { type DurableObjectNamespaceLike, durableObject, lockHandler } from "leasehold/cloudflare";

// The Durable Object class, exported by name as wrangler.toml's binding says.
export { LeaseholdLock } from "leasehold/cloudflare";

export interface Env {
  /** wrangler.toml [[durable_objects.bindings]] */
  LOCKS: DurableObjectNamespaceLike;
  /** The route's bearer secret (wrangler secret put). */
  LEASEHOLD_DO_SECRET: string;
  /** Where the rebuild is triggered (wrangler.toml [vars]). */
  REBUILD_HOOK: string;
  /** An API that allows 3 concurrent calls (wrangler.toml [vars]). */
  GEOCODER_URL: string;
}

/** The job: one POST carrying the fencing token; aborted if the lease is lost. */
async function rebuild(env: Env, signal: AbortSignal, token: number): Promise<string> {
  const res = await fetch(env.REBUILD_HOOK, {
    method: "POST",
    headers: { "x-fencing-token": String(token) },
    signal,
  });
  if (!res.ok) throw new Error(`rebuild hook: HTTP ${res.status}`);
  return res.text();
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const { pathname } = new URL(request.url);
    if (pathname === "/leasehold") return lockHandler(env.LOCKS, { token: env.LEASEHOLD_DO_SECRET })(request);
    if (pathname === "/rebuild" && request.method === "POST") {
      const mutex = createMutex(durableObject(env.LOCKS), { name: "site-rebuild", ttl: 30_000 });
      // Waits in line; released when the scope ends, so the next request's rebuild starts.
      await using lease = await mutex.acquire({ timeout: 25_000 });
      const result = await rebuild(env, lease.signal, lease.token);
      return Response.json({ token: lease.token, result });
    }
    if (pathname === "/geocode" && request.method === "POST") {
      const geocoder = createSemaphore(durableObject(env.LOCKS), {
        name: "geocoder",
        limit: 3,
        ttl: 30_000,
        retryDelay: 250,
      });
      // A permit for the call, released when it ends; the 4th concurrent caller waits for one.
      const body = await request.text();
      return geocoder.run(
        async (signal, permit) => {
          const res = await fetch(env.GEOCODER_URL, { method: "POST", body, signal });
          return Response.json({ slot: permit.slot, result: await res.text() }, { status: res.status });
        },
        { timeout: 25_000 },
      );
    }
    return new Response("not found", { status: 404 });
  },
};
