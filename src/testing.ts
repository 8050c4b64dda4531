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
import type { Backend } from "./backend.ts";
import { isLockError } from "./errors.ts";
import type { Lease } from "./lease.ts";
import { createMutex, type Mutex, type MutexOptions } from "./mutex.ts";
import { createSemaphore, type Permit, type Semaphore, type SemaphoreOptions, slotKey } from "./semaphore.ts";
import { sleep } from "./time.ts";

/** Options of {@link conformanceChecks} and {@link testBackend}. */
export interface ConformanceOptions {
  /** Creates the backend under test; called once per check. */
  backend: () => Backend | Promise<Backend>;
  /**
   * The ttl in ms of the mutexes the checks create (the exclusivity checks' contenders use at
   * least 10 000, within the backend's range); the expiry checks wait about this long.
   * Must be within the backend's `ttlRange` (pass 15 000 for Azure). Default 1 000.
   */
  ttl?: number;
  /** Sequential acquire/release cycles in the token check. Default 500. */
  cycles?: number;
  /** Concurrent contenders in the exclusivity check. Default 100. */
  contenders?: number;
  /** A prefix for the lock names the checks use, each made unique. Default `"conformance"`. */
  prefix?: string;
  /**
   * The backend decides each operation by a vote of several stores (`leasehold/quorum`), so
   * concurrent contenders may split the vote and none of them wins a lock or a slot. The
   * exclusivity checks then require at most one winner per lock or slot, and that the next
   * uncontended attempts take what the split left free. Default false: exactly one winner per
   * lock and per slot.
   */
  splitVotes?: boolean;
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
 * The ttl of the contenders in the exclusivity checks: at least 10 s (within the backend's range).
 * Those checks are about who wins, not about speed: each attempt may take up to ttl − guard, and
 * with the suite's short ttl 100 statements queued behind a client's pool of 20 connections on a
 * slow disk did not fit in 393 ms ("no answer"). The winner releases at once, so nothing waits
 * this long.
 */
function contentionTtl(ttl: number, backend: Backend): number {
  return Math.min(Math.max(ttl, 10_000), backend.ttlRange?.[1] ?? Number.POSITIVE_INFINITY);
}

/**
 * `take` until it answers non-null, at most 20 times 50 ms apart: what a split vote or a timed-out
 * attempt left taken is given back in the background, and is free again soon after.
 */
async function eventually<T>(take: () => Promise<T | null>): Promise<T | null> {
  for (let i = 0; ; i++) {
    const got = await take();
    if (got !== null || i === 19) return got;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
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
      name: options.splitVotes
        ? `at most one of ${contenders} concurrent tryAcquire calls gets the lease; after a split vote the next attempt does`
        : `exactly one of ${contenders} concurrent tryAcquire calls gets the lease`,
      timeout: 30_000,
      async run() {
        const { backend, make } = await setup();
        const roomy = { ttl: contentionTtl(ttl, backend) };
        const mutexes = Array.from({ length: contenders }, (_, i) => make(`contender ${i}`, roomy));
        const leases = await Promise.all(mutexes.map((m) => m.tryAcquire()));
        const won = leases.filter((l): l is Lease => l !== null);
        assert(won.length <= 1, `expected exactly 1 lease, got ${won.length}`);
        if (won.length === 0 && options.splitVotes) {
          const late = await eventually(() => make("after the split", roomy).tryAcquire());
          if (late) won.push(late);
        }
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
      name: 'holder() gives back exactly every kind of owner createMutex accepts (a store that cannot hold one refuses the acquire with a TypeError or RangeError about the owner): the longest (256 characters, in 3- and 4-byte UTF-8), non-ASCII, Latin-1, spaces at either end, | % " \\, U+FEFF, U+FFFF, U+2028',
      timeout: 30_000,
      async run() {
        const { make } = await setup();
        const owners = [
          ` padded, "quoted" \\ |piped| 100% %41 `,
          "\uFEFFbom \uFFFF \u2028 \u00A0 \u00AD é 日本 🔒",
          "José ÿ", // Latin-1 only: a one-byte string in V8
          "日".repeat(256),
          "🔒".repeat(128),
          "|",
        ];
        for (const [i, owner] of owners.entries()) {
          const lease = await make(owner)
            .acquire({ timeout: 10_000 })
            .catch((e: unknown) =>
              e instanceof TypeError || e instanceof RangeError ? e : Promise.reject(e),
            );
          const seen = (await make("observer").holder())?.owner;
          if (lease instanceof Error) {
            // A store that cannot hold it must say so, before anything is written.
            assert(/\bowner\b/.test(lease.message), `owner ${i}: refused with "${lease.message}"`);
            assert(seen === undefined, `owner ${i}: refused, yet the lock is held`);
            continue;
          }
          assert(seen === owner, `owner ${i}: holder() answered ${JSON.stringify(seen)?.slice(0, 100)}`);
          await lease.release();
        }
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
        const after = await b.holder();
        assert(
          after?.token === next.token,
          `the old holder's release freed the new holder's lock (holder() answered ${JSON.stringify(after)}, the new lease's token is ${next.token})`,
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
      name: "raiseFence, where offered: a fence raised to Number.MAX_SAFE_INTEGER is either refused (the name goes on) or exhausted: the next acquire() fails at once, non-retryable, naming it, never retried until its timeout",
      timeout: slow + 20_000,
      async run() {
        const { backend, name, make } = await setup();
        if (backend.raiseFence === undefined) return; // an optional capability (leasehold/quorum)
        const nonce = crypto.randomUUID();
        const a = await backend.acquire({ key: name, owner: "a", nonce, ttl });
        assert(a.ok, "the first acquire failed on a free name");
        const top = Number.MAX_SAFE_INTEGER;
        const raised = await backend
          .raiseFence({ key: name, owner: "a", nonce, token: top })
          .catch((error: unknown) => error);
        await backend.release({ key: name, nonce });
        const next = await make("b")
          .acquire({ timeout: slow })
          .catch((error: unknown) => error);
        if (raised !== true) {
          // A backend that bounds raises (the Durable Object: 2^52) refuses it at once.
          const refused =
            raised instanceof RangeError ||
            raised instanceof TypeError ||
            (isLockError(raised) && (raised as { retryable?: boolean }).retryable === false);
          assert(refused, `raiseFence to ${top} answered ${String(raised)}, neither true nor a refusal`);
          assert(!(next instanceof Error), `acquire after a refused raise failed: ${String(next)}`);
          await (next as Lease).release();
          return;
        }
        assert(
          isLockError(next) &&
            next.code === "ERR_BACKEND" &&
            (next as { retryable?: boolean }).retryable === false &&
            next.message.includes(`the fence counter of lock ${JSON.stringify(name)} is exhausted`),
          `acquire after a raise to ${top} answered ${next instanceof Error ? `${next.name}: ${next.message}` : `a lease with token ${(next as Lease).token}`}, expected a non-retryable ERR_BACKEND naming the exhausted fence counter`,
        );
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
  return [...checks, ...waitingChecks(setup, ttl), ...semaphoreChecks(options)];
}

/**
 * The checks of the optional waiting capability (`Backend.acquireQueued`); each passes at once
 * when the backend does not offer it. Holders use a ttl 10 times the suite's and waiters a
 * `retryDelay` of a minute, so a waiter that polled instead of being woken would wait for the
 * holder's expiry (seconds), while a woken one gets the lease within one suite ttl of the release.
 */
function waitingChecks(
  setup: (extra?: Partial<MutexOptions>) => Promise<{
    backend: Backend;
    name: string;
    make: (owner: string, more?: Partial<MutexOptions>) => Mutex;
  }>,
  ttl: number,
): ConformanceCheck[] {
  const long = { ttl: ttl * 10, retryDelay: 60_000 };
  /** Resolves once the backend reports `n` waiters (or, when it reports none, after a pause). */
  const queued = async (backend: Backend, name: string, n: number): Promise<void> => {
    for (let i = 0; i < 500; i++) {
      const info = await backend.inspect(name);
      if (info?.waiters === undefined) return sleep(100);
      if (info.waiters >= n) return;
      await sleep(10);
    }
    throw new Error(`conformance: the backend never reported ${n} waiter(s)`);
  };
  return [
    {
      name: "waiting (acquireQueued): 5 waiters are served in arrival order, each woken by the release before it",
      timeout: 30_000 + ttl * 20,
      async run() {
        const { backend, name, make } = await setup(long);
        if (!backend.acquireQueued) return;
        const holder = await make("holder").acquire({ timeout: 10_000 });
        const served: { i: number; token: number; late: number }[] = [];
        let released = 0;
        const waiting: Promise<void>[] = [];
        for (let i = 0; i < 5; i++) {
          waiting.push(
            make(`waiter ${i}`)
              .acquire({ timeout: 20_000 + ttl * 10 })
              .then(async (lease) => {
                served.push({ i, token: lease.token, late: performance.now() - released });
                await sleep(5);
                released = performance.now();
                await lease.release();
              }),
          );
          await queued(backend, name, i + 1);
        }
        released = performance.now();
        await holder.release();
        await Promise.all(waiting);
        assert(
          served.map((s) => s.i).join() === "0,1,2,3,4",
          `served in the order ${served.map((s) => s.i).join()}, expected 0,1,2,3,4`,
        );
        let last = holder.token;
        for (const s of served) {
          assert(s.token > last, `waiter ${s.i}'s token ${s.token} is not greater than ${last}`);
          last = s.token;
          assert(
            s.late < ttl,
            `waiter ${s.i} got the lease ${Math.round(s.late)} ms after the release before it (woken, it takes a round trip; polling, the holder's expiry)`,
          );
        }
      },
    },
    {
      name: "waiting (acquireQueued): a waiter that gives up leaves the line; the next one is served on release",
      timeout: 30_000 + ttl * 20,
      async run() {
        const { backend, name, make } = await setup(long);
        if (!backend.acquireQueued) return;
        const holder = await make("holder").acquire({ timeout: 10_000 });
        const quitter = make("quitter")
          .acquire({ timeout: ttl })
          .then(
            () => "acquired",
            (e: unknown) => (isLockError(e) ? e.code : String(e)),
          );
        await queued(backend, name, 1);
        const next = make("next").acquire({ timeout: 20_000 + ttl * 10 });
        assert((await quitter) === "ERR_LOCK_TIMEOUT", "the waiter with a timeout did not time out");
        const released = performance.now();
        await holder.release();
        const lease = await next;
        const late = performance.now() - released;
        assert(late < ttl, `the next waiter got the lease ${Math.round(late)} ms after the release`);
        assert(lease.token > holder.token, "the next waiter's token is not greater");
        const info = await backend.inspect(name);
        assert(info?.owner === "next", `the holder is ${JSON.stringify(info?.owner)}, expected "next"`);
        assert(!info.waiters, `${info.waiters} waiter(s) left in line after everyone was served`);
        await lease.release();
      },
    },
  ];
}

/**
 * The semaphore checks (`createSemaphore` over the backend, and `Backend.acquireAny` and
 * `Backend.releaseAny` where offered), part of {@link conformanceChecks}: at most `limit` permits at once, distinct slots,
 * different limits overlapping, permits freed on release and on expiry, tokens increasing per slot.
 *
 * @param options The backend factory and the timing to use.
 * @returns The checks, each with a name, a timeout in ms and a `run` that throws on failure.
 */
export function semaphoreChecks(options: ConformanceOptions): ConformanceCheck[] {
  const ttl = options.ttl ?? 1_000;
  const contenders = Math.max(4, Math.min(20, Math.floor((options.contenders ?? 100) / 5)));
  const setup = async () => {
    const backend = await options.backend();
    const name = `${options.prefix ?? "conformance"}-sem-${crypto.randomUUID().slice(0, 8)}`;
    const make = (owner: string, limit: number, more: Partial<SemaphoreOptions> = {}): Semaphore =>
      createSemaphore(backend, { name, limit, ttl, owner, retryDelay: 50, ...more });
    return { backend, name, make };
  };
  const held = (permits: (Permit | null)[]) => permits.filter((p): p is Permit => p !== null);
  /** tryAcquire, tried again after a retryable failure (a loaded backend may not answer in time). */
  const attempt = async (sem: Semaphore): Promise<Permit | null> => {
    for (let i = 0; ; i++) {
      try {
        return await sem.tryAcquire();
      } catch (error) {
        const retryable = isLockError(error) && (error as { retryable?: boolean }).retryable === true;
        if (i >= 3 || !retryable) throw error;
      }
    }
  };
  const releaseAll = (permits: Permit[]) => Promise.all(permits.map((p) => p.release()));
  const slow = 10_000 + ttl * 6;
  return [
    {
      name: `semaphore: of ${contenders} concurrent tryAcquire calls ${options.splitVotes ? "at most limit (3) get a permit and the next attempts the rest" : "exactly limit (3) get a permit"}, one per slot; holders() lists them; a released slot is taken again with a greater token`,
      timeout: 30_000,
      async run() {
        const { backend, make } = await setup();
        const roomy = { ttl: contentionTtl(ttl, backend) };
        const sems = Array.from({ length: contenders }, (_, i) => make(`contender ${i}`, 3, roomy));
        const won = held(await Promise.all(sems.map(attempt)));
        assert(won.length <= 3, `expected 3 permits, got ${won.length}`);
        for (let i = 0; options.splitVotes && won.length < 3; i++) {
          const late = await eventually(() => attempt(make(`after the split ${i}`, 3, roomy)));
          if (!late) break;
          won.push(late);
        }
        assert(won.length === 3, `expected 3 permits, got ${won.length}`);
        const slots = won.map((p) => p.slot).sort();
        assert(slots.join() === "0,1,2", `the permits hold slots ${slots.join()}, expected 0,1,2`);
        const listed = await sems[0]!.holders();
        assert(
          listed.map((h) => `${h.slot}/${h.owner}/${h.token}`).join() ===
            won
              .sort((a, b) => a.slot - b.slot)
              .map((p) => `${p.slot}/${p.owner}/${p.token}`)
              .join(),
          `holders() answered ${JSON.stringify(listed)}`,
        );
        assert((await make("late", 3).tryAcquire()) === null, "a fourth permit was granted");
        const first = won[0]!;
        await first.release();
        assert(first.signal.aborted, "release did not abort the permit's signal");
        const again = await make("next", 3).tryAcquire();
        assert(again?.slot === first.slot, `the freed slot ${first.slot} was not taken (got ${again?.slot})`);
        assert(
          again.token > first.token,
          `slot ${first.slot}: token ${again.token} is not above ${first.token}`,
        );
        await releaseAll([again, ...won.slice(1)]);
        assert((await sems[0]!.holders()).length === 0, "holders() is not empty after every release");
      },
    },
    {
      name: "semaphore: instances with limits 2 and 4 overlapping never hold more than 4 permits, and the limit-2 ones only slots 0-1",
      timeout: 30_000,
      async run() {
        const { make } = await setup();
        const half = Math.ceil(contenders / 2);
        const small = Array.from({ length: half }, (_, i) => make(`small ${i}`, 2));
        const large = Array.from({ length: half }, (_, i) => make(`large ${i}`, 4));
        const all = [...small, ...large].sort(() => Math.random() - 0.5);
        const won = held(await Promise.all(all.map(attempt)));
        assert(won.length <= 4, `${won.length} permits at once with limits 2 and 4`);
        // An attempt that got no answer in time (or lost a split vote) may have taken a slot that
        // was then freed in the background (it never became a permit): such a slot is taken now.
        for (let i = 0; won.length < 4; i++) {
          const late = await eventually(() => attempt(make(`large, later ${i}`, 4)));
          if (!late) break;
          won.push(late);
        }
        assert(won.length === 4, `expected 4 permits in all, got ${won.length}`);
        assert((await attempt(make("large, fifth", 4))) === null, "a fifth permit was granted");
        for (const p of won) {
          assert(!p.owner.startsWith("small") || p.slot < 2, `a limit-2 instance holds slot ${p.slot}`);
        }
        assert(new Set(won.map((p) => p.slot)).size === 4, "two permits share a slot");
        await releaseAll(won);
      },
    },
    {
      name: "semaphore: a full semaphore's acquire gets the permit freed by an expiry (its signal aborted first) or a release; tokens increase per slot",
      timeout: slow,
      async run() {
        const { make } = await setup();
        const a = await make("a", 2, { renew: false }).acquire({ timeout: 10_000 });
        const b = await make("b", 2).acquire({ timeout: 10_000 });
        assert(a.slot !== b.slot, "two permits share a slot");
        const aborted = new Promise<number>((resolve) =>
          a.signal.addEventListener("abort", () => resolve(performance.now()), { once: true }),
        );
        const c = make("c", 2);
        assert((await c.tryAcquire()) === null, "a third permit was granted with limit 2");
        const next = await c.acquire({ timeout: ttl * 4 });
        const tookOver = performance.now();
        // The expired slot (or b's, if a loaded machine made b lose its permit meanwhile).
        const before = next.slot === a.slot ? a : b;
        assert(
          next.slot === a.slot || b.signal.aborted,
          `the waiter got slot ${next.slot}, held by a live permit`,
        );
        if (before === a)
          assert((await aborted) <= tookOver, "the expired permit's signal aborted after the takeover");
        assert(
          next.token > before.token,
          `slot ${next.slot}: token ${next.token} is not above ${before.token}`,
        );
        const waiting = make("d", 2).acquire({ timeout: ttl * 4 });
        await b.release();
        const d = await waiting;
        assert(
          d.token > (d.slot === b.slot ? b.token : a.token),
          "a freed slot was not taken with a greater token",
        );
        const last = new Map<number, number>([
          [d.slot, d.token],
          [next.slot, next.token],
        ]);
        await releaseAll([d, next, a]);
        for (let i = 0; i < 6; i++) {
          const p = await make(`cycler ${i}`, 2).acquire({ timeout: 10_000 });
          assert(p.token > (last.get(p.slot) ?? 0), `slot ${p.slot}: token ${p.token} did not increase`);
          last.set(p.slot, p.token);
          await p.release();
        }
      },
    },
    {
      name: "acquireAny, where offered: the first free key in order, tokens per key, retryAfter (the earliest expiry) when all are taken, and per-key acquire, renew and release on the same keys",
      timeout: 30_000,
      async run() {
        const { backend, name } = await setup();
        if (!backend.acquireAny || backend.expiry === "observed") return; // an optional capability
        const keys = [0, 1, 2].map((slot) => slotKey(name, slot));
        const any = (nonce: string) => backend.acquireAny!({ keys, owner: "any", nonce, ttl });
        const n0 = crypto.randomUUID();
        // Key 0 outlives the others, so that retryAfter must be the earliest expiry, not the last.
        const long = Math.min(2 * ttl, backend.ttlRange?.[1] ?? Number.POSITIVE_INFINITY);
        const k0 = await backend.acquire({ key: keys[0]!, owner: "per-key", nonce: n0, ttl: long });
        assert(k0.ok, "a per-key acquire failed on a free key");
        const n1 = crypto.randomUUID();
        const r1 = await any(n1);
        assert(r1.ok && r1.index === 1, `acquireAny took ${JSON.stringify(r1)}, expected index 1`);
        assert(
          Number.isSafeInteger(r1.token) && r1.token > 0,
          "acquireAny's token is not a positive integer",
        );
        const other = await backend.acquire({ key: keys[1]!, owner: "b", nonce: crypto.randomUUID(), ttl });
        assert(!other.ok, "a per-key acquire took the key acquireAny holds");
        const seen = await backend.inspect(keys[1]!);
        assert(seen?.owner === "any" && seen.token === r1.token, `inspect: ${JSON.stringify(seen)}`);
        assert(await backend.renew({ key: keys[1]!, nonce: n1, ttl }), "renew of acquireAny's key failed");
        await backend.release({ key: keys[1]!, nonce: n1 });
        assert((await backend.inspect(keys[1]!)) === null, "release did not free acquireAny's key");
        const again = await any(crypto.randomUUID());
        assert(again.ok && again.index === 1, "the released key was not the first free one");
        assert(again.token > r1.token, `key 1: token ${again.token} is not above ${r1.token}`);
        const n2 = crypto.randomUUID();
        const r2 = await any(n2);
        assert(r2.ok && r2.index === 2, `acquireAny took ${JSON.stringify(r2)}, expected index 2`);
        const full = await any(crypto.randomUUID());
        assert(!full.ok, "acquireAny took a key while all were held");
        assert(
          full.retryAfter === undefined || (full.retryAfter >= 0 && full.retryAfter <= ttl),
          `retryAfter ${full.retryAfter} is outside 0-${ttl} (the earliest of the keys' expiries)`,
        );
        await backend.release({ key: keys[0]!, nonce: n0 });
        const r0 = await any(crypto.randomUUID());
        assert(
          r0.ok && r0.index === 0 && r0.token > k0.token,
          `after a release of key 0: ${JSON.stringify(r0)}`,
        );
        await backend.release({ key: keys[2]!, nonce: n2 });
        const per = await backend.acquire({ key: keys[2]!, owner: "c", nonce: crypto.randomUUID(), ttl });
        assert(
          per.ok && per.token > r2.token,
          "a per-key acquire after acquireAny did not get a greater token",
        );
      },
    },
    {
      name: "releaseAny, where offered: frees the key the nonce holds, leaves the keys of other nonces alone, and does nothing when the nonce holds none",
      timeout: 30_000,
      async run() {
        const { backend, name } = await setup();
        if (!backend.releaseAny) return; // an optional capability
        const keys = [0, 1, 2].map((slot) => slotKey(name, slot));
        const give = (nonce: string) => backend.releaseAny!({ keys, nonce });
        const [other, ours] = [crypto.randomUUID(), crypto.randomUUID()];
        const a = await backend.acquire({ key: keys[0]!, owner: "other", nonce: other, ttl });
        const b = await backend.acquire({ key: keys[1]!, owner: "ours", nonce: ours, ttl });
        assert(a.ok && b.ok, "a per-key acquire failed on a free key");
        const owners = async () =>
          (await Promise.all(keys.map((k) => backend.inspect(k)))).map((h) => h?.owner);
        await give(crypto.randomUUID());
        assert(
          (await owners()).join() === "other,ours,",
          `releaseAny with a nonce that holds no key changed the holders: ${JSON.stringify(await owners())}`,
        );
        await give(ours);
        assert(
          (await owners()).join() === "other,,",
          `after releaseAny of the nonce of key 1 the holders are ${JSON.stringify(await owners())}, expected key 0's alone`,
        );
        await give(ours);
        assert(
          (await owners()).join() === "other,,",
          "a second releaseAny of the same nonce changed the holders",
        );
        const next = crypto.randomUUID();
        const again = await backend.acquire({ key: keys[1]!, owner: "next", nonce: next, ttl });
        assert(
          again.ok && again.token > b.token,
          "the key releaseAny freed was not taken again with a greater token",
        );
        await backend.release({ key: keys[0]!, nonce: other });
        await backend.release({ key: keys[1]!, nonce: next });
      },
    },
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
