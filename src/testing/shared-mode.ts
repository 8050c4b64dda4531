// The checks of shared mode (readers and writers, docs/DESIGN.md §18), each passing at once on a
// backend without `acquireShared`. (shared.ts is what every part of the suite shares.)
import type { LockEvent } from "../events.ts";
import type { Lease } from "../lease.ts";
import { sleep } from "../time.ts";
import {
  assert,
  type ConformanceCheck,
  type ConformanceOptions,
  contentionTtl,
  mutexSuite,
} from "./shared.ts";

/** Resolves at the first attempt of an acquire that the backend refused (the lock was taken). */
function firstRefusal(): { onEvent: (event: LockEvent) => void; refused: Promise<void> } {
  let resolve = (): void => {};
  const refused = new Promise<void>((r) => {
    resolve = r;
  });
  const onEvent = (event: LockEvent): void => {
    if (event.type === "attempt" && event.outcome === "taken") resolve();
  };
  return { onEvent, refused };
}

/** The shared-mode checks, part of `conformanceChecks`. */
export function sharedModeChecks(options: ConformanceOptions): ConformanceCheck[] {
  const { ttl, setup, slow } = mutexSuite(options);
  const shared = { mode: "shared" } as const;
  const releaseAll = (leases: Lease[]) => Promise.all(leases.map((l) => l.release()));
  return [
    {
      name: "shared mode, where offered: 5 readers hold at once; an exclusive tryAcquire is null while any one holds; tokens strictly increase across modes",
      timeout: 30_000,
      async run() {
        const { backend, make } = await setup();
        if (backend.acquireShared === undefined) return; // an optional capability
        const readers: Lease[] = [];
        for (let i = 0; i < 5; i++) {
          const lease = await make(`reader ${i}`).tryAcquire(shared);
          assert(lease !== null, `reader ${i} got no shared lease beside ${i} readers`);
          assert(lease.mode === "shared", `reader ${i}'s lease has mode ${lease.mode}`);
          const last = readers.at(-1);
          assert(
            !last || lease.token > last.token,
            `reader ${i}'s token ${lease.token} is not above ${last?.token}`,
          );
          readers.push(lease);
        }
        const seen = await backend.inspect({ key: readers[0]!.name });
        assert(
          seen?.readers === 5 && seen.token === readers[4]!.token,
          `inspect with 5 readers answered ${JSON.stringify(seen)}, expected readers: 5 and the newest's token`,
        );
        const writer = make("writer");
        assert((await writer.tryAcquire()) === null, "an exclusive lease was granted beside 5 readers");
        await releaseAll(readers.slice(0, 4));
        assert((await writer.tryAcquire()) === null, "an exclusive lease was granted beside a reader");
        await readers[4]!.release();
        const w = await writer.tryAcquire();
        assert(w !== null, "no exclusive lease once every reader released");
        assert(w.mode === "exclusive", `the exclusive lease has mode ${w.mode}`);
        assert(w.token > readers[4]!.token, `the writer's token ${w.token} is not above the readers'`);
        assert(
          (await make("reader 5").tryAcquire(shared)) === null,
          "a shared lease was granted beside a writer",
        );
        await w.release();
        const r = await make("reader 6").tryAcquire(shared);
        assert(
          r !== null && r.token > w.token,
          `the next reader's token ${r?.token} is not above the writer's ${w.token}`,
        );
        await r.release();
        assert((await backend.inspect({ key: r.name })) === null, "inspect is not null after every release");
      },
    },
    {
      name: "shared mode, where offered: a waiting writer is served once the readers present when it arrived have released, while new readers wait behind it",
      timeout: slow + 20_000,
      async run() {
        const { backend, make: on } = await setup();
        if (backend.acquireShared === undefined) return;
        const roomy = { ttl: contentionTtl(ttl, backend) };
        const readers: Lease[] = [];
        for (let i = 0; i < 3; i++) {
          const lease = await on(`reader ${i}`, roomy).tryAcquire(shared);
          assert(lease !== null, `reader ${i} got no shared lease`);
          readers.push(lease);
        }
        const { onEvent, refused } = firstRefusal();
        const order: string[] = [];
        const writing = on("writer", { ...roomy, onEvent })
          .acquire({ timeout: slow })
          .then((lease) => {
            order.push("writer");
            return lease;
          });
        await refused;
        // The writer waits: every new reader waits behind it, however many come.
        for (let i = 0; i < 3; i++)
          assert(
            (await on(`late reader ${i}`, roomy).tryAcquire(shared)) === null,
            `a new reader got in while a writer waited (try ${i})`,
          );
        const late = on("late reader", roomy)
          .acquire({ ...shared, timeout: slow })
          .then((lease) => {
            order.push("late reader");
            return lease;
          });
        for (const lease of readers) {
          await sleep(50);
          assert(order.length === 0, `${order.join()} got in before the readers present released`);
          await lease.release();
        }
        const w = await writing;
        assert(order.join() === "writer", `served in the order ${order.join()}, expected the writer first`);
        assert(!w.signal.aborted && w.valid, "the writer's lease is not live");
        assert(w.token > readers[2]!.token, `the writer's token ${w.token} is not above the readers'`);
        await sleep(100);
        assert(order.length === 1, "the late reader got in while the writer held");
        await w.release();
        const r = await late;
        assert(r.token > w.token, `the late reader's token ${r.token} is not above the writer's ${w.token}`);
        await r.release();
      },
    },
    {
      name: "shared mode, where offered: a writer that gives up lets new readers in at once, not after its ttl",
      timeout: slow + 20_000,
      async run() {
        const { backend, make } = await setup();
        if (backend.acquireShared === undefined) return;
        // The writer's long ttl: a waiting mark left behind would keep readers out that long.
        const roomy = { ttl: contentionTtl(ttl, backend) };
        const reader = await make("reader", roomy).tryAcquire(shared);
        assert(reader !== null, "the reader got no shared lease");
        const stop = new AbortController();
        // Aborted from the observer of its first refusal, before a second attempt can be sent.
        const writer = make("writer", {
          ...roomy,
          onEvent: (event) => {
            if (event.type === "attempt" && event.outcome === "taken") stop.abort(new Error("gave up"));
          },
        });
        const gaveUp = await writer.acquire({ signal: stop.signal }).then(
          (lease) => lease,
          (error: unknown) => error,
        );
        assert(
          gaveUp instanceof Error && gaveUp.message === "gave up",
          `the writer's acquire answered ${String(gaveUp)}`,
        );
        const started = performance.now();
        let next: Lease | null = null;
        while (next === null && performance.now() - started < roomy.ttl / 2) {
          next = await make("next reader").tryAcquire(shared);
          if (next === null) await sleep(50);
        }
        assert(next !== null, `no new reader got in within ${roomy.ttl / 2} ms of the writer giving up`);
        await releaseAll([reader, next]);
      },
    },
    {
      name: "shared mode, where offered: a reader that stops renewing aborts its signal and expires; a waiting writer gets in within ttl + retryDelay",
      timeout: slow,
      async run() {
        const { backend, make } = await setup();
        if (backend.acquireShared === undefined) return;
        const retryDelay = 50; // the suite's mutexes' (mutexSuite)
        const sent = performance.now();
        const reader = await make("reader", { renew: false }).acquire({ ...shared, timeout: 10_000 });
        const aborted = new Promise<number>((resolve) =>
          reader.signal.addEventListener("abort", () => resolve(performance.now()), { once: true }),
        );
        // The writer's own ttl is a roomy one: what is checked is the reader's expiry, and with the
        // suite's short ttl a loaded machine's stall made the writer give its lease up (its stall
        // check) before the last check below, which then saw the lock free.
        const w = await make("writer", { ttl: contentionTtl(ttl, backend) }).acquire({ timeout: ttl * 3 });
        const tookOver = performance.now();
        assert(reader.signal.aborted, "the reader's signal was not aborted when the writer got in");
        assert((await aborted) <= tookOver, "the reader's signal aborted after the writer got in");
        // ttl + retryDelay from the reader's request, and 1 s for the requests on a loaded machine.
        const bound = ttl + retryDelay + 1_000;
        assert(
          tookOver - sent <= bound,
          `the writer got in ${Math.round(tookOver - sent)} ms after the reader's request, over ${bound}`,
        );
        assert(
          w.token > reader.token,
          `the writer's token ${w.token} is not above the reader's ${reader.token}`,
        );
        assert(
          !(await backend.renewShared!({ key: w.name, nonce: "x", ttl })),
          "renewShared of an unknown nonce succeeded",
        );
        await reader.release();
        assert(
          (await make("other").tryAcquire()) === null,
          "the expired reader's release freed the writer's lock",
        );
        await w.release();
      },
    },
  ];
}
