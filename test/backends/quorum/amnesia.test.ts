// quorum() with members that lose their writes (FLUSHALL of a member's redis-server: a restart
// without persistence, a failover that lost writes), each a redis-server behind an Upstash-REST
// bridge: the wiped member is healed by the next acquisition and by renewals; wipes of different
// members add up on an idle name until heal() raises it (docs/DESIGN.md §13); and a grant that
// lands after the lease was released is given back.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { memory } from "../../../src/backends/memory/index.ts";
import { heal, quorum } from "../../../src/backends/quorum/index.ts";
import { type FenceHealed, upstash } from "../../../src/backends/upstash/index.ts";
import { createMutex, type Mutex, runOnce } from "../../../src/index.ts";
import { fireKey } from "../../../src/once.ts";
import { freePort } from "../../harness/servers/azurite.ts";
import { startFaultProxy } from "../../harness/servers/fault-proxy.ts";
import { connectResp } from "../../harness/servers/resp.ts";
import { fenceKey, startDatabases, type UpstashDatabase } from "../../harness/upstash.ts";

const dbs: UpstashDatabase[] = [];
let downUrl: string;
const name = () => `a-${crypto.randomUUID().slice(0, 8)}`;
/** A member on database `d`; what its fence check reports goes to `told`. */
const member = (d: UpstashDatabase, told?: FenceHealed[]) =>
  upstash({ url: d.url, token: d.token, onFenceHealed: (info) => told?.push(info) });
/** A member nothing listens for: every request is refused at once. */
const down = () => upstash({ url: downUrl, token: "down-member-token" });
/** The fence counter of lock `lock` on database `d`, read with redis-server's own protocol. */
async function fence(d: UpstashDatabase, lock: string): Promise<number> {
  const c = await connectResp(d.redis.socket);
  try {
    return Number(String(await c.send(["GET", fenceKey(lock)])));
  } finally {
    c.close();
  }
}

/** Takes and releases `mutex`'s lock `times` times; the tokens, in order. */
async function cycles(mutex: Mutex, times: number): Promise<number[]> {
  const tokens: number[] = [];
  for (let i = 0; i < times; i++) {
    const l = await mutex.acquire({ timeout: 5_000 });
    tokens.push(l.token);
    await l.release();
  }
  return tokens;
}

beforeAll(async () => {
  dbs.push(...(await startDatabases(5)));
  downUrl = `http://127.0.0.1:${await freePort()}`;
});
afterAll(async () => {
  await Promise.all(dbs.map((d) => d.stop()));
});

describe("quorum(): a member that lost its writes is healed, not shut out", () => {
  it("3 members, amnesia 1, one flushed: the same quorum acquires at once, with a token above every earlier one, and the flushed member's fence raised to it", async () => {
    const lock = name();
    const told: FenceHealed[] = [];
    const backend = quorum([member(dbs[0]!, told), member(dbs[1]!), member(dbs[2]!)], { amnesia: 1 });
    const mutex = createMutex(backend, { name: lock, ttl: 3_000, owner: "q" });
    const tokens = await cycles(mutex, 3);
    await dbs[0]!.wipe();
    const lease = await mutex.acquire({ timeout: 5_000 });
    expect(lease.token).toBeGreaterThan(Math.max(...tokens));
    for (const d of dbs.slice(0, 3)) {
      expect(await member(d).inspect({ key: lock })).toMatchObject({ owner: "q", token: lease.token });
      expect(await fence(d, lock)).toBe(lease.token);
    }
    // The member saw the counter go back and raised it itself (its own fence check).
    expect(told).toMatchObject([{ name: lock, seen: Math.max(...tokens), got: 1, token: lease.token }]);
    await lease.release();
  });

  it("5 members, amnesia 1, one flushed and one down: acquires, and a quorum without a fence check of its own raises the flushed member", async () => {
    const lock = name();
    const members = () => [member(dbs[0]!), member(dbs[1]!), member(dbs[2]!), member(dbs[3]!), down()];
    const mutex = createMutex(quorum(members(), { amnesia: 1 }), { name: lock, ttl: 3_000, owner: "q" });
    const tokens = await cycles(mutex, 3);
    await dbs[1]!.wipe();
    // One attempt: granted by the 4 members that are up, the flushed one among them.
    const lease = await mutex.tryAcquire();
    expect(lease).not.toBeNull();
    expect(lease!.token).toBeGreaterThan(Math.max(...tokens));
    expect(await fence(dbs[1]!, lock)).toBe(lease!.token);
    await lease!.release();
    // Members that never saw the name (another process): the flushed member grants 1, and the
    // quorum raises it to the lease's token before handing the lease out.
    await dbs[1]!.wipe();
    const fresh = createMutex(quorum(members(), { amnesia: 1 }), { name: lock, ttl: 3_000, owner: "q" });
    const next = await fresh.acquire({ timeout: 10_000 });
    expect(next.token).toBeGreaterThan(lease!.token);
    for (const d of dbs.slice(0, 4)) expect(await fence(d, lock)).toBe(next.token);
    await next.release();
  });

  it("3 members, amnesia 1, one flushed mid-lease: the renewal heals it (takes the lease there again, raises its fence) instead of losing the lease", async () => {
    const lock = name();
    const backend = quorum([member(dbs[0]!), member(dbs[1]!), member(dbs[2]!)], { amnesia: 1 });
    const mutex = createMutex(backend, { name: lock, ttl: 5_000, owner: "q", renew: false });
    const lease = await mutex.acquire({ timeout: 5_000 });
    await dbs[2]!.wipe();
    expect(await member(dbs[2]!).inspect({ key: lock })).toBeNull();
    await lease.renew();
    expect(lease.valid).toBe(true);
    expect(await member(dbs[2]!).inspect({ key: lock })).toMatchObject({ owner: "q" });
    expect(await fence(dbs[2]!, lock)).toBeGreaterThanOrEqual(lease.token);
    expect(await mutex.holder()).toEqual({ owner: "q", token: lease.token });
    // Healed: another contender is refused, and the next token is above this one.
    expect(await createMutex(backend, { name: lock, ttl: 5_000 }).tryAcquire()).toBeNull();
    await lease.release();
    const next = await mutex.acquire({ timeout: 5_000 });
    expect(next.token).toBeGreaterThan(lease.token);
    await next.release();
  });
});

describe("quorum(): wipes add up on an idle name; heal() raises it", () => {
  // Four members, amnesia 1 (quorum 3), never more than one down at a time. Day 0: member 3 is
  // down while the name is taken 5 times (its counter stays behind). Day 1: member 0 restarts
  // empty. Day 30: member 1 does. Day 31: member 2 is down while the name is taken again. Each
  // day is a process of its own (new backend objects, nothing seen before).
  const day0 = async (lock: string) => {
    const m = createMutex(
      quorum([member(dbs[0]!), member(dbs[1]!), member(dbs[2]!), down()], { amnesia: 1 }),
      {
        name: lock,
        ttl: 3_000,
      },
    );
    expect(await cycles(m, 5)).toEqual([1, 2, 3, 4, 5]);
  };
  const day31 = (lock: string) =>
    createMutex(quorum([member(dbs[0]!), member(dbs[1]!), down(), member(dbs[3]!)], { amnesia: 1 }), {
      name: lock,
      ttl: 3_000,
    }).acquire({ timeout: 5_000 });
  const all = () =>
    quorum(
      dbs.slice(0, 4).map((d) => member(d)),
      { amnesia: 1 },
    );

  it("without heal(), two restarts a month apart count as two: the token goes back (as docs/backends/quorum.md and DESIGN §13 say)", async () => {
    const lock = name();
    await day0(lock);
    await dbs[0]!.wipe(); // day 1
    await dbs[1]!.wipe(); // day 30
    const lease = await day31(lock);
    expect(lease.token).toBeLessThanOrEqual(5); // members 0, 1 and 3 all forgot or never knew
    await lease.release();
  });

  it("heal() after each restart: every member raised to the highest token, and day 31's token is above day 0's", async () => {
    const lock = name();
    await day0(lock);
    await dbs[0]!.wipe(); // day 1
    expect(await heal(all(), [lock])).toEqual([
      { name: lock, token: 6, healed: [0, 1, 2, 3], held: [], unreachable: [] },
    ]);
    for (const d of dbs.slice(0, 4)) expect(await fence(d, lock)).toBe(6);
    await dbs[1]!.wipe(); // day 30
    expect(await heal(all(), [lock])).toEqual([
      { name: lock, token: 7, healed: [0, 1, 2, 3], held: [], unreachable: [] },
    ]);
    const lease = await day31(lock);
    expect(lease.token).toBeGreaterThan(7);
    await lease.release();
    // heal() left nothing held.
    for (const d of dbs.slice(0, 4)) expect(await member(d).inspect({ key: lock })).toBeNull();
  });

  it("heal() takes nothing from a holder, reports members it could not reach, and checks its arguments", async () => {
    const [held, idle] = [name(), name()];
    const failures: number[] = [];
    const backend = quorum([member(dbs[0]!), member(dbs[1]!), member(dbs[2]!), down()], {
      amnesia: 1,
      onMemberError: (_e, i) => failures.push(i),
    });
    const holder = createMutex(backend, { name: held, ttl: 5_000, owner: "holder", renew: false });
    const lease = await holder.acquire({ timeout: 5_000 });
    const reports = await heal(backend, [held, idle], { timeout: 2_000 });
    expect(reports).toEqual([
      { name: held, token: null, healed: [], held: [0, 1, 2], unreachable: [3] },
      { name: idle, token: 1, healed: [0, 1, 2], held: [], unreachable: [3] },
    ]);
    expect(new Set(failures)).toEqual(new Set([3]));
    await lease.renew(); // still its own
    expect(await holder.holder()).toEqual({ owner: "holder", token: lease.token });
    await lease.release();

    const mem = quorum([memory(), memory(), memory()]);
    const cases: [() => Promise<unknown>, ErrorConstructor | RangeErrorConstructor, string][] = [
      [
        () => heal(memory(), ["x"]),
        TypeError,
        "[leasehold] [quorum] heal: backend must be a backend made by quorum()",
      ],
      [
        () => heal(mem, "x" as never),
        TypeError,
        "[leasehold] [quorum] heal: names must be an array of lock names (non-empty strings)",
      ],
      [
        () => heal(mem, [""]),
        TypeError,
        "[leasehold] [quorum] heal: names must be an array of lock names (non-empty strings)",
      ],
      [
        () => heal(mem, ["x"], { timeout: 0 }),
        RangeError,
        "[leasehold] [quorum] heal: timeout must be a number of ms from 1 to 7500 (half the ttl of the lease heal takes), got 0",
      ],
      [
        () => heal(mem, ["x"], { signal: "stop" as never }),
        TypeError,
        "[leasehold] [quorum] heal: signal must be an AbortSignal, got string",
      ],
    ];
    for (const [call, type, message] of cases) await expect(call()).rejects.toThrow(new type(message));
  });
});

describe("quorum(): a grant that lands after the release", () => {
  it("is given back: the straggling member's lock is free again long before its ttl", async () => {
    const lock = name();
    const slow = startFaultProxy(dbs[4]!.url);
    try {
      // Member 2's acquires reach its server 1 s late, after the lease (granted by members 0
      // and 1) was released there.
      slow.setRule((req) => (req.body.includes("INCR") ? { kind: "delay", ms: 1_000 } : undefined));
      const straggler = upstash({ url: await slow.client("slow"), token: dbs[4]!.token });
      const mutex = createMutex(quorum([member(dbs[0]!), member(dbs[1]!), straggler]), {
        name: lock,
        ttl: 60_000,
        owner: "q",
      });
      dbs[4]!.bridge.resetStats();
      const lease = await mutex.acquire({ timeout: 5_000 });
      await lease.release();
      // The release, then the late acquire, reached member 2.
      await expect.poll(() => dbs[4]!.bridge.stats().total, { timeout: 10_000 }).toBeGreaterThanOrEqual(2);
      // Its grant was given back: free again, not held for the 60 s ttl.
      await expect.poll(() => member(dbs[4]!).inspect({ key: lock }), { timeout: 10_000 }).toBeNull();
      expect(await fence(dbs[4]!, lock)).toBe(1); // it did grant
    } finally {
      await slow.stop();
    }
  });
});

describe("quorum(): a completed fire (runOnce) and a member that lost its writes", () => {
  it("4 members, amnesia 1: one flushed after the fire completed still answers done through the quorum (3 keep the record); heal() neither takes nor disturbs the record", async () => {
    const lock = name();
    const backend = () =>
      quorum(
        dbs.slice(0, 4).map((d) => member(d)),
        { amnesia: 1 },
      );
    let runs = 0;
    const ran = await runOnce(createMutex(backend(), { name: lock, owner: "runner" }), "tick", () => ++runs);
    expect(ran).toMatchObject({ ran: true, value: 1 });
    const { token } = ran as { token: number };
    const k = await fireKey(lock, "tick");
    await dbs[0]!.wipe(); // member 0 forgets the record (and the name's counter)
    expect(await member(dbs[0]!).inspect({ key: k })).toBeNull();
    const done = { ran: false, reason: "done", by: { owner: "runner", token } };
    expect(
      await runOnce(createMutex(backend(), { name: lock, owner: "late" }), "tick", () => ++runs),
    ).toEqual(done);
    // Member 0 granted the late call: given back, not held for a ttl.
    await expect.poll(() => member(dbs[0]!).inspect({ key: k }), { timeout: 10_000 }).toBeNull();
    expect(await backend().inspect({ key: k })).toMatchObject({ owner: "runner", token, done: true });
    // heal() takes the fire's key only where it was forgotten, and gives it back there.
    const [report] = await heal(backend(), [k]);
    expect(report).toMatchObject({ name: k, healed: [0], held: [1, 2, 3], unreachable: [] });
    expect(await member(dbs[0]!).inspect({ key: k })).toBeNull();
    for (const d of dbs.slice(1, 4)) {
      expect(await member(d).inspect({ key: k })).toMatchObject({ owner: "runner", token, done: true });
    }
    expect(await runOnce(createMutex(backend(), { name: lock }), "tick", () => ++runs)).toEqual(done);
    expect(runs).toBe(1);
  });
});
