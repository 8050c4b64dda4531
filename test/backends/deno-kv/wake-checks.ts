// Wake on release on Deno KV (docs/DESIGN.md §19), as checks any runtime can run: vitest on
// Node (@deno/kv) through wake.test.ts, and Deno natively through
// test/harness/fixtures/conformance-runner.ts (LH_CHECKS=wake). Each check throws when it
// fails. The store is wrapped to count the watch streams open, and to fail them on demand: a
// stream that errors is a fault of a remote store's connection that a local store cannot
// produce (the only mock here).
import { capabilities } from "../../../src/backend.ts";
import { denoKv, type KvLike } from "../../../src/backends/deno-kv/index.ts";
import { createMutex, type LockEvent } from "../../../src/index.ts";

/** `kv`, counting its open watch streams; `fail()` errors every one open. */
export function counted(kv: KvLike): { kv: KvLike; open(): number; fail(): void } {
  let open = 0;
  const failers = new Set<() => void>();
  const wrapped: KvLike = {
    getMany: (keys, options) => kv.getMany(keys, options),
    atomic: () => kv.atomic(),
    watch(keys, options) {
      const inner = kv.watch!(keys, options).getReader();
      open++;
      let closed = false;
      let fail = () => {};
      const close = () => {
        if (closed) return;
        closed = true;
        open--;
        failers.delete(fail);
      };
      return new ReadableStream(
        {
          start(controller) {
            fail = () => {
              close();
              controller.error(new Error("injected: the watch stream failed"));
              inner.cancel().catch(() => {});
            };
            failers.add(fail);
          },
          async pull(controller) {
            try {
              const r = await inner.read();
              if (closed) return;
              if (r.done) {
                close();
                controller.close();
              } else controller.enqueue(r.value);
            } catch (error) {
              close();
              controller.error(error);
            }
          },
          cancel() {
            close();
            return inner.cancel();
          },
        },
        { highWaterMark: 0 },
      );
    },
  };
  return {
    kv: wrapped,
    open: () => open,
    fail: () => {
      for (const f of [...failers]) f();
    },
  };
}

/** The ttl of the leases: long enough that a takeover by observation never comes into it. */
const LONG = 120_000;

function check(ok: boolean, what: string): void {
  if (!ok) throw new Error(what);
}

/** Polls `test` every 20 ms until it holds, for at most `ms`. */
async function until(test: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!test()) {
    if (Date.now() > end) throw new Error(`${what} did not hold within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function attempts() {
  const seen: string[] = [];
  return {
    seen,
    onEvent: (e: LockEvent) => {
      if (e.type === "attempt") seen.push(e.outcome);
    },
  };
}

const unique = (what: string) => `${what}-${crypto.randomUUID().slice(0, 8)}`;

/** The checks, for a store `kv` with watch. */
export function wakeChecks(kv: KvLike): { name: string; run(): Promise<void> }[] {
  return [
    {
      name: "a waiter is handed the lock without a poll: the refusal, the attempt at once after listening, the woken one",
      async run() {
        const c = counted(kv);
        const backend = denoKv(c.kv);
        check(capabilities(backend).watch, "capabilities(backend).watch");
        const name = unique("handed");
        const holder = await createMutex(backend, { name, ttl: LONG }).acquire();
        const { seen, onEvent } = attempts();
        const waiting = createMutex(backend, { name, ttl: LONG, retryDelay: 60_000, onEvent }).acquire({
          timeout: 60_000,
        });
        // After the 9th refusal the next poll is at least 0.6 × 25 ms × 2^8 = 3.8 s away.
        await until(() => seen.length >= 9 && c.open() === 1, 20_000, "nine attempts and a stream");
        const n = seen.length;
        check(
          seen.every((o) => o === "taken"),
          `attempts before the release: ${seen}`,
        );
        await holder.release();
        const lease = await waiting;
        check(
          JSON.stringify(seen.slice(n)) === '["granted"]',
          `attempts after the release: ${seen.slice(n)}`,
        );
        check(lease.token > holder.token, "a greater token");
        await lease.release();
        await until(() => c.open() === 0, 10_000, "the stream's end");
      },
    },
    {
      name: "a stream that fails: the waiter polls, and gets the lease",
      async run() {
        const c = counted(kv);
        const backend = denoKv(c.kv);
        const name = unique("lost");
        const holder = await createMutex(backend, { name, ttl: LONG }).acquire();
        const { seen, onEvent } = attempts();
        const waiting = createMutex(backend, { name, ttl: LONG, retryDelay: 300, onEvent }).acquire({
          timeout: 20_000,
        });
        await until(() => seen.length >= 2 && c.open() === 1, 10_000, "two attempts and a stream");
        c.fail();
        await holder.release();
        const lease = await waiting;
        check(seen.at(-1) === "granted", `attempts: ${seen}`);
        await lease.release();
      },
    },
    {
      name: "one stream per watched key, shared by its waiters, cancelled when the last of them leaves",
      async run() {
        const c = counted(kv);
        const backend = denoKv(c.kv);
        const [one, two] = [unique("one"), unique("two")];
        const holders = await Promise.all(
          [one, two].map((name) => createMutex(backend, { name, ttl: LONG }).acquire()),
        );
        const stops = [new AbortController(), new AbortController(), new AbortController()];
        const waits = [one, one, two].map((name, i) =>
          createMutex(backend, { name, ttl: LONG, retryDelay: 60_000 })
            .acquire({ signal: stops[i]!.signal, timeout: 20_000 })
            .catch((e: unknown) => e),
        );
        await until(() => c.open() === 2, 10_000, "two streams");
        stops[0]!.abort();
        await waits[0];
        check(c.open() === 2, `streams after one of two waiters of a key left: ${c.open()}`);
        stops[1]!.abort();
        await until(() => c.open() === 1, 10_000, "one stream");
        stops[2]!.abort();
        await until(() => c.open() === 0, 10_000, "no stream");
        for (const h of holders) await h.release();
      },
    },
  ];
}
