// The backend conformance suite (with its waiting checks) against the LeaseholdLock Durable
// Object in a real workerd (test/harness/setup/cloudflare.ts), both ways a user reaches it:
// - durableObject({ url, token }) from Node, through the Worker's lockHandler route;
// - durableObject(env.LOCKS) inside the Worker: each check runs in workerd (/conformance/<i>).
// A ttl of 3 s through the route (1 s in workerd; Upstash: 500 ms): every object write is a durable
// one, and the shared workerd serves the whole suite at once (and, in a full run, the cloudflare
// invariant test beside it: with 2 s, the winner of 100 concurrent acquires was once answered
// after its deadline), so an attempt gets the larger ttl − guard bound.
import { describe, expect, inject, it } from "vitest";
import type { FetchLike } from "../../../src/backend.ts";
import { durableObject } from "../../../src/backends/cloudflare/index.ts";
import { testBackend } from "../../../src/testing/index.ts";
import { bindingChecks } from "../../harness/cloudflare/worker.ts";

const { url, token, origin } = inject("cloudflare");

describe("through the route, from Node", () => {
  it("offers the waiting and acquireAny capabilities (so the checks of both below run)", () => {
    expect(typeof durableObject({ url, token }).acquireQueued).toBe("function");
    expect(typeof durableObject({ url, token }).acquireAny).toBe("function");
  });
  // Counts the acquireAny requests the checks send, to see that theirs ran.
  let anyRequests = 0;
  const fetchCounting: FetchLike = (u, init) => {
    if (init.body?.includes('"op":"acquireAny"')) anyRequests++;
    return fetch(u, init);
  };
  testBackend(
    { describe, it },
    {
      backend: () => durableObject({ url, token, fetch: fetchCounting }),
      ttl: 3_000,
      prefix: "conformance-url",
    },
  );
  it("the semaphore and acquireAny checks above took permits with acquireAny", () => {
    expect(anyRequests).toBeGreaterThanOrEqual(30);
  });
});

describe("through the binding, inside workerd", () => {
  const params = new URLSearchParams({ ttl: "1000", cycles: "200", contenders: "50" });
  for (const [i, check] of bindingChecks(null, params).entries()) {
    it(
      check.name,
      async () => {
        const res = await fetch(`${origin}/conformance/${i}?${params}`);
        const body = await res.text();
        expect(res.status, body).toBe(200);
        expect(body).toBe("ok");
      },
      check.timeout,
    );
  }
});
