/**
 * The backend conformance suite. Every leasehold backend runs it, and so can yours: it needs
 * no test framework, only a function that creates the backend.
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
import type { Backend } from "./backend.ts";
import { isLockError } from "./errors.ts";
import type { Lease } from "./lease.ts";
import { createMutex, type Mutex, type MutexOptions } from "./mutex.ts";
import { sleep } from "./time.ts";

/** Options of {@link conformanceChecks} and {@link testBackend}. */
export interface ConformanceOptions {
  /** Creates the backend under test; called once per check. */
  backend: () => Backend | Promise<Backend>;
  /**
   * The ttl in ms of every mutex the checks create; the expiry checks wait about this long.
   * Must be within the backend's `ttlRange` (pass 15 000 for Azure). Default 1 000.
   */
  ttl?: number;
  /** Sequential acquire/release cycles in the token check. Default 500. */
  cycles?: number;
  /** Concurrent contenders in the exclusivity check. Default 100. */
  contenders?: number;
  /** A prefix for the lock names the checks use, each made unique. Default `"conformance"`. */
  prefix?: string;
}

/** One check: run it and it throws on failure. `timeout` is the ms it may take. */
export interface ConformanceCheck {
  name: string;
  timeout: number;
  run: () => Promise<void>;
}

/** The minimal shape of a BDD runner: `describe(name, fn)` and `it(name, fn, timeout)`. */
export interface Runner {
  describe: (name: string, fn: () => void) => unknown;
  it: (name: string, fn: () => Promise<void>, timeout?: number) => unknown;
}

function assert(ok: unknown, message: string): asserts ok {
  if (!ok) throw new Error(`conformance: ${message}`);
}

/**
 * The conformance checks as plain async functions, for any runner.
 *
 * @param options The backend factory and the timing to use.
 * @returns The checks, each with a name, a timeout in ms and a `run` that throws on failure.
 */
export function conformanceChecks(options: ConformanceOptions): ConformanceCheck[] {
  const ttl = options.ttl ?? 1_000;
  const cycles = options.cycles ?? 500;
  const contenders = options.contenders ?? 100;
  const unique = (): string => `${options.prefix ?? "conformance"}-${crypto.randomUUID().slice(0, 8)}`;
  const setup = async (extra: Partial<MutexOptions> = {}) => {
    const backend = await options.backend();
    const name = unique();
    const make = (owner: string, more: Partial<MutexOptions> = {}): Mutex =>
      createMutex(backend, { name, ttl, owner, retryDelay: 50, ...extra, ...more });
    return { backend, name, make };
  };
  const slow = 10_000 + ttl * 4;

  const checks: ConformanceCheck[] = [
    {
      name: `exactly one of ${contenders} concurrent tryAcquire calls gets the lease`,
      timeout: 30_000,
      async run() {
        const { make } = await setup();
        const mutexes = Array.from({ length: contenders }, (_, i) => make(`contender ${i}`));
        const leases = await Promise.all(mutexes.map((m) => m.tryAcquire()));
        const won = leases.filter((l): l is Lease => l !== null);
        assert(won.length === 1, `expected exactly 1 lease, got ${won.length}`);
        await won[0]!.release();
      },
    },
    {
      name: `tokens strictly increase over ${cycles} acquire/release cycles by different mutexes`,
      timeout: 30_000 + cycles * 100,
      async run() {
        const { make } = await setup();
        const mutexes = Array.from({ length: 5 }, (_, i) => make(`cycler ${i}`));
        let last = Number.NEGATIVE_INFINITY;
        for (let i = 0; i < cycles; i++) {
          const lease = await mutexes[i % mutexes.length]!.acquire({ timeout: 10_000 });
          assert(Number.isSafeInteger(lease.token), `token ${lease.token} is not an integer`);
          assert(lease.token > last, `cycle ${i}: token ${lease.token} is not greater than ${last}`);
          last = lease.token;
          await lease.release();
        }
      },
    },
    {
      name: "holder() reports owner and token while held and null after release",
      timeout: 30_000,
      async run() {
        const { make } = await setup();
        const owner = `owner with spaces, "quotes", | and émoji 🔒`;
        const a = make(owner);
        assert((await a.holder()) === null, "holder() of a fresh name is not null");
        const lease = await a.acquire({ timeout: 10_000 });
        assert(lease.owner === owner, "lease.owner differs from the owner option");
        const seen = await make("observer").holder();
        assert(seen?.owner === owner, `holder().owner is ${JSON.stringify(seen?.owner)}, expected ${owner}`);
        assert(seen.token === lease.token, `holder().token is ${seen.token}, expected ${lease.token}`);
        await lease.release();
        assert((await a.holder()) === null, "holder() is not null after release");
      },
    },
    {
      name: "release by a non-owner changes nothing",
      timeout: 30_000,
      async run() {
        const { backend, name, make } = await setup();
        const a = make("a");
        const lease = await a.acquire({ timeout: 10_000 });
        await backend.release({ key: name, nonce: crypto.randomUUID() });
        assert((await make("b").tryAcquire()) === null, "another mutex acquired after a foreign release");
        assert((await a.holder())?.token === lease.token, "the holder changed after a foreign release");
        assert(
          !(await backend.renew({ key: name, nonce: crypto.randomUUID(), ttl })),
          "renew with a foreign nonce succeeded",
        );
        assert(!lease.signal.aborted, "the holder's signal aborted after a foreign release");
        await lease.release();
      },
    },
    {
      name: "a lease that is not renewed aborts its signal before it expires; then another takes over",
      timeout: slow,
      async run() {
        const { make } = await setup({ renew: false });
        const a = make("a");
        const lease = await a.acquire({ timeout: 10_000 });
        const aborted = new Promise<number>((resolve) =>
          lease.signal.addEventListener("abort", () => resolve(performance.now()), { once: true }),
        );
        const b = make("b");
        assert((await b.tryAcquire()) === null, "b acquired while a held the lease");
        const next = await b.acquire({ timeout: ttl * 3 });
        const tookOver = performance.now();
        assert(lease.signal.aborted, "a's signal was not aborted when b took over");
        assert((await aborted) <= tookOver, "a's signal aborted after b took over");
        assert(isLockError(lease.signal.reason), "a's signal reason is not a LockError");
        assert(lease.signal.reason.code === "ERR_LEASE_LOST", `reason code is ${lease.signal.reason.code}`);
        assert(next.token > lease.token, `takeover token ${next.token} is not greater than ${lease.token}`);
        const renewed = await lease.renew().then(
          () => true,
          (e: unknown) => !(isLockError(e) && e.code === "ERR_LEASE_LOST"),
        );
        assert(!renewed, "the old holder's renew() did not reject with LeaseLostError");
        await lease.release();
        assert(
          (await b.holder())?.token === next.token,
          "the old holder's release freed the new holder's lock",
        );
        await next.release();
      },
    },
    {
      name: "after a takeover the old holder's nonce can neither renew nor release",
      timeout: slow,
      async run() {
        const { backend, name } = await setup();
        const first = crypto.randomUUID();
        const a = await backend.acquire({ key: name, owner: "a", nonce: first, ttl });
        assert(a.ok, "the first acquire failed on a free name");
        await sleep(ttl + 100);
        const second = crypto.randomUUID();
        let takeover: string | undefined;
        if (backend.expiry === "observed") {
          // No expiry of its own: a contender takes over the version it saw unchanged long enough.
          const seen = await backend.acquire({ key: name, owner: "b", nonce: second, ttl });
          assert(!seen.ok && typeof seen.version === "string", "a refusal did not carry the version");
          takeover = seen.version;
        }
        const b = await backend.acquire({
          key: name,
          owner: "b",
          nonce: second,
          ttl,
          ...(takeover ? { takeover } : {}),
        });
        assert(b.ok, "acquire after the expiry failed");
        assert(b.token > a.token, "the takeover token is not greater");
        assert(
          !(await backend.renew({ key: name, nonce: first, ttl })),
          "the expired holder's renew succeeded",
        );
        await backend.release({ key: name, nonce: first });
        assert((await backend.inspect(name))?.owner === "b", "the expired holder's release freed the lock");
        await backend.release({ key: name, nonce: second });
        assert((await backend.inspect(name)) === null, "the holder's release did not free the lock");
      },
    },
    {
      name: "background renewal keeps the lease past its ttl",
      timeout: slow,
      async run() {
        const { make } = await setup();
        const lease = await make("a").acquire({ timeout: 10_000 });
        await sleep(ttl * 2);
        assert(!lease.signal.aborted, `the renewed lease was lost: ${String(lease.signal.reason)}`);
        assert((await make("b").tryAcquire()) === null, "another mutex acquired a renewed lease");
        await lease.renew();
        await lease.release();
        assert(lease.signal.aborted, "release did not abort the signal");
      },
    },
    {
      name: "await using releases the lease at the end of the scope",
      timeout: 30_000,
      async run() {
        const { make } = await setup();
        const a = make("a");
        let signal: AbortSignal | undefined;
        {
          await using lease = await a.acquire({ timeout: 10_000 });
          signal = lease.signal;
          assert((await make("b").tryAcquire()) === null, "another mutex acquired inside the scope");
        }
        assert(signal.aborted, "the signal is not aborted after the scope");
        assert((await a.holder()) === null, "the lock is still held after the scope");
        const again = await make("c").tryAcquire();
        assert(again !== null, "another mutex could not acquire after the scope");
        await again.release();
      },
    },
    {
      name: "raiseFence, where offered: raises the holder's token and every later one, never lowers, only for the holder",
      timeout: 30_000,
      async run() {
        const { backend, name } = await setup();
        if (backend.raiseFence === undefined) return; // an optional capability (leasehold/quorum)
        const raise = (nonce: string, token: number) =>
          backend.raiseFence!({ key: name, owner: "a", nonce, token });
        const nonce = crypto.randomUUID();
        const a = await backend.acquire({ key: name, owner: "a", nonce, ttl });
        assert(a.ok, "the first acquire failed on a free name");
        const high = a.token + 5;
        assert(await raise(nonce, high), "raiseFence by the holder answered false");
        const seen = await backend.inspect(name);
        assert(
          seen?.token === high && seen.owner === "a",
          `inspect after raiseFence: ${JSON.stringify(seen)}`,
        );
        assert(await raise(nonce, a.token), "raiseFence to a lower token by the holder answered false");
        assert((await backend.inspect(name))?.token === high, "raiseFence lowered the token");
        assert(!(await raise(crypto.randomUUID(), high + 10)), "raiseFence by a non-holder answered true");
        assert((await backend.inspect(name))?.token === high, "raiseFence by a non-holder changed the token");
        assert(await backend.renew({ key: name, nonce, ttl }), "renew after raiseFence failed");
        await backend.release({ key: name, nonce });
        assert(!(await raise(nonce, high + 10)), "raiseFence after release answered true");
        const next = crypto.randomUUID();
        const b = await backend.acquire({ key: name, owner: "b", nonce: next, ttl });
        assert(b.ok && b.token > high, `the next token ${b.ok && b.token} is not above the raised ${high}`);
        await backend.release({ key: name, nonce: next });
      },
    },
    {
      name: "observed expiry, where declared: refusals carry the holder's version and ttl; a takeover succeeds only on the current version",
      timeout: 30_000,
      async run() {
        const { backend, name } = await setup();
        if (backend.expiry !== "observed") return; // the store expires locks itself
        const holder = crypto.randomUUID();
        const a = await backend.acquire({ key: name, owner: "a", nonce: holder, ttl });
        assert(a.ok, "the first acquire failed on a free name");
        const refuse = () => backend.acquire({ key: name, owner: "b", nonce: crypto.randomUUID(), ttl });
        const seen = await refuse();
        assert(!seen.ok && typeof seen.version === "string", "a refusal did not carry the holder's version");
        assert(seen.ttl === ttl, `a refusal carried ttl ${seen.ttl}, not the holder's ${ttl}`);
        assert(!seen.ok && (await refuse()).ok === false, "a plain acquire took a held lock");
        const again = await refuse();
        assert(!again.ok && again.version === seen.version, "the version changed without a write");
        assert(await backend.renew({ key: name, nonce: holder, ttl }), "the holder's renew failed");
        const renewed = await refuse();
        assert(!renewed.ok && renewed.version !== seen.version, "a renewal did not change the version");
        const late = crypto.randomUUID();
        const stale = await backend.acquire({
          key: name,
          owner: "b",
          nonce: late,
          ttl,
          takeover: seen.version!,
        });
        assert(!stale.ok, "a takeover of a version the holder had renewed since succeeded");
        const b = await backend.acquire({
          key: name,
          owner: "b",
          nonce: late,
          ttl,
          takeover: renewed.version!,
        });
        assert(
          b.ok && b.token > a.token,
          "a takeover of the current version failed or its token is not greater",
        );
        assert(
          !(await backend.renew({ key: name, nonce: holder, ttl })),
          "the taken-over holder could renew",
        );
        await backend.release({ key: name, nonce: holder });
        assert(
          (await backend.inspect(name))?.owner === "b",
          "the taken-over holder's release freed the lock",
        );
        await backend.release({ key: name, nonce: late });
        const free = await backend.acquire({ key: name, owner: "c", nonce: crypto.randomUUID(), ttl });
        assert(free.ok, "a released lock was not free at once");
      },
    },
    {
      name: "observed expiry, where declared: a renewing holder is never taken over; a silent one is, after its version stayed unchanged",
      timeout: slow,
      async run() {
        const { backend, make } = await setup();
        if (backend.expiry !== "observed") return; // the store expires locks itself
        const holder = await make("a").acquire({ timeout: 10_000 });
        const contender = make("b");
        const waited = await contender.acquire({ timeout: ttl * 2.5 }).then(
          (l) => l,
          (e: unknown) => e,
        );
        assert(isLockError(waited) && waited.code === "ERR_LOCK_TIMEOUT", "a renewing holder was taken over");
        assert(!holder.signal.aborted, "the renewing holder lost its lease");
        await holder.release();
        const quiet = await make("d", { renew: false }).acquire({ timeout: 10_000 });
        const aborted = new Promise<number>((resolve) =>
          quiet.signal.addEventListener("abort", () => resolve(performance.now()), { once: true }),
        );
        const started = performance.now();
        const next = await contender.acquire({ timeout: ttl * 4 });
        const tookOver = performance.now();
        assert((await aborted) <= tookOver, "the silent holder's signal aborted after the takeover");
        assert(
          tookOver - started >= ttl,
          `taken over ${Math.round(tookOver - started)} ms after the holder's write, before its ttl`,
        );
        assert(next.token > quiet.token, "the takeover token is not greater");
        await next.release();
      },
    },
  ];
  return checks;
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
