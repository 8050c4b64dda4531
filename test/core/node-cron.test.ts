// leasehold/node-cron's coordinator on memory(), called as node-cron 4.6 calls it (its Runner's
// runCoordinated: `shouldRun(key, ttlMs)`, then the task, then `onComplete(key)` in a `finally`,
// whether the task succeeded or threw). The processes and the real node-cron package:
// test/system/node-cron.test.ts.
import { describe, expect, it } from "vitest";
import { memory } from "../../src/backends/memory/index.ts";
import { createMutex, type Lease, LeaseLostError, runOnce } from "../../src/index.ts";
import { type CronContext, onceCoordinator } from "../../src/node-cron.ts";

const at = new Date(Date.UTC(2026, 10, 24, 3));
const context = (name: string, date = at): CronContext => ({ date, task: { name } });
const keyOf = (c: CronContext) => `${c.task?.name}:${c.date.toISOString()}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("onceCoordinator", () => {
  it("lets one instance run a fire and records it; the others are told no while it runs and after", async () => {
    const store = memory();
    const a = onceCoordinator(createMutex(store, { name: "cron", owner: "a" }));
    const b = onceCoordinator(createMutex(store, { name: "cron", owner: "b" }));
    const c = context("report");
    let lease: Lease | undefined;
    const job = a.task((_context, l) => {
      lease = l;
      return "sent";
    });

    expect(await a.shouldRun(keyOf(c), 30_000)).toBe(true);
    expect(await b.shouldRun(keyOf(c), 30_000)).toBe(false); // running
    expect(await job(c)).toBe("sent");
    expect(lease?.name).toBe("cron:fire:report+3A2026-11-24T03+3A00+3A00+2E000Z");
    await a.onComplete(keyOf(c));
    expect(lease?.valid).toBe(false);
    expect(await b.shouldRun(keyOf(c), 30_000)).toBe(false); // done
    const late = await runOnce(createMutex(store, { name: "cron" }), keyOf(c), () => 0);
    expect(late).toEqual({ ran: false, reason: "done", by: { owner: "a", token: lease?.token } });
    // Another fire, and another task's same fire, are their own.
    expect(await b.shouldRun(keyOf(context("report", new Date(at.getTime() + 1000))), 30_000)).toBe(true);
    expect(await b.shouldRun(keyOf(context("other")), 30_000)).toBe(true);
  });

  it("close() gives back a fire whose task never started (node-cron's stop() during a random delay), and waits for one that runs", async () => {
    const store = memory();
    const a = onceCoordinator(createMutex(store, { name: "cron", owner: "a" }));
    const b = onceCoordinator(createMutex(store, { name: "cron", owner: "b" }));
    const stopped = context("report");
    const running = context("other");
    expect(await a.shouldRun(keyOf(stopped), 30_000)).toBe(true); // then stop(): no task, no onComplete
    expect(await a.shouldRun(keyOf(running), 30_000)).toBe(true);
    let finish = () => {};
    const task = a.task(() => new Promise<void>((resolve) => (finish = resolve)))(running);
    let closed = false;
    const closing = a.close().then(() => (closed = true));
    await sleep(50);
    expect(closed).toBe(false); // the running task's fire is still held
    expect(await b.shouldRun(keyOf(stopped), 30_000)).toBe(true); // given back, not recorded
    finish();
    await task;
    await a.onComplete(keyOf(running));
    await closing;
    expect(closed).toBe(true);
    expect(await b.shouldRun(keyOf(running), 30_000)).toBe(false); // recorded by a
  });

  it("does not record a fire whose task threw: the error reaches node-cron, the fire stays runnable", async () => {
    const store = memory();
    const a = onceCoordinator(createMutex(store, { name: "cron" }));
    const c = context("report");
    const boom = new Error("boom");
    expect(await a.shouldRun(keyOf(c), 30_000)).toBe(true);
    await expect(
      a.task(() => {
        throw boom;
      })(c),
    ).rejects.toBe(boom);
    await a.onComplete(keyOf(c)); // resolves: node-cron already reports the task's error
    expect(await a.shouldRun(keyOf(c), 30_000)).toBe(true);
  });

  it("records nothing and says why when the task was not wrapped", async () => {
    const store = memory();
    const a = onceCoordinator(createMutex(store, { name: "cron" }));
    const c = context("report");
    expect(await a.shouldRun(keyOf(c), 30_000)).toBe(true);
    await expect(a.onComplete(keyOf(c))).rejects.toThrow(
      /ended without its task wrapped by once\.task\(fn\).*not recorded as done/,
    );
    expect(await a.shouldRun(keyOf(c), 30_000)).toBe(true);
  });

  it("refuses to run a wrapped task outside a fire it let run", async () => {
    const a = onceCoordinator(createMutex(memory(), { name: "cron" }));
    let ran = false;
    const job = a.task(() => {
      ran = true;
    });
    await expect(job(context("report"))).rejects.toThrow(
      /the task ran for report:2026-11-24T03:00:00\.000Z without this coordinator's lease.*distributed: true/,
    );
    expect(ran).toBe(false);
  });

  it("rejects onComplete when the lease was lost during the task, and records nothing", async () => {
    const store = memory();
    const a = onceCoordinator(createMutex(store, { name: "cron", ttl: 300, renew: false }));
    const c = context("report");
    expect(await a.shouldRun(keyOf(c), 30_000)).toBe(true);
    let aborted = false;
    await a.task(async (_context, lease) => {
      await sleep(900);
      aborted = lease.signal.aborted;
    })(c);
    expect(aborted).toBe(true);
    await expect(a.onComplete(keyOf(c))).rejects.toBeInstanceOf(LeaseLostError);
    const b = onceCoordinator(createMutex(store, { name: "cron" }));
    expect(await b.shouldRun(keyOf(c), 30_000)).toBe(true);
  });

  it("rejects shouldRun when runOnce refuses the fire (node-cron then skips it and logs why)", async () => {
    const a = onceCoordinator(createMutex(memory(), { name: "cron" }), { retain: 0 });
    await expect(a.shouldRun(keyOf(context("report")), 30_000)).rejects.toThrow(RangeError);
    const b = onceCoordinator(createMutex(memory(), { name: "cron" }));
    await expect(b.shouldRun(keyOf(context("r".repeat(110))), 30_000)).rejects.toThrow(
      /fire must be .* 1-128 characters/,
    );
  });

  it("checks its arguments", () => {
    // @ts-expect-error: not a mutex
    expect(() => onceCoordinator(undefined)).toThrow(/onceCoordinator: mutex must be a Mutex/);
    // @ts-expect-error: not a mutex
    expect(() => onceCoordinator({ name: "cron" })).toThrow(/made by createMutex, got /);
    const mutex = createMutex(memory(), { name: "cron" });
    // @ts-expect-error: not an object
    expect(() => onceCoordinator(mutex, 5)).toThrow(/options must be an object/);
    // @ts-expect-error: not a function
    expect(() => onceCoordinator(mutex).task("job")).toThrow(/task\(fn\): fn must be a function, got /);
  });
});
