// The checks of the optional FireRecord capability (`complete`, for runOnce; docs/DESIGN.md §17),
// each passing at once on a backend without it.
import type { Backend } from "../backend.ts";
import { fireKey, runOnce } from "../once.ts";
import { slotKey } from "../slots.ts";
import { sleep } from "../time.ts";
import { assert, type ConformanceCheck, type ConformanceOptions, mutexSuite } from "./shared.ts";

/** `value` within the inclusive `range`, when there is one. */
const clamp = (value: number, range: readonly [number, number] | undefined): number =>
  range ? Math.min(Math.max(value, range[0]), range[1]) : value;

/** The checks of `complete` and runOnce over it, part of `conformanceChecks`. */
export function onceChecks(options: ConformanceOptions): ConformanceCheck[] {
  const { ttl, setup, slow } = mutexSuite(options);
  /**
   * The expiry check's retain: beyond the ttl, so a record kept only as long as a lease fails it
   * (the record is read at 1.25 ttl), and at least 3 s beyond that read, a margin a loaded machine
   * meets. Not longer: Azure's ttl is 15 s.
   */
  const retain = Math.ceil(1.5 * ttl) + Math.max(ttl, 3_000);
  /** Takes `key` with a fresh nonce; asserts it was granted. */
  const take = async (backend: Backend, key: string, owner: string) => {
    const nonce = crypto.randomUUID();
    const r = await backend.acquire({ key, owner, nonce, ttl });
    assert(r.ok, `acquire on a free key answered ${JSON.stringify(r)}`);
    return { nonce, token: r.token };
  };
  /** Takes `key` as "runner" and completes it for `retain` ms; asserts complete answered true. */
  const record = async (backend: Backend, key: string, retain = 60_000) => {
    const a = await take(backend, key, "runner");
    assert(
      await backend.complete?.({ key, nonce: a.nonce, retain }),
      "complete by the holder answered false",
    );
    return a;
  };
  /** Asserts `key` holds the record of the runner's fire `a`: acquire answers done, inspect done: true. */
  const recorded = async (backend: Backend, key: string, a: { token: number }, when: string) => {
    const late = await backend.acquire({ key, owner: "late", nonce: crypto.randomUUID(), ttl });
    assert(
      !late.ok && late.done?.owner === "runner" && late.done.token === a.token,
      `acquire on a completed fire ${when} answered ${JSON.stringify(late)}, expected ok: false with done: { owner: "runner", token: ${a.token} }`,
    );
    const seen = await backend.inspect({ key });
    assert(
      seen?.owner === "runner" && seen.token === a.token && seen.done === true,
      `inspect of a completed fire ${when} answered ${JSON.stringify(seen)}, expected owner "runner", token ${a.token}, done: true`,
    );
  };
  return [
    {
      name: "complete, where offered: the holder's complete records the fire; acquire (the runner's own nonce too) then answers done with its owner and token, inspect done: true, and nothing else touches the record",
      timeout: 30_000,
      async run() {
        const { backend, name } = await setup();
        if (backend.complete === undefined) return; // an optional capability (runOnce)
        const a = await record(backend, name);
        await recorded(backend, name, a, "at once");
        const retried = await backend.acquire({ key: name, owner: "runner", nonce: a.nonce, ttl });
        assert(
          !retried.ok && retried.done?.token === a.token,
          `the runner's own acquire, retried with its nonce after complete, answered ${JSON.stringify(retried)}, expected ok: false with done`,
        );
        assert(
          !(await backend.renew({ key: name, nonce: a.nonce, ttl })),
          "renew of a completed fire answered true",
        );
        assert(
          !(await backend.complete({ key: name, nonce: a.nonce, retain: 60_000 })),
          "a second complete answered true",
        );
        await backend.release({ key: name, nonce: a.nonce });
        const after = await backend.acquire({ key: name, owner: "late", nonce: crypto.randomUUID(), ttl });
        assert(!after.ok && after.done, `release by the runner removed the record: ${JSON.stringify(after)}`);
      },
    },
    {
      name: "complete, where offered: a non-holder's complete answers false and records nothing",
      timeout: 30_000,
      async run() {
        const { backend, name } = await setup();
        if (backend.complete === undefined) return;
        const a = await take(backend, name, "holder");
        assert(
          !(await backend.complete({ key: name, nonce: crypto.randomUUID(), retain: 60_000 })),
          "complete by a non-holder answered true",
        );
        assert(
          await backend.renew({ key: name, nonce: a.nonce, ttl }),
          "the holder's lease is gone after a stranger's complete",
        );
        await backend.release({ key: name, nonce: a.nonce });
        const b = await take(backend, name, "next");
        assert(b.token > a.token, `the next token ${b.token} is not above ${a.token}`);
        await backend.release({ key: name, nonce: b.nonce });
        assert(
          !(await backend.complete({ key: name, nonce: b.nonce, retain: 60_000 })),
          "complete after release answered true",
        );
        const c = await take(backend, name, "again");
        await backend.release({ key: name, nonce: c.nonce });
      },
    },
    {
      name: "complete, where offered: a complete after the lease expired (or was taken over) answers false and records nothing",
      timeout: slow,
      async run() {
        const { backend, name } = await setup();
        if (backend.complete === undefined) return;
        const a = await take(backend, name, "runner");
        await sleep(ttl + 100);
        if (backend.expiry === "observed") {
          // No expiry of its own: the lease ends when a contender takes over the version it saw.
          const seen = await backend.acquire({ key: name, owner: "next", nonce: crypto.randomUUID(), ttl });
          assert(!seen.ok && typeof seen.version === "string", "a refusal did not carry the version");
          const b = await backend.acquire({
            key: name,
            owner: "next",
            nonce: crypto.randomUUID(),
            ttl,
            takeover: seen.version,
          });
          assert(b.ok, `the takeover after the ttl answered ${JSON.stringify(b)}`);
        }
        assert(
          !(await backend.complete({ key: name, nonce: a.nonce, retain: 60_000 })),
          "complete after the lease expired answered true",
        );
        const seen = await backend.inspect({ key: name });
        assert(!seen?.done, `complete after the lease expired left a record: ${JSON.stringify(seen)}`);
        if (backend.expiry === "observed") return;
        const next = await backend.acquire({ key: name, owner: "next", nonce: crypto.randomUUID(), ttl });
        assert(next.ok, `acquire after an expired lease's complete answered ${JSON.stringify(next)}`);
      },
    },
    {
      name: "complete and raiseFence, where offered: raiseFence on a record, with the runner's nonce or another, answers false and changes nothing",
      timeout: 30_000,
      async run() {
        const { backend, name } = await setup();
        if (backend.complete === undefined || backend.raiseFence === undefined) return;
        const a = await record(backend, name);
        for (const nonce of [a.nonce, crypto.randomUUID()]) {
          const raised = await backend.raiseFence({
            key: name,
            owner: "runner",
            nonce,
            token: a.token + 1_000,
          });
          assert(
            !raised,
            `raiseFence on a record with ${nonce === a.nonce ? "the runner's nonce" : "another nonce"} answered true`,
          );
        }
        await recorded(backend, name, a, "after raiseFence");
      },
    },
    {
      name: "complete and acquireAny, where offered: acquireAny counts a recorded key as taken",
      timeout: 30_000,
      async run() {
        const { backend, name } = await setup();
        if (backend.complete === undefined || !backend.acquireAny || backend.expiry === "observed") return;
        // acquireAny takes a semaphore's slot keys (a backend may keep them together: §5.6, §15).
        const [s0, s1] = [slotKey(name, 0), slotKey(name, 1)];
        const a = await record(backend, s0);
        const nonce = crypto.randomUUID();
        const alone = await backend.acquireAny({ keys: [s0], owner: "any", nonce, ttl });
        assert(!alone.ok, `acquireAny on a recorded key alone answered ${JSON.stringify(alone)}`);
        const next = await backend.acquireAny({ keys: [s0, s1], owner: "any", nonce, ttl });
        assert(
          next.ok && next.index === 1,
          `acquireAny on a recorded key, then a free one, answered ${JSON.stringify(next)}, expected the free one (index 1)`,
        );
        await recorded(backend, s0, a, "after acquireAny");
        await backend.release({ key: s1, nonce });
      },
    },
    {
      name: "complete and acquireQueued, where offered: acquireQueued on a recorded key answers done at once, without waiting its hold",
      timeout: 30_000,
      async run() {
        const { backend, name } = await setup();
        if (backend.complete === undefined || !backend.acquireQueued) return;
        const a = await record(backend, name);
        const hold = 5_000;
        const abort = new AbortController();
        let timer: ReturnType<typeof setTimeout> | undefined;
        const late = new Promise<"no answer">((resolve) => {
          timer = setTimeout(() => resolve("no answer"), hold);
        });
        const start = performance.now();
        const queued = backend
          .acquireQueued({
            key: name,
            owner: "queued",
            nonce: crypto.randomUUID(),
            ttl,
            waiter: crypto.randomUUID(),
            hold,
            signal: abort.signal,
          })
          .catch((error: unknown) => ({ error: String(error) }));
        const r = await Promise.race([queued, late]);
        clearTimeout(timer);
        abort.abort();
        assert(r !== "no answer", `acquireQueued on a recorded key gave no answer in its hold of ${hold} ms`);
        assert(
          "ok" in r && !r.ok && r.done?.owner === "runner" && r.done.token === a.token,
          `acquireQueued on a recorded key answered ${JSON.stringify(r)} after ${Math.round(performance.now() - start)} ms, expected ok: false with done: { owner: "runner", token: ${a.token} }`,
        );
      },
    },
    {
      name: "complete, where offered: the record lasts retain, not less (still there past the ttl), then expires, and the next acquire answers a greater token",
      timeout: retain + slow + 10_000,
      async run() {
        const { backend, name } = await setup();
        if (backend.complete === undefined) return;
        const kept = clamp(retain, backend.retainRange);
        const a = await record(backend, name, kept);
        const start = performance.now();
        // Well inside retain, and past the ttl a lease would have had: the record is still there.
        await sleep(Math.min(1.25 * ttl, kept / 2));
        await recorded(
          backend,
          name,
          a,
          `${Math.round(performance.now() - start)} ms into its retain of ${kept} ms`,
        );
        for (;;) {
          const r = await backend.acquire({ key: name, owner: "next", nonce: crypto.randomUUID(), ttl });
          if (r.ok) {
            assert(r.token > a.token, `the token after the record ${r.token} is not above ${a.token}`);
            break;
          }
          assert(
            performance.now() - start < kept + slow,
            `the record outlived retain (${kept} ms) by more than ${slow} ms`,
          );
          await sleep(Math.max(20, ttl / 10));
        }
        assert(performance.now() - start >= kept * 0.9, `the record expired before retain (${kept} ms)`);
      },
    },
    {
      name: "complete, where offered: the fires of a mutex name draw their tokens from the name's counter, above every earlier fire's and plain lease's",
      timeout: 30_000,
      async run() {
        const { backend, name } = await setup();
        if (backend.complete === undefined) return;
        const [f1, f2] = await Promise.all([fireKey(name, "f1"), fireKey(name, "f2")]);
        const tokens: number[] = [];
        /** Takes `key`, asserts its token is above every token so far, then ends it. */
        const next = async (key: string, end: "release" | "complete") => {
          const a = await take(backend, key, end);
          assert(
            tokens.every((t) => a.token > t),
            `the token ${a.token} on ${JSON.stringify(key)} is not above the tokens before it (${tokens.join(", ")})`,
          );
          tokens.push(a.token);
          if (end === "release") await backend.release({ key, nonce: a.nonce });
          else
            assert(
              await backend.complete?.({ key, nonce: a.nonce, retain: 60_000 }),
              "complete answered false",
            );
        };
        await next(name, "release");
        await next(f1, "complete");
        await next(f2, "release");
        await next(name, "release");
        await next(f2, "complete");
        await next(name, "release");
      },
    },
    {
      name: "runOnce, where complete is offered: once per fire; a late call answers done; a failed fn leaves the fire runnable",
      timeout: 30_000,
      async run() {
        const { backend, make } = await setup();
        if (backend.complete === undefined) return;
        let runs = 0;
        const failed = await runOnce(make("a"), "f1", () => Promise.reject(new Error("job failed"))).catch(
          (error: unknown) => error,
        );
        assert(
          failed instanceof Error && failed.message === "job failed",
          `a failing fn gave ${String(failed)}`,
        );
        const first = await runOnce(make("b"), "f1", () => ++runs);
        assert(first.ran && first.value === 1, `the run after a failure answered ${JSON.stringify(first)}`);
        const late = await runOnce(make("c"), "f1", () => ++runs);
        assert(
          !late.ran && late.reason === "done" && late.by?.owner === "b" && late.by.token === first.token,
          `a late call answered ${JSON.stringify(late)}`,
        );
        assert(runs === 1, `the fire ran ${runs} times`);
      },
    },
    {
      name: "runOnce, where complete is offered: a standby takes over a silent runner's fire with a greater token, and answers done once it is done",
      timeout: slow + 20_000,
      async run() {
        const { backend, name, make } = await setup();
        if (backend.complete === undefined) return;
        const key = await fireKey(name, "f2");
        const silent = await take(backend, key, "silent");
        const taken = await runOnce(make("standby"), "f2", (_signal, lease) => lease.token, {
          standby: true,
          timeout: slow,
        });
        assert(
          taken.ran && taken.value > silent.token,
          `the standby answered ${JSON.stringify(taken)} after a silent runner with token ${silent.token}`,
        );
        const other = await runOnce(make("other"), "f2", () => 0, { standby: true, timeout: slow });
        assert(
          !other.ran && other.reason === "done",
          `a standby after completion answered ${JSON.stringify(other)}`,
        );
      },
    },
  ];
}
