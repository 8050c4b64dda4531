/**
 * The backend conformance suite. Every leasehold backend runs it, and so can yours: it needs
 * no test framework, only a function that creates the backend. It checks the mutex, the
 * semaphore over it ({@link semaphoreChecks}) and the optional capabilities the backend offers.
 *
 * @example With vitest (bun test and Deno's `@std/testing/bdd` look the same)
 * ```ts
 * import { describe, it } from "vitest";
 * import { testBackend } from "leasehold/testing";
 * import { memory } from "leasehold/memory";
 *
 * testBackend({ describe, it }, { backend: () => memory() });
 * ```
 *
 * @example With Node's built-in test runner, or anything else: run the checks yourself
 * ```ts
 * import { conformanceChecks } from "leasehold/testing";
 * import { memory } from "leasehold/memory";
 *
 * // Node's built-in runner (the node:test module), or your runner's:
 * declare function test(name: string, options: { timeout: number }, fn: () => Promise<void>): void;
 *
 * for (const check of conformanceChecks({ backend: () => memory() })) {
 *   test(check.name, { timeout: check.timeout }, check.run);
 * }
 * ```
 *
 * @module
 */
import { capabilityChecks } from "./capabilities.ts";
import { mutexChecks } from "./mutex.ts";
import { onceChecks } from "./once.ts";
import { semaphoreChecks } from "./semaphore.ts";
import type { ConformanceCheck, ConformanceOptions, Runner } from "./shared.ts";
import { sharedModeChecks } from "./shared-mode.ts";

export type { ConformanceCheck, ConformanceOptions, Runner };
export { semaphoreChecks };

/**
 * The conformance checks as plain async functions, for any runner: the mutex
 * (src/testing/mutex.ts), the optional capabilities (capabilities.ts), the record of a completed
 * fire where offered (once.ts, for runOnce), shared mode where offered (shared-mode.ts), then the
 * semaphore (semaphore.ts).
 *
 * @param options The backend factory and the timing to use.
 * @returns The checks, each with a name, a timeout in ms and a `run` that throws on failure.
 */
export function conformanceChecks(options: ConformanceOptions): ConformanceCheck[] {
  return [
    ...mutexChecks(options),
    ...capabilityChecks(options),
    ...onceChecks(options),
    ...sharedModeChecks(options),
    ...semaphoreChecks(options),
  ];
}

/**
 * Registers the conformance checks with a BDD runner such as vitest, `bun test`, Jest or
 * Deno's `@std/testing/bdd`.
 *
 * @param runner The runner's `describe` and `it`.
 * @param options The backend factory and the timing to use.
 */
export function testBackend(runner: Runner, options: ConformanceOptions): void {
  runner.describe("leasehold backend conformance", () => {
    for (const check of conformanceChecks(options)) runner.it(check.name, check.run, check.timeout);
  });
}
