// examples/observe.ts (lock events as OpenTelemetry metrics) run against a recording meter on the
// memory backend: the attempts counted by outcome, the wait and the renewal latency recorded, a
// loss counted by reason. And docs/events.md shows that same code.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { lockMetrics, type Meter } from "../../examples/observe.ts";
import type { Backend } from "../../src/backend.ts";
import { memory } from "../../src/backends/memory/index.ts";
import { createMutex } from "../../src/index.ts";
import { aborted } from "../../src/signals.ts";
import { sleep } from "../../src/time.ts";

/** A meter that keeps every point: `[instrument, value, attributes]`. */
function recordingMeter() {
  const points: [string, number, Record<string, unknown> | undefined][] = [];
  const meter: Meter = {
    createCounter: (name) => ({ add: (n, a) => points.push([name, n, a]) }),
    createHistogram: (name) => ({ record: (v, a) => points.push([name, v, a]) }),
  };
  return { meter, points };
}

describe("examples/observe.ts", () => {
  it("records attempts by outcome, the time waited, renewal latency and a loss by reason", async () => {
    const { meter, points } = recordingMeter();
    const store = memory();
    let gone = false;
    const backend: Backend = { ...store, renew: (r) => (gone ? Promise.resolve(false) : store.renew(r)) };
    const held = await createMutex(store, { name: "report", ttl: 1_000 }).acquire();
    const mutex = createMutex(backend, {
      name: "report",
      ttl: 1_000,
      retryDelay: 20,
      onEvent: lockMetrics(meter),
    });
    const pending = mutex.acquire({ timeout: 2_000 });
    await sleep(100);
    await held.release();
    const lease = await pending;
    await lease.renew();
    gone = true;
    await lease.renew().catch(() => {});
    await aborted(lease.signal);

    const named = (n: string) => points.filter(([name]) => name === n);
    const attempts = named("leasehold.acquire.attempts");
    expect(attempts.length).toBeGreaterThanOrEqual(3);
    expect(attempts.at(-1)).toEqual([
      "leasehold.acquire.attempts",
      1,
      { lock: "report", outcome: "granted" },
    ]);
    for (const point of attempts.slice(0, -1)) expect(point[2]).toEqual({ lock: "report", outcome: "taken" });
    const [waited] = named("leasehold.acquire.waited");
    expect(waited?.[1]).toBeGreaterThanOrEqual(95);
    expect(waited?.[2]).toEqual({ lock: "report" });
    const renewals = named("leasehold.renew.latency");
    expect(renewals).toHaveLength(1);
    expect(renewals[0]?.[1]).toBeGreaterThanOrEqual(0);
    expect(named("leasehold.lease.lost")).toEqual([
      ["leasehold.lease.lost", 1, { lock: "report", reason: "gone" }],
    ]);
  });

  it("docs/events.md, Observing locks, shows the example's code", () => {
    const root = new URL("../../", import.meta.url);
    const example = readFileSync(new URL("examples/observe.ts", root), "utf8");
    const code = example.replace(/^(\/\/.*\n)+/, "");
    const page = readFileSync(new URL("docs/events.md", root), "utf8");
    const blocks = [...page.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
    expect(blocks).toContain(code);
  });
});
