// The mutex checks every backend must pass: exclusivity, tokens, holder(), owners, release,
// expiry and takeover, renewal, `await using`.
import { isLockError } from "../errors.ts";
import type { Lease } from "../lease.ts";
import { sleep } from "../time.ts";
import {
  assert,
  type ConformanceCheck,
  type ConformanceOptions,
  contentionTtl,
  eventually,
  mutexSuite,
} from "./shared.ts";

/** The checks of a mutex on the backend, part of `conformanceChecks`. */
export function mutexChecks(options: ConformanceOptions): ConformanceCheck[] {
  const { ttl, cycles, contenders, setup, slow } = mutexSuite(options);
  return [
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
        assert(
          (await backend.inspect({ key: name }))?.owner === "b",
          "the expired holder's release freed the lock",
        );
        await backend.release({ key: name, nonce: second });
        assert((await backend.inspect({ key: name })) === null, "the holder's release did not free the lock");
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
  ];
}
