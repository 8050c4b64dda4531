// quorum() with real members (independent redis-servers behind Upstash-REST bridges) failing:
// a member down the whole time, a member wiped while a lease is held (as a failover that loses
// writes), a member partitioned by the fault proxy, counters that drifted apart; and its checks.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Backend } from "../../../src/backend.ts";
import { memory } from "../../../src/backends/memory/index.ts";
import { quorum } from "../../../src/backends/quorum/index.ts";
import { quorumSize } from "../../../src/backends/quorum/options.ts";
import { upstash } from "../../../src/backends/upstash/index.ts";
import { BackendError, createMutex, LeaseLostError, runOnce } from "../../../src/index.ts";
import { fireKey } from "../../../src/once.ts";
import { sleep } from "../../../src/time.ts";
import { freePort } from "../../harness/servers/azurite.ts";
import { type FaultProxy, type ProxyRequest, startFaultProxy } from "../../harness/servers/fault-proxy.ts";
import { startDatabases, type UpstashDatabase } from "../../harness/upstash.ts";

const dbs: UpstashDatabase[] = [];
let proxy: FaultProxy;
let downUrl: string;
const member = (d: UpstashDatabase) => upstash({ url: d.url, token: d.token });
const name = () => `q-${crypto.randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  dbs.push(...(await startDatabases(4)));
  proxy = startFaultProxy(dbs[3]!.url);
  downUrl = `http://127.0.0.1:${await freePort()}`; // nothing listens there: connection refused
});
afterAll(async () => {
  await proxy?.stop();
  await Promise.all(dbs.map((d) => d.stop()));
});

describe("quorum(): its size and its checks", () => {
  it("quorumSize is ceil((N + amnesia + 1) / 2): two quorums share amnesia + 1 members", () => {
    const table = [
      [3, 0, 2],
      [3, 1, 3],
      [4, 1, 3],
      [5, 0, 3],
      [5, 1, 4],
      [5, 2, 4],
      [7, 1, 5],
      [7, 2, 5],
    ];
    for (const [n, a, q] of table) {
      expect(quorumSize(n!, a!), `N ${n}, amnesia ${a}`).toBe(q);
      expect(2 * q! - n!, "members two quorums share").toBeGreaterThanOrEqual(a! + 1);
    }
  });

  it("rejects at creation what cannot hold, naming what is wrong", () => {
    const m = () => memory();
    const noRaise: Backend = { ...memory(), raiseFence: undefined };
    const one = m();
    const cases: [() => unknown, ErrorConstructor | RangeErrorConstructor, string][] = [
      [() => quorum("x" as never), TypeError, "[leasehold] [quorum] backends must be an array of backends"],
      [() => quorum([m(), m()]), TypeError, "[leasehold] [quorum] needs at least 3 backends, got 2"],
      [
        () => quorum([m(), m(), {} as never]),
        TypeError,
        "[leasehold] [quorum] backends[2].name must be a string",
      ],
      [
        () => quorum([m(), noRaise, m()]),
        TypeError,
        "[leasehold] [quorum] backends[1] (memory) has no raiseFence, which a quorum needs for fencing tokens that never go back",
      ],
      [
        () => quorum([m(), m(), memory({ expiry: "observed" })]),
        TypeError,
        "[leasehold] [quorum] backends[2] (memory) expires locks by observation (docs/DESIGN.md §14), which a quorum does not support",
      ],
      [
        () => quorum([one, m(), one]),
        TypeError,
        "[leasehold] [quorum] backends[2] is backends[0] again: members must be independent",
      ],
      [
        () => quorum([m(), m(), m()], { amnesia: 3 }),
        RangeError,
        "[leasehold] [quorum] amnesia must be an integer from 0 to 2 (the backends - 1), got 3",
      ],
      [
        () => quorum([m(), m(), m()], { amnesia: 0.5 }),
        RangeError,
        "[leasehold] [quorum] amnesia must be an integer from 0 to 2 (the backends - 1), got 0.5",
      ],
      [
        () => quorum([m(), m(), m()], { onMemberError: "log" as never }),
        TypeError,
        "[leasehold] [quorum] onMemberError must be a function",
      ],
      [
        () => quorum([{ ...m(), ttlRange: [15_000, 60_000] }, { ...m(), ttlRange: [1, 10_000] }, m()]),
        RangeError,
        "[leasehold] [quorum] the backends' ttl ranges do not overlap: no ttl suits them all",
      ],
    ];
    for (const [make, type, message] of cases) expect(make).toThrow(new type(message));
    expect(
      quorum([{ ...m(), ttlRange: [15_000, 60_000] }, { ...m(), ttlRange: [1, 30_000] }, m()]).ttlRange,
    ).toEqual([15_000, 30_000]);
    expect(quorum([m(), m(), m()]).ttlRange).toBeUndefined();
  });
});

describe("quorum(): members that fail", () => {
  it("one member down the whole time: 3 members with amnesia 0 still lock (quorum 2); with amnesia 1 (quorum 3) every operation fails clearly", async () => {
    const failures: number[] = [];
    const members = () => [member(dbs[0]!), member(dbs[1]!), upstash({ url: downUrl, token: "t" })];
    const backend = quorum(members(), { onMemberError: (_e, i) => failures.push(i) });
    const lock = name();
    const a = createMutex(backend, { name: lock, ttl: 2_000, owner: "a" });
    const lease = await a.acquire({ timeout: 5_000 });
    expect(await createMutex(quorum(members()), { name: lock, ttl: 2_000 }).tryAcquire()).toBeNull();
    await sleep(2_500); // several renewals, each by 2 of 3
    expect(lease.signal.aborted).toBe(false);
    expect(await a.holder()).toEqual({ owner: "a", token: lease.token });
    await lease.release();
    expect(await a.holder()).toBeNull();
    expect(failures.length).toBeGreaterThanOrEqual(4);
    expect(new Set(failures)).toEqual(new Set([2]));

    const strict = createMutex(quorum(members(), { amnesia: 1 }), { name: name(), ttl: 2_000 });
    const e = await strict.tryAcquire().catch((error: unknown) => error);
    expect(e).toBeInstanceOf(BackendError);
    expect((e as BackendError).retryable).toBe(true);
    expect((e as BackendError).message).toMatch(
      /^\[leasehold\] \[quorum\] acquire "q-\w+": 2 of 3 backends answered, a quorum is 3: \[leasehold\] \[upstash\] request failed: /,
    );
  });

  it("too few answers: retryable while a quorum can still form, non-retryable once more than N - q members failed for good", async () => {
    const lock = name();
    const wrong = (d: UpstashDatabase) => upstash({ url: d.url, token: "not-the-token-0123" }); // 401: for good
    // Member 1 is held by someone else (its holder is no quorum's: it will expire), member 0
    // refuses our token for good, member 2 grants: undecided, and one member failing for good
    // is within what 3 members with amnesia 0 survive (N - q = 1).
    const other = crypto.randomUUID();
    expect(await member(dbs[1]!).acquire({ key: lock, owner: "x", nonce: other, ttl: 5_000 })).toMatchObject({
      ok: true,
    });
    const one = await createMutex(quorum([wrong(dbs[0]!), member(dbs[1]!), member(dbs[2]!)]), {
      name: lock,
    })
      .tryAcquire()
      .catch((e: unknown) => e);
    expect(one).toMatchObject({ name: "BackendError", code: "ERR_BACKEND", retryable: true });
    expect((one as Error).message).toMatch(/acquire "q-\w+": 2 of 3 backends answered, a quorum is 2: /);
    await member(dbs[1]!).release({ key: lock, nonce: other });
    // Two of three refuse our credentials: no quorum can form until someone fixes them.
    const two = await createMutex(quorum([wrong(dbs[0]!), wrong(dbs[1]!), member(dbs[2]!)]), { name: lock })
      .tryAcquire()
      .catch((e: unknown) => e);
    expect(two).toMatchObject({ name: "BackendError", code: "ERR_BACKEND_AUTH", retryable: false });
  });

  it("a member wiped while a lease is held (amnesia 1, 4 members): no second holder, and the next token is greater than every earlier one", async () => {
    const lock = name();
    const backend = () => quorum(dbs.map(member), { amnesia: 1 }); // quorum 3 of 4
    const first = createMutex(backend(), { name: lock, ttl: 3_000, owner: "first" });
    const tokens: number[] = [];
    for (let i = 0; i < 3; i++) {
      const l = await first.acquire({ timeout: 5_000 });
      tokens.push(l.token);
      await l.release();
    }
    const held = await first.acquire({ timeout: 5_000 });
    tokens.push(held.token);
    await dbs[0]!.wipe(); // the member forgets the lease and the fence counter
    expect(await member(dbs[0]!).inspect({ key: lock })).toBeNull();
    const second = createMutex(backend(), { name: lock, ttl: 3_000, owner: "second" });
    expect(await second.tryAcquire()).toBeNull(); // the wiped member grants, the 3 others refuse
    await sleep(1_500); // renewals go on with 3 of 4
    expect(held.signal.aborted).toBe(false);
    expect(await second.tryAcquire()).toBeNull();
    await held.release();
    const next = await second.acquire({ timeout: 5_000 });
    expect(next.token).toBeGreaterThan(Math.max(...tokens));
    // The wiped member's counter was raised with the lease (or, when its grant landed after the
    // quorum decided, right after): every member holds it for "second", none under a lower token.
    // A member may hold it under a higher one: a grant that landed late from a counter that one
    // more grant (a retried round under load) had put ahead (see holder() below).
    for (const d of dbs) {
      await expect
        .poll(async () => {
          const h = await member(d).inspect({ key: lock });
          return { owner: h?.owner, raised: (h?.token ?? 0) >= next.token };
        })
        .toEqual({ owner: "second", raised: true });
    }
    await next.release();
  });

  it("a member partitioned mid-lease: the quorum neither waits for it nor loses the lease; after healing all goes on", async () => {
    const client = await proxy.client("partitioned");
    const members = () => [member(dbs[0]!), member(dbs[1]!), upstash({ url: client, token: dbs[3]!.token })];
    const lock = name();
    const a = createMutex(quorum(members()), { name: lock, ttl: 60_000, owner: "a" });
    proxy.partition("partitioned");
    try {
      // Waiting for the black-holed member would take the whole acquire bound (about 59 s).
      const lease = await Promise.race([a.acquire({ timeout: 20_000 }), sleep(10_000).then(() => null)]);
      expect(lease, "acquire waited for the partitioned member").not.toBeNull();
      const renewed = await Promise.race([lease!.renew().then(() => true), sleep(10_000).then(() => false)]);
      expect(renewed, "renew waited for the partitioned member").toBe(true);
      expect(await a.holder()).toEqual({ owner: "a", token: lease!.token });
      proxy.heal("partitioned");
      await lease!.renew();
      await lease!.release();
      expect(proxy.counts().blackholed).toBeGreaterThanOrEqual(3);
    } finally {
      proxy.heal();
    }
    const again = await a.acquire({ timeout: 5_000 });
    // The healed member's grant may land after the quorum decided (it joins the lease then), or
    // be cut off by a loaded machine (two loaded runs saw none within 10-15 s): a renewal rejoins
    // a member that does not hold the lease.
    await expect
      .poll(
        async () => {
          await again.renew();
          return member(dbs[3]!).inspect({ key: lock });
        },
        { timeout: 15_000, interval: 500 },
      )
      .toMatchObject({ owner: "a" });
    await again.release();
  });

  it("holder() reports the lease's token when a member holds it under another (a late grant from a counter that was ahead)", async () => {
    const lock = name();
    const slow = startFaultProxy(dbs[1]!.url);
    try {
      const ahead = await proxy.client("ahead");
      const delayed = await slow.client("slow");
      // Member 2's counter for the lock is 5 ahead of the others'.
      for (let i = 0; i < 5; i++) {
        const nonce = crypto.randomUUID();
        expect(await member(dbs[3]!).acquire({ key: lock, owner: "x", nonce, ttl: 2_000 })).toMatchObject({
          ok: true,
        });
        await member(dbs[3]!).release({ key: lock, nonce });
      }
      const q = quorum([
        member(dbs[0]!),
        upstash({ url: delayed, token: dbs[1]!.token }),
        upstash({ url: ahead, token: dbs[3]!.token }),
      ]);
      // Member 2 grants late: the quorum is members 0 and 1 (token 1); member 2 joins with 6.
      proxy.setRule((req) => (req.body.includes("INCR") ? { kind: "delay", ms: 300 } : undefined));
      const m = createMutex(q, { name: lock, owner: "q", ttl: 10_000 });
      const lease = await m.acquire();
      expect(lease.token).toBe(1);
      await expect.poll(() => member(dbs[3]!).inspect({ key: lock })).toMatchObject({ owner: "q", token: 6 });
      proxy.setRule(undefined);
      // Member 1 answers last: the first two answers (tokens 1 and 6) disagree.
      slow.setRule(() => ({ kind: "delay", ms: 300 }));
      expect(await m.holder()).toMatchObject({ owner: "q", token: 1 });
      slow.setRule(undefined);
      await lease.release();
    } finally {
      proxy.setRule(undefined);
      await slow.stop();
    }
  });

  it("counters that drifted apart: the token is the largest grant, those behind are raised in one more round trip; in step again, one round trip", async () => {
    const lock = name();
    const slow = startFaultProxy(dbs[1]!.url);
    try {
      const lagging = await proxy.client("lagging");
      const delayed = await slow.client("slow");
      const m = createMutex(
        quorum([
          member(dbs[0]!),
          upstash({ url: delayed, token: dbs[1]!.token }),
          upstash({ url: lagging, token: dbs[3]!.token }),
        ]),
        { name: lock, owner: "q" },
      );
      // Member 2 is cut off for 3 terms: its counter stays behind the others'.
      proxy.partition("lagging");
      for (let i = 1; i <= 3; i++) {
        const l = await m.acquire();
        expect(l.token).toBe(i);
        await l.release();
      }
      proxy.heal("lagging");
      // Member 1 answers acquires late, so the quorum is members 0 (token 4) and 2 (token 1).
      slow.setRule((req) => (req.body.includes("INCR") ? { kind: "delay", ms: 500 } : undefined));
      for (const d of dbs) d.bridge.resetStats();
      const lease = await m.acquire();
      expect(lease.token).toBe(4);
      let inspected = 0; // member 2's inspects by the poll: one, or more when the raise landed late
      for (const d of [dbs[0]!, dbs[1]!, dbs[3]!]) {
        await expect
          .poll(() => {
            if (d === dbs[3]) inspected++;
            return member(d).inspect({ key: lock });
          })
          .toMatchObject({ owner: "q", token: 4 });
      }
      expect(dbs[3]!.bridge.stats().total).toBe(2 + inspected); // its acquire, the raise, the inspects above
      await lease.release();
      // The proxied members' raises (the only script with KEEPTTL), counted from now on.
      const raises: string[] = [];
      const spy = (req: ProxyRequest) => void (req.body.includes("KEEPTTL") && raises.push(req.client));
      slow.setRule(spy);
      proxy.setRule(spy);
      for (const d of dbs) d.bridge.resetStats();
      const steady = await m.acquire();
      expect(steady.token).toBe(5);
      await steady.release();
      // Acquire and release, no raise; a grant that reached the quorum after the release (the
      // slowest member's, say) is given back: one release more.
      const requests = () => [dbs[0]!, dbs[1]!, dbs[3]!].map((d) => d.bridge.stats().total);
      await expect.poll(() => requests().every((r) => r >= 2)).toBe(true);
      expect(requests().every((r) => r <= 3)).toBe(true);
      expect(raises).toEqual([]);
    } finally {
      proxy.setRule(undefined);
      await slow.stop();
    }
  });
});

describe("quorum(): runOnce (complete, docs/DESIGN.md §17)", () => {
  const key = (k: string) => ({ key: k, owner: "runner", nonce: crypto.randomUUID(), ttl: 60_000 });

  it("records fires only when every member can, for a retain every member can keep (their ranges' intersection)", async () => {
    const m = () => memory();
    const all = quorum([m(), m(), m()]);
    expect(typeof all.complete).toBe("function");
    expect(all.retainRange).toBeUndefined();
    const without = quorum([m(), { ...m(), complete: undefined }, m()]);
    expect(without.complete).toBeUndefined();
    const e = await runOnce(createMutex(without, { name: "job" }), 1, () => 1).catch(
      (error: unknown) => error,
    );
    expect(e).toBeInstanceOf(TypeError);
    expect((e as Error).message).toMatch(
      /^\[leasehold\] runOnce: the quorum backend cannot record a completed fire/,
    );
    const narrow = (range: readonly [number, number]) => ({ ...m(), retainRange: range });
    expect(quorum([narrow([1_000, 600_000]), narrow([1, 60_000]), m()]).retainRange).toEqual([1_000, 60_000]);
    // Ranges that do not overlap: no retain suits them all, so the quorum records no fire.
    const apart = quorum([narrow([1, 1_000]), narrow([60_000, 600_000]), m()]);
    expect(apart.complete).toBeUndefined();
  });

  it("a record on a minority is not done: refused as running until the lease expires, then granted with a greater token", async () => {
    const members = [memory(), memory(), memory()];
    const q = quorum(members); // quorum 2
    const k = await fireKey("job", "tick");
    const a = { ...key(k), ttl: 300 };
    const granted = await q.acquire(a);
    expect(granted).toMatchObject({ ok: true });
    // The runner completed on member 0 only, then crashed.
    expect(await members[0]!.complete!({ key: k, nonce: a.nonce, retain: 60_000 })).toBe(true);
    const late = await q.acquire(key(k));
    expect(late.ok).toBe(false);
    expect(late).not.toHaveProperty("done");
    expect(late).toHaveProperty("retryAfter");
    expect(await q.inspect({ key: k })).toMatchObject({ owner: "runner" });
    expect((await q.inspect({ key: k }))?.done).toBeUndefined();
    await sleep(400);
    const next = await q.acquire(key(k));
    expect(next.ok && granted.ok && next.token > granted.token).toBe(true);
  });

  it("a record on more than N − q members is done, though fewer than a quorum (4 members, amnesia 1: no quorum can grant the fire before it expires)", async () => {
    const members = [memory(), memory(), memory(), memory()];
    const q = quorum(members, { amnesia: 1 }); // quorum 3
    const k = await fireKey("job", "tick");
    const a = key(k);
    const granted = await q.acquire(a);
    if (!granted.ok) throw new Error("not granted");
    expect(await members[1]!.complete!({ key: k, nonce: a.nonce, retain: 60_000 })).toBe(true);
    expect(await q.acquire(key(k))).toEqual({ ok: false, retryAfter: expect.any(Number) }); // one record: running
    expect(await members[2]!.complete!({ key: k, nonce: a.nonce, retain: 60_000 })).toBe(true);
    expect(await q.acquire(key(k))).toEqual({ ok: false, done: { owner: "runner", token: granted.token } });
    expect(await q.inspect({ key: k })).toMatchObject({ owner: "runner", token: granted.token, done: true });
  });

  it("done names the runner's token, the one most members' records hold, when a member whose counter was ahead recorded another", async () => {
    const [m0, m1, ahead] = [memory(), memory(), memory()];
    const k = await fireKey("job", "tick");
    for (let i = 0; i < 5; i++) {
      const r = key("job");
      await ahead.acquire(r); // the name's counter, which its fires draw from, is 5 ahead there
      await ahead.release(r);
    }
    // Members 0 and 1 decide (token 1); the ahead member's grant (6) lands late and is kept.
    const mutex = createMutex(quorum([m0, m1, ahead]), { name: "job", owner: "runner" });
    const ran = await runOnce(mutex, "tick", (_s, lease) => lease.token);
    expect(ran).toMatchObject({ ran: true, value: 1, token: 1 });
    expect(await ahead.inspect({ key: k })).toMatchObject({ owner: "runner", token: 6, done: true });
    // Another process whose first answers are 6 and 1: it hears the third before answering.
    const other = quorum([ahead, m0, m1]);
    expect(await other.acquire(key(k))).toEqual({ ok: false, done: { owner: "runner", token: 1 } });
    expect(await other.inspect({ key: k })).toMatchObject({ owner: "runner", token: 1, done: true });
    expect(await runOnce(createMutex(other, { name: "job" }), "tick", () => 0)).toEqual({
      ran: false,
      reason: "done",
      by: { owner: "runner", token: 1 },
    });
  });

  it("a complete that reaches only a minority (two members fail it): not done, the runner is told, and a standby runs the fire with a greater token", async () => {
    const lock = name();
    const other = startFaultProxy(dbs[1]!.url);
    try {
      const members = async () => [
        member(dbs[0]!),
        upstash({ url: await other.client("b"), token: dbs[1]!.token }),
        upstash({ url: await proxy.client("c"), token: dbs[3]!.token }),
      ];
      const mutex = async (owner: string) =>
        createMutex(quorum(await members()), { name: lock, ttl: 4_000, owner });
      // The COMPLETE script fails on members 1 and 2 (not applied): it reaches member 0 only.
      const failComplete = (req: ProxyRequest) =>
        req.body.includes("v:sub(#n)")
          ? ({ kind: "status", status: 503, format: "html" } as const)
          : undefined;
      other.setRule(failComplete);
      proxy.setRule(failComplete);
      const tokens: number[] = [];
      const job = (_signal: AbortSignal, lease: { token: number }) => tokens.push(lease.token);
      const first = await runOnce(await mutex("first"), "tick", job).catch((error: unknown) => error);
      other.setRule(undefined);
      proxy.setRule(undefined);
      // The record is sent again until the lease's deadline (it keeps reaching member 0 only),
      // then the runner is told its fire was not recorded, with the quorum's error as the cause.
      expect(first).toBeInstanceOf(LeaseLostError);
      expect((first as Error).message).toMatch(/fn ran, but its record kept failing/);
      expect((first as Error).cause).toBeInstanceOf(BackendError);
      expect(((first as Error).cause as Error).message).toMatch(
        /complete "q-\w+:fire:tick": 1 of 3 backends answered, a quorum is 2: /,
      );
      const k = await fireKey(lock, "tick");
      expect(await member(dbs[0]!).inspect({ key: k })).toMatchObject({ owner: "first", done: true });
      // Not done: a record on one member of three; the runner's lease on members 1 and 2 expires
      // (4 s, nearly over by now), and a standby runs the fire.
      const standby = await runOnce(await mutex("standby"), "tick", job, { standby: true, timeout: 15_000 });
      expect(standby.ran).toBe(true);
      expect(tokens).toHaveLength(2);
      expect(tokens[1]).toBeGreaterThan(tokens[0]!);
      expect(await runOnce(await mutex("after"), "tick", job)).toEqual({
        ran: false,
        reason: "done",
        by: { owner: "standby", token: tokens[1] },
      });
      expect(tokens).toHaveLength(2);
    } finally {
      other.setRule(undefined);
      proxy.setRule(undefined);
      await other.stop();
    }
  });
});
