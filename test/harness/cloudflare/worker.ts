// The Worker the tests and benchmarks run in workerd (test/harness/servers/workerd-locks.ts): it
// exports LeaseholdLock, as a user's Worker does, and serves
// - /leasehold: lockHandler, the route of durableObject({ url, token }) (LEASEHOLD_TOKEN);
// - /conformance/<i>?cycles=&contenders=: the i-th conformance check through the binding,
//   durableObject(env.LOCKS), run inside workerd (200 "ok", or 500 with the failure);
// - /bench/<op>?n=: n acquire/renew/release cycles through the binding, timed inside workerd.
// Built from the sources by esbuild (target es2022 lowers `await using`).

import type { DurableObjectNamespaceLike } from "../../../src/backends/cloudflare/index.ts";
import { durableObject, lockHandler } from "../../../src/backends/cloudflare/index.ts";
import { conformanceChecks } from "../../../src/testing.ts";

export { LeaseholdLock } from "../../../src/backends/cloudflare/index.ts";

interface Env {
  LOCKS: DurableObjectNamespaceLike;
  LEASEHOLD_TOKEN: string;
}

/** The checks as the test lists them: the same options give the same list. */
export function bindingChecks(env: Env | null, search: URLSearchParams) {
  return conformanceChecks({
    backend: () => durableObject(env!.LOCKS),
    ttl: Number(search.get("ttl") ?? 1_000),
    cycles: Number(search.get("cycles") ?? 500),
    contenders: Number(search.get("contenders") ?? 100),
    prefix: "conformance-binding",
  });
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/leasehold") return lockHandler(env.LOCKS, { token: env.LEASEHOLD_TOKEN })(request);
    const m = /^\/conformance\/(\d+)$/.exec(url.pathname);
    if (m) {
      const check = bindingChecks(env, url.searchParams)[Number(m[1])];
      if (!check) return new Response("no such check", { status: 404 });
      try {
        await check.run();
        return new Response("ok");
      } catch (error) {
        return new Response((error as Error).stack ?? String(error), { status: 500 });
      }
    }
    return new Response("not found", { status: 404 });
  },
};
