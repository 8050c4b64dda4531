// The recipes of docs/recipes-once.md, with the real schedulers (croner, cron) on the real Redis:
// three instances (each its own client and mutex) schedule the same job every second and pass
// runOnce the fire time the recipe derives. Every fire runs once, the others are told done or
// running, and the fire ids are the schedule's own times (whole seconds), the same on every
// instance. What the recipes rely on, checked on croner itself: previousRuns at the trigger
// instant + 1 ms names the scheduled time, also when the trigger comes exactly on it.
import { CronJob } from "cron";
import { Cron } from "croner";
import IORedis from "ioredis";
import { afterAll, describe, expect, inject, it } from "vitest";
import { redis } from "../../src/backends/redis/index.ts";
import { createMutex, type Mutex, nearestTick, type OnceResult, runOnce } from "../../src/index.ts";
import { registerSecret } from "../harness/secrets.ts";

const redisCtx = inject("redis");
registerSecret(redisCtx.password);
const closers: (() => Promise<unknown>)[] = [];
afterAll(() => Promise.all(closers.map((close) => close())));

const INSTANCES = 3;
/** How long the instances fire: enough for 3 fires on a loaded machine. */
const FIRING = 4_500;

function fleet(): Mutex[] {
  const name = `sched-${crypto.randomUUID().slice(0, 8)}`;
  return Array.from({ length: INSTANCES }, (_, i) => {
    const client = new IORedis(redisCtx.url);
    closers.push(() => client.quit());
    return createMutex(redis(client), { name, ttl: 3_000, owner: `instance-${i}` });
  });
}

interface Outcome {
  fire: number;
  owner: string;
  result: OnceResult<string>;
}

/** Each fire: exactly one ran, the others done or running; fire ids are whole seconds. */
function expectOncePerFire(outcomes: Outcome[]): void {
  const fires = [...new Set(outcomes.map((o) => o.fire))];
  expect(fires.length).toBeGreaterThanOrEqual(3);
  for (const fire of fires) {
    expect(fire % 1000, `fire ${fire}`).toBe(0);
    const of = outcomes.filter((o) => o.fire === fire);
    expect(
      of.filter((o) => o.result.ran),
      `runs of ${new Date(fire).toISOString()}`,
    ).toHaveLength(1);
    for (const o of of) if (!o.result.ran) expect(["done", "running"]).toContain(o.result.reason);
  }
  // On most fires the other instances took part (a loaded machine may delay one past its fire).
  const full = fires.filter((fire) => outcomes.filter((o) => o.fire === fire).length === INSTANCES);
  expect(full.length).toBeGreaterThanOrEqual(1);
}

const job = (owner: string) => async () => {
  await new Promise((resolve) => setTimeout(resolve, 100));
  return owner;
};

describe("croner", () => {
  /** The recipe's fire time: the scheduled time croner triggered for (docs/recipes-once.md). */
  const fireOf = (self: Cron) => self.previousRuns(1, new Date(self.currentRun()!.getTime() + 1))[0]!;

  it("previousRuns at the trigger instant + 1 ms is the scheduled time, even exactly on it", () => {
    const weekdays = new Cron("0 9 * * 1-5", { timezone: "Etc/UTC", paused: true });
    const nine = new Date("2026-11-24T09:00:00.000Z");
    for (const trigger of [nine, new Date(nine.getTime() + 350), new Date(nine.getTime() + 999)]) {
      expect(weekdays.previousRuns(1, new Date(trigger.getTime() + 1))[0]).toEqual(nine);
    }
    // Without the + 1 ms, a trigger exactly on the time would name the day before.
    expect(weekdays.previousRuns(1, nine)[0]).toEqual(new Date("2026-11-23T09:00:00.000Z"));
    weekdays.stop();
  });

  it("three instances scheduling one job run each fire once", { timeout: 30_000 }, async () => {
    const outcomes: Outcome[] = [];
    const jobs = fleet().map(
      (mutex) =>
        new Cron("* * * * * *", async (self) => {
          const fire = fireOf(self).getTime();
          const result = await runOnce(mutex, fire, job(mutex.owner), { retain: 60_000 });
          outcomes.push({ fire, owner: mutex.owner, result });
        }),
    );
    await new Promise((resolve) => setTimeout(resolve, FIRING));
    for (const j of jobs) j.stop();
    await new Promise((resolve) => setTimeout(resolve, 1_000)); // the last fire's runs end
    expectOncePerFire(outcomes);
  });
});

describe("cron", () => {
  it("three instances scheduling one job run each fire once (nearestTick)", { timeout: 30_000 }, async () => {
    const outcomes: Outcome[] = [];
    const jobs = fleet().map((mutex) =>
      CronJob.from({
        cronTime: "* * * * * *",
        start: true,
        onTick: async () => {
          const fire = nearestTick(1_000);
          const result = await runOnce(mutex, fire, job(mutex.owner), { retain: 60_000 });
          outcomes.push({ fire, owner: mutex.owner, result });
        },
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, FIRING));
    for (const j of jobs) await j.stop();
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expectOncePerFire(outcomes);
  });
});
