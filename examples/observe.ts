// Lock events as OpenTelemetry metrics: a counter of acquire attempts by outcome, histograms of the
// time waited for a lock and of renewal latency, and a counter of lost leases by reason. Pass
// `metrics.getMeter("my-app")` from @opentelemetry/api (its Meter fits the interface below), or
// any meter with the same two methods. docs/events.md, "Observing locks", shows this same code, and
// test/core/events-example.test.ts runs it and checks that both stay the same.
import type { LockEvent } from "leasehold";

type Attributes = Record<string, string | number | boolean>;

/** The part of OpenTelemetry's `Meter` used here. */
export interface Meter {
  createCounter(name: string, options?: { unit?: string }): { add(n: number, a?: Attributes): void };
  createHistogram(name: string, options?: { unit?: string }): { record(v: number, a?: Attributes): void };
}

/** An `onEvent` observer that records a mutex's events on `meter`. */
export function lockMetrics(meter: Meter): (event: LockEvent) => void {
  const attempts = meter.createCounter("leasehold.acquire.attempts");
  const waited = meter.createHistogram("leasehold.acquire.waited", { unit: "ms" });
  const renewal = meter.createHistogram("leasehold.renew.latency", { unit: "ms" });
  const lost = meter.createCounter("leasehold.lease.lost");
  return (e) => {
    if (e.type === "attempt") attempts.add(1, { lock: e.name, outcome: e.outcome });
    if (e.type === "acquired") waited.record(e.waited, { lock: e.name });
    if (e.type === "renewed") renewal.record(e.latency, { lock: e.name });
    if (e.type === "lost") lost.add(1, { lock: e.name, reason: e.reason });
  };
}
