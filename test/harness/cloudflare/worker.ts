// The Worker the tests and benchmarks run in workerd (test/harness/servers/workerd-locks.ts): it
// exports LeaseholdLock, as a user's Worker does, and serves
// - /leasehold: lockHandler, the route of durableObject({ url, token }) (LEASEHOLD_DO_SECRET);
// - /conformance/<i>?cycles=&contenders=: the i-th conformance check through the binding,
//   durableObject(env.LOCKS), run inside workerd (200 "ok", or 500 with the failure);
// - /bench/<op>?n=: n acquire/renew/release cycles through the binding, timed inside workerd;
// - /semaphore?limit=: a semaphore's permit taken, renewed, listed and released through the
//   binding, counting the requests (stub fetches) and recording the objects they went to;
// - /object/<name>: the request passed on as it came, its body still streaming, to the object of
//   that name (lockHandler sends the object only a body it has read): the object's own body cap;
// - /exhausted: lockHandler over ExhaustedLock (exhausted.ts, bound as EXHAUSTED), whose objects
//   start with fence counters one below Number.MAX_SAFE_INTEGER;
// - /listed: lockHandler over ListedLock (listed.ts, bound as LISTED), and /listed/<name> every
//   entry the object of that name stores.
// Built from the sources by esbuild (target es2022 lowers `await using`).

import type { DurableObjectNamespaceLike } from "../../../src/backends/cloudflare/index.ts";
import { durableObject, lockHandler } from "../../../src/backends/cloudflare/index.ts";
import { createSemaphore } from "../../../src/semaphore.ts";
import { conformanceChecks } from "../../../src/testing/index.ts";

export { LeaseholdLock } from "../../../src/backends/cloudflare/index.ts";
export { ExhaustedLock } from "./exhausted.ts";
export { ListedLock } from "./listed.ts";

interface Env {
  LOCKS: DurableObjectNamespaceLike;
  EXHAUSTED: DurableObjectNamespaceLike;
  LISTED: DurableObjectNamespaceLike;
  LEASEHOLD_DO_SECRET: string;
}

/**
 * With every slot but the last held, one permit taken through a namespace that counts its stub
 * fetches, then renewed, listed and released: the requests and the object names of each step.
 */
async function semaphoreRequests(env: Env, limit: number) {
  const name = `sem-binding-${crypto.randomUUID()}`;
  let requests = 0;
  const objects = new Set<string>();
  const counted: DurableObjectNamespaceLike = {
    idFromName(n) {
      objects.add(n);
      return env.LOCKS.idFromName(n);
    },
    get(id) {
      const stub = env.LOCKS.get(id);
      return {
        fetch(url, init) {
          requests++;
          return stub.fetch(url, init);
        },
      };
    },
  };
  const options = { name, limit, ttl: 10_000 };
  const filler = createSemaphore(durableObject(env.LOCKS), options);
  const held = [];
  for (let i = 0; i < limit - 1; i++) held.push(await filler.tryAcquire());
  const sem = createSemaphore(durableObject(counted), options);
  const step = async (f: () => Promise<unknown>) => {
    requests = 0;
    objects.clear();
    const value = await f();
    return { requests, objects: [...objects], value };
  };
  const permit = await sem.tryAcquire();
  const steps = {
    acquire: { requests, objects: [...objects], slot: permit?.slot },
    full: await step(() => sem.tryAcquire()),
    renew: await step(() => permit!.renew()),
    holders: await step(async () => (await sem.holders()).length),
    release: await step(() => permit!.release()),
  };
  await Promise.all(held.map((p) => p?.release()));
  return { name, ...steps };
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
    if (url.pathname === "/leasehold")
      return lockHandler(env.LOCKS, { token: env.LEASEHOLD_DO_SECRET })(request);
    if (url.pathname === "/exhausted")
      return lockHandler(env.EXHAUSTED, { token: env.LEASEHOLD_DO_SECRET })(request);
    if (url.pathname === "/listed")
      return lockHandler(env.LISTED, { token: env.LEASEHOLD_DO_SECRET })(request);
    const listed = /^\/listed\/(.+)$/.exec(url.pathname);
    if (listed) {
      const id = env.LISTED.idFromName(decodeURIComponent(listed[1]!)) as never;
      return env.LISTED.get(id).fetch("https://leasehold.internal/", { method: "GET", headers: {} }) as never;
    }
    if (url.pathname === "/semaphore")
      return Response.json(await semaphoreRequests(env, Number(url.searchParams.get("limit"))));
    const object = /^\/object\/(.+)$/.exec(url.pathname);
    if (object) {
      const stub = env.LOCKS.get(env.LOCKS.idFromName(object[1]!) as never) as unknown as {
        fetch(request: Request): Promise<Response>;
      };
      return stub.fetch(request);
    }
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
