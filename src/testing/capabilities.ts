// The checks of the optional capabilities (src/backend.ts), each passing at once on a backend
// without it: raiseFence, observed expiry, waiting in line (acquireQueued), wake on release (watch),
// renewMany.
import type { Backend } from "../backend.ts";
import { isLockError } from "../errors.ts";
import type { Lease } from "../lease.ts";
import { createMutex } from "../mutex.ts";
import { sleep } from "../time.ts";
import { assert, type ConformanceCheck, type ConformanceOptions, mutexSuite, type Setup } from "./shared.ts";

/** The checks of the optional capabilities, part of `conformanceChecks`. */
export function capabilityChecks(options: ConformanceOptions): ConformanceCheck[] {
  const { ttl, setup, slow } = mutexSuite(options);
  return [
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
        const seen = await backend.inspect({ key: name });
        assert(
          seen?.token === high && seen.owner === "a",
          `inspect after raiseFence: ${JSON.stringify(seen)}`,
        );
        assert(await raise(nonce, a.token), "raiseFence to a lower token by the holder answered false");
        assert((await backend.inspect({ key: name }))?.token === high, "raiseFence lowered the token");
        assert(!(await raise(crypto.randomUUID(), high + 10)), "raiseFence by a non-holder answered true");
        assert(
          (await backend.inspect({ key: name }))?.token === high,
          "raiseFence by a non-holder changed the token",
        );
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
          (await backend.inspect({ key: name }))?.owner === "b",
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
    ...waitingChecks(setup, ttl),
    ...watchChecks(setup, ttl),
  ];
}

/**
 * The checks of the optional waiting capability (`Backend.acquireQueued`); each passes at once
 * when the backend does not offer it. Holders use a ttl 10 times the suite's and waiters a
 * `retryDelay` of a minute, so a waiter that polled instead of being woken would wait for the
 * holder's expiry (seconds), while a woken one gets the lease within one suite ttl of the release.
 */
function waitingChecks(setup: Setup, ttl: number): ConformanceCheck[] {
  const long = { ttl: ttl * 10, retryDelay: 60_000 };
  /** Resolves once the backend reports `n` waiters (or, when it reports none, after a pause). */
  const queued = async (backend: Backend, name: string, n: number): Promise<void> => {
    for (let i = 0; i < 500; i++) {
      const info = await backend.inspect({ key: name });
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
        const info = await backend.inspect({ key: name });
        assert(info?.owner === "next", `the holder is ${JSON.stringify(info?.owner)}, expected "next"`);
        assert(!info.waiters, `${info.waiters} waiter(s) left in line after everyone was served`);
        await lease.release();
      },
    },
    {
      name: "renewMany, where offered: renews each key its nonce holds, answers false for the others, in order, and touches nothing else",
      timeout: 30_000 + ttl * 4,
      async run() {
        const { backend, name } = await setup();
        if (!backend.renewMany) return;
        const keys = [`${name}-a`, `${name}-b`, `${name}-c`, `${name}-free`];
        const nonces = keys.map(() => crypto.randomUUID());
        for (const [i, key] of keys.slice(0, 3).entries()) {
          const r = await backend.acquire({ key, owner: `o${i}`, nonce: nonces[i]!, ttl });
          assert(r.ok, `the acquire of ${key} failed on a free name`);
        }
        // b is another holder's: its nonce in the batch is not the holder's.
        const requests = keys.map((key, i) => ({
          key,
          nonce: i === 1 ? crypto.randomUUID() : nonces[i]!,
          ttl: ttl * 3,
        }));
        const answers = await backend.renewMany({ requests });
        assert(
          JSON.stringify(answers) === "[true,false,true,false]",
          `renewMany answered ${JSON.stringify(answers)}, expected [true,false,true,false]`,
        );
        await sleep(ttl * 1.5);
        const [a, b, c, free] = await Promise.all(keys.map((key) => backend.inspect({ key })));
        assert(a?.owner === "o0" && c?.owner === "o2", "a key renewed by renewMany expired at its first ttl");
        assert(b === null, `the key whose nonce did not match was renewed (holder ${JSON.stringify(b)})`);
        assert(free === null, `renewMany took a free key (holder ${JSON.stringify(free)})`);
        for (const i of [0, 2]) await backend.release({ key: keys[i]!, nonce: nonces[i]! });
      },
    },
  ];
}

/**
 * The checks of the optional wake on release (`Backend.watch`, docs/DESIGN.md §19); each passes
 * at once when the backend does not offer it. The waiter's pauses double from 25 ms up to its
 * `retryDelay` of a minute: the holder releases just after an attempt that began a pause of at
 * least 1.9 s, so a woken waiter gets the lease well before its next poll could have come.
 */
function watchChecks(setup: Setup, ttl: number): ConformanceCheck[] {
  return [
    {
      name: "wake on release (watch), where offered: a waiter gets the lease on release, not at its next poll; its watches end with its wait",
      timeout: 60_000 + ttl * 20,
      async run() {
        const long = { ttl: Math.max(ttl * 10, 10_000), retryDelay: 60_000 };
        const { backend, name, make } = await setup(long);
        if (!backend.watch) return;
        // Every watch's signal, to see that each ends with the wait (the backend's own object,
        // so its methods keep their `this`).
        const watches: AbortSignal[] = [];
        const watched: typeof backend = Object.create(backend);
        watched.watch = (key, wake, signal) => {
          watches.push(signal);
          return backend.watch!.call(backend, key, wake, signal);
        };
        const holder = await make("holder").acquire({ timeout: 10_000 });
        // The 8th refused attempt begins a pause of at least 0.6 × 25 ms × 2^7 = 1 920 ms.
        let refusals = 0;
        let release: (() => void) | undefined;
        const ready = new Promise<void>((resolve) => (release = resolve));
        const waiting = createMutex(watched, {
          name,
          owner: "waiter",
          ...long,
          onEvent: (event) => {
            if (event.type === "attempt" && event.outcome === "taken" && ++refusals === 8) release?.();
          },
        }).acquire({ timeout: 30_000 + long.ttl });
        await ready;
        const released = performance.now();
        await holder.release();
        const lease = await waiting;
        const late = performance.now() - released;
        assert(watches.length > 0, "the waiter never watched the lock");
        assert(
          late < 1_500,
          `the waiter got the lease ${Math.round(late)} ms after the release: at its next poll, not woken by it`,
        );
        assert(lease.token > holder.token, "the woken waiter's token is not greater");
        assert(
          watches.every((s) => s.aborted),
          "a watch of the waiter is still live after its acquire settled",
        );
        await lease.release();
      },
    },
  ];
}
