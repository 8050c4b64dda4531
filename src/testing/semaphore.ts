// The semaphore checks: createSemaphore over the backend, and acquireAny and releaseAny where
// the backend offers them.
import { isLockError } from "../errors.ts";
import { createSemaphore, type Permit, type Semaphore, type SemaphoreOptions } from "../semaphore.ts";
import { slotKey } from "../slots.ts";
import {
  assert,
  type ConformanceCheck,
  type ConformanceOptions,
  contentionTtl,
  eventually,
} from "./shared.ts";

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
        const { backend, make } = await setup();
        // The contention ttl, as in the check above: with the suite's short ttl, a loaded machine
        // lost permits granted early (their renewals late) while the last attempts went on, so
        // more than 4 were handed out in all, though never more than 4 at once.
        const roomy = { ttl: contentionTtl(ttl, backend) };
        const half = Math.ceil(contenders / 2);
        const small = Array.from({ length: half }, (_, i) => make(`small ${i}`, 2, roomy));
        const large = Array.from({ length: half }, (_, i) => make(`large ${i}`, 4, roomy));
        const all = [...small, ...large].sort(() => Math.random() - 0.5);
        const won = held(await Promise.all(all.map(attempt)));
        const live = won.filter((p) => !p.signal.aborted);
        assert(live.length <= 4, `${live.length} live permits at once with limits 2 and 4`);
        assert(
          live.length === won.length,
          `${won.length - live.length} of ${won.length} permits lost meanwhile`,
        );
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
        const seen = await backend.inspect({ key: keys[1]! });
        assert(seen?.owner === "any" && seen.token === r1.token, `inspect: ${JSON.stringify(seen)}`);
        assert(await backend.renew({ key: keys[1]!, nonce: n1, ttl }), "renew of acquireAny's key failed");
        await backend.release({ key: keys[1]!, nonce: n1 });
        assert((await backend.inspect({ key: keys[1]! })) === null, "release did not free acquireAny's key");
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
        // Not renewed: a ttl no loaded machine's five round trips outlast.
        const long = contentionTtl(ttl, backend);
        const a = await backend.acquire({ key: keys[0]!, owner: "other", nonce: other, ttl: long });
        const b = await backend.acquire({ key: keys[1]!, owner: "ours", nonce: ours, ttl: long });
        assert(a.ok && b.ok, "a per-key acquire failed on a free key");
        const owners = async () =>
          (await Promise.all(keys.map((k) => backend.inspect({ key: k })))).map((h) => h?.owner);
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
