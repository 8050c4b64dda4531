// Shared mode (readers and writers, docs/DESIGN.md §18) on the LeaseholdLock Durable Object in a
// real workerd (Miniflare, test/harness/setup/cloudflare.ts; for the restart test a worker of its
// own with a persistence directory): one line first come first served across both modes, readers
// woken by the hand-over as writers are, one request per operation, readers kept across a restart,
// and the error of a Worker from before shared mode. The conformance suite's shared checks run in
// conformance.test.ts. Lock names are unique per test.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, inject, it } from "vitest";
import type { FetchLike } from "../../../src/backend.ts";
import { durableObject } from "../../../src/backends/cloudflare/index.ts";
import { BackendError, createMutex, type Lease, type LockMode } from "../../../src/index.ts";
import { registerSecret } from "../../harness/secrets.ts";
import { startLockWorker } from "../../harness/servers/workerd-locks.ts";

const ctx = inject("cloudflare");
const backend = durableObject({ url: ctx.url, token: ctx.token });
const unique = () => `shared-${crypto.randomUUID()}`;
const nonce = () => crypto.randomUUID();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const shared = { mode: "shared" } as const;

/** Resolves once the object reports `n` waiters in the line of `name` (at most 10 s). */
async function waiters(name: string, n: number): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (((await backend.inspect({ key: name }))?.waiters ?? 0) >= n) return;
    await sleep(20);
  }
  throw new Error(`the line of ${name} never reached ${n} waiter(s)`);
}

/**
 * Waiting acquires on `name`, each pushing its owner to `order` when served. A retryDelay of a
 * minute: a waiter served sooner was handed the lock by the object, not polling. A ttl of 40 s:
 * each held request lasts 10 s (ttl / 4, at most 10 s), so one served within 5 s was served by
 * the object within its held request, not by a later attempt.
 */
function line(name: string) {
  const order: string[] = [];
  const served = new Map<string, number>();
  const make = (owner: string) => createMutex(backend, { name, owner, ttl: 40_000, retryDelay: 60_000 });
  const wait = (owner: string, mode: LockMode): Promise<Lease> =>
    make(owner)
      .acquire({ mode, timeout: 30_000 })
      .then((lease) => {
        order.push(owner);
        served.set(owner, performance.now());
        return lease;
      });
  return { order, served, make, wait };
}

describe("the line: first come, first served across both modes", () => {
  it("reader, writer, reader arrive in that order while a reader holds: the first reader is served at once, the second after the writer", async () => {
    const name = unique();
    const { order, served, make, wait } = line(name);
    const r0 = await make("r0").acquire(shared);
    const r1 = await wait("r1", "shared"); // readers share: no line
    const writing = wait("w", "exclusive");
    await waiters(name, 1);
    const reading = wait("r2", "shared");
    await waiters(name, 2);
    await sleep(200);
    expect(order).toEqual(["r1"]);
    await r0.release();
    await sleep(200);
    // r1 still reads: the writer waits, and r2 behind it although only readers hold.
    expect(order).toEqual(["r1"]);
    await r1.release();
    const w = await writing;
    await sleep(200);
    expect(order).toEqual(["r1", "w"]);
    const released = performance.now();
    await w.release();
    const r2 = await reading;
    expect(order).toEqual(["r1", "w", "r2"]);
    // Handed over by the object (within its held request), not after the minute of retryDelay.
    expect(served.get("r2")! - released).toBeLessThan(5_000);
    expect([r0.token < r1.token, r1.token < w.token, w.token < r2.token]).toEqual([true, true, true]);
    await r2.release();
    expect(await backend.inspect({ key: name })).toBeNull();
  }, 60_000);

  it("a reader at the head is served together with the readers right behind it, up to the next writer; the reader behind that writer waits for it", async () => {
    const name = unique();
    const { order, served, make, wait } = line(name);
    const holder = await make("holder").acquire();
    const arrivals: [string, LockMode][] = [
      ["r1", "shared"],
      ["r2", "shared"],
      ["r3", "shared"],
      ["w4", "exclusive"],
      ["r5", "shared"],
    ];
    const leases = new Map<string, Promise<Lease>>();
    for (const [i, [owner, mode]] of arrivals.entries()) {
      leases.set(owner, wait(owner, mode));
      await waiters(name, i + 1);
    }
    const released = performance.now();
    await holder.release();
    const readers = await Promise.all(["r1", "r2", "r3"].map((owner) => leases.get(owner)!));
    for (const owner of ["r1", "r2", "r3"]) expect(served.get(owner)! - released).toBeLessThan(5_000);
    expect(await backend.inspect({ key: name })).toMatchObject({ readers: 3, waiters: 2 });
    await sleep(200);
    expect(order.slice(3)).toEqual([]);
    await Promise.all(readers.slice(0, 2).map((lease) => lease.release()));
    await sleep(200);
    expect(order.slice(3)).toEqual([]);
    await readers[2]!.release();
    const w4 = await leases.get("w4")!;
    await sleep(200);
    expect(order.slice(3)).toEqual(["w4"]);
    await w4.release();
    const r5 = await leases.get("r5")!;
    expect(order.slice(3)).toEqual(["w4", "r5"]);
    const tokens = [holder, ...readers, w4, r5].map((lease) => lease.token);
    expect(Math.max(...tokens.slice(1, 4))).toBeLessThan(w4.token);
    expect(tokens.slice(1, 4).every((t) => t > holder.token)).toBe(true);
    expect(r5.token).toBeGreaterThan(w4.token);
    await r5.release();
  }, 60_000);

  it("a reader that never renews expires at its ttl and a writer in line is woken then, without polling", async () => {
    const name = unique();
    const ttl = 1_000;
    const sent = performance.now();
    const crashed = await backend.acquireShared!({ key: name, owner: "crashed", nonce: nonce(), ttl });
    expect(crashed.ok).toBe(true);
    // A ttl of 40 s: the writer's request is held for 10 s, so only the object's wake-up at the
    // reader's expiry can serve it sooner (its retryDelay is a minute).
    const w = await createMutex(backend, { name, owner: "w", ttl: 40_000, retryDelay: 60_000 }).acquire({
      timeout: 30_000,
    });
    const after = performance.now() - sent;
    expect(after).toBeGreaterThanOrEqual(ttl);
    expect(after).toBeLessThan(ttl + 5_000);
    expect(w.token).toBeGreaterThan((crashed as { token: number }).token);
    await w.release();
  }, 60_000);
});

describe("requests", () => {
  it("acquireShared, renewShared, releaseShared and inspect are one request each; a waiting reader is woken within its one request; one that gives up leaves the line", async () => {
    const ops: string[] = [];
    const counted = durableObject({
      url: ctx.url,
      token: ctx.token,
      fetch: ((url, init) => {
        ops.push((JSON.parse(init.body!) as { op: string }).op);
        return fetch(url, init);
      }) satisfies FetchLike,
    });
    const name = unique();
    const make = (owner: string) =>
      createMutex(counted, { name, owner, ttl: 20_000, retryDelay: 60_000, renew: false });
    const step = async <T>(f: () => Promise<T>): Promise<[T, string[]]> => {
      ops.length = 0;
      const value = await f();
      return [value, [...ops]];
    };
    const [reader, acquired] = await step(() => make("r").tryAcquire(shared));
    expect(reader).not.toBeNull();
    expect(acquired).toEqual(["acquireShared"]);
    expect((await step(() => reader!.renew()))[1]).toEqual(["renewShared"]);
    const [info, inspected] = await step(() => counted.inspect({ key: name }));
    expect([info?.readers, inspected]).toEqual([1, ["inspect"]]);
    expect((await step(() => reader!.release()))[1]).toEqual(["releaseShared"]);
    // Refused beside a writer: one request.
    const writer = (await make("w").tryAcquire())!;
    expect(await step(() => make("r").tryAcquire(shared))).toEqual([null, ["acquireShared"]]);
    // A waiting reader, woken by the writer's release within its one held request.
    ops.length = 0;
    const waiting = make("r").acquire({ ...shared, timeout: 30_000 });
    await waiters(name, 1);
    await writer.release();
    const woken = await waiting;
    expect(ops.filter((op) => op === "acquireShared")).toEqual(["acquireShared"]);
    // A reader that gives up between two attempts (aborted at its first "not yet", after its held
    // request of 1 s) takes itself out of the line at once, by its waiter id: not after the second
    // it would otherwise keep its place.
    await woken.release();
    const w = (await make("w").tryAcquire())!;
    const stop = new AbortController();
    // Resolves with the reply to the quitter's releaseShared, once it is sent.
    let unmark = (_: Promise<Response>): void => {};
    const unmarked = new Promise<Response>((resolve) => {
      unmark = resolve;
    });
    const quitter = createMutex(
      durableObject({
        url: ctx.url,
        token: ctx.token,
        fetch: ((url, init) => {
          const reply = fetch(url, init);
          if (init.body!.includes('"op":"releaseShared"')) unmark(reply);
          return reply;
        }) satisfies FetchLike,
      }),
      {
        name,
        ttl: 4_000,
        onEvent: (event) => {
          if (event.type === "attempt" && event.outcome === "taken") stop.abort(new Error("gave up"));
        },
      },
    );
    await expect(quitter.acquire({ ...shared, signal: stop.signal })).rejects.toThrow("gave up");
    await unmarked; // answered: the object has applied it
    expect((await counted.inspect({ key: name }))?.waiters).toBe(0);
    await w.release();
  }, 60_000);
});

it("keeps the readers and their fence across a restart of workerd (persisted storage), each renewing and releasing on its own", async () => {
  const dir = mkdtempSync(join(tmpdir(), "leasehold-do-shared-"));
  const token = `persist-${crypto.randomUUID()}`;
  registerSecret(token);
  let worker = await startLockWorker({ token, persist: dir });
  try {
    const key = unique();
    const a = durableObject({ url: worker.url, token });
    const [first, second] = [nonce(), nonce()];
    const r1 = await a.acquireShared!({ key, owner: "r1", nonce: first, ttl: 60_000 });
    const r2 = await a.acquireShared!({ key, owner: "r2", nonce: second, ttl: 60_000 });
    expect([r1.ok, r2.ok]).toEqual([true, true]);
    const newest = (r2 as { token: number }).token;
    await worker.stop();
    worker = await startLockWorker({ token, persist: dir });
    const b = durableObject({ url: worker.url, token });
    expect(await b.inspect({ key })).toMatchObject({ owner: "r2", token: newest, readers: 2 });
    const refused = await b.acquire({ key, owner: "w", nonce: nonce(), ttl: 1_000 });
    expect(refused.ok === false && refused.retryAfter).toBeGreaterThan(50_000);
    expect(await b.renewShared!({ key, nonce: first, ttl: 60_000 })).toBe(true);
    await b.releaseShared!({ key, nonce: second });
    expect(await b.inspect({ key })).toMatchObject({ owner: "r1", readers: 1 });
    expect((await b.acquire({ key, owner: "w", nonce: nonce(), ttl: 1_000 })).ok).toBe(false);
    await b.releaseShared!({ key, nonce: first });
    const w = await b.acquire({ key, owner: "w", nonce: nonce(), ttl: 1_000 });
    expect(w.ok && w.token).toBeGreaterThan(newest);
  } finally {
    await worker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);

describe("a Worker from before shared mode", () => {
  it("a malformed shared request is an ordinary 400 naming the operation, not taken for an old Worker", async () => {
    const error = await backend.acquireShared!({
      key: unique(),
      owner: "",
      nonce: nonce(),
      ttl: 1_000,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BackendError);
    expect((error as Error).message).toContain("acquireShared needs nonce, owner and ttl > 0");
    expect((error as Error).message).not.toContain("predates");
  });

  it("its answer to a shared operation (an unknown op: 400) is a clear, non-retryable error naming the redeploy; mode shared fails at once, never an exclusive grant", async () => {
    // What the object and the route answer to an operation they do not know: this object's own
    // answer, of the shape every version gives (parseRequest).
    const res = await fetch(ctx.url, {
      method: "POST",
      headers: { authorization: `Bearer ${ctx.token}` },
      body: JSON.stringify({ op: "acquireExclusively", key: "k" }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toMatch(/^op must be acquire, /);
    // A double of a Worker from before shared mode: its route's and object's 400, word for word
    // (compared once with the real object and route of the commit before shared mode, built from
    // git history and run in workerd; the suite does not depend on the history being there).
    let requests = 0;
    const old = durableObject({
      url: ctx.url,
      token: ctx.token,
      fetch: async (u, init) => {
        requests++;
        const { op } = JSON.parse(init.body!) as { op: string };
        if (!op.endsWith("Shared")) return fetch(u, init);
        return new Response(
          JSON.stringify({
            error: "op must be acquire, acquireAny, renew, release, releaseAny, inspect, raise or complete",
          }),
          { status: 400 },
        );
      },
    });
    for (const call of [
      () => old.acquireShared!({ key: "k", owner: "o", nonce: nonce(), ttl: 1_000 }),
      () => old.renewShared!({ key: "k", nonce: nonce(), ttl: 1_000 }),
      () => old.releaseShared!({ key: "k", nonce: nonce() }),
    ]) {
      const error = await call().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(BackendError);
      expect(error).toMatchObject({ retryable: false, status: 400 });
      expect((error as Error).message).toContain(
        `predates shared mode (mode: "shared"); redeploy the Worker with this leasehold version`,
      );
    }
    const name = unique();
    const mutex = createMutex(old, { name, ttl: 5_000 });
    requests = 0;
    await expect(mutex.tryAcquire(shared)).rejects.toThrow(/predates shared mode/);
    // acquire() does not retry it until its timeout: one request, then the error.
    const started = performance.now();
    await expect(mutex.acquire({ ...shared, timeout: 20_000 })).rejects.toThrow(/predates shared mode/);
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(await backend.inspect({ key: name })).toBeNull();
    expect(requests).toBeLessThanOrEqual(4);
  });
});
