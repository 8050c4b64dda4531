// The checks of the optional FireRecord capability (`complete`, for runOnce; docs/DESIGN.md §17),
// each passing at once on a backend without it.
import type { Backend } from "../backend.ts";
import { fireKey, runOnce } from "../once.ts";
import { sleep } from "../time.ts";
import { assert, type ConformanceCheck, type ConformanceOptions, mutexSuite } from "./shared.ts";

/** The checks of `complete` and runOnce over it, part of `conformanceChecks`. */
export function onceChecks(options: ConformanceOptions): ConformanceCheck[] {
  const { ttl, setup, slow } = mutexSuite(options);
  /** Takes `key` with a fresh nonce; asserts it was granted. */
  const take = async (backend: Backend, key: string, owner: string) => {
    const nonce = crypto.randomUUID();
    const r = await backend.acquire({ key, owner, nonce, ttl });
    assert(r.ok, `acquire on a free key answered ${JSON.stringify(r)}`);
    return { nonce, token: r.token };
  };
  return [
    {
      name: "complete, where offered: the holder's complete records the fire; acquire then answers done with its owner and token, and nothing else touches the record",
      timeout: 30_000,
      async run() {
        const { backend, name } = await setup();
        if (backend.complete === undefined) return; // an optional capability (runOnce)
        const a = await take(backend, name, "runner");
        assert(
          await backend.complete({ key: name, nonce: a.nonce, retain: 60_000 }),
          "complete by the holder answered false",
        );
        const late = await backend.acquire({ key: name, owner: "late", nonce: crypto.randomUUID(), ttl });
        assert(
          !late.ok && late.done?.owner === "runner" && late.done.token === a.token,
          `acquire on a completed fire answered ${JSON.stringify(late)}, expected ok: false with done: { owner: "runner", token: ${a.token} }`,
        );
        const seen = await backend.inspect({ key: name });
        assert(
          seen === null || (seen.owner === "runner" && seen.token === a.token && seen.done !== false),
          `inspect of a completed fire answered ${JSON.stringify(seen)}`,
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
      name: "complete, where offered: the record expires after retain, and the next acquire answers a greater token",
      timeout: slow + 10_000,
      async run() {
        const { backend, name } = await setup();
        if (backend.complete === undefined) return;
        const retain = Math.max(ttl, 200);
        const a = await take(backend, name, "runner");
        assert(
          await backend.complete({ key: name, nonce: a.nonce, retain }),
          "complete by the holder answered false",
        );
        const start = performance.now();
        for (;;) {
          const r = await backend.acquire({ key: name, owner: "next", nonce: crypto.randomUUID(), ttl });
          if (r.ok) {
            assert(r.token > a.token, `the token after the record ${r.token} is not above ${a.token}`);
            break;
          }
          assert(performance.now() - start < slow, `the record outlived retain (${retain} ms) by far`);
          await sleep(Math.max(20, ttl / 10));
        }
        assert(performance.now() - start >= retain * 0.9, "the record expired before retain");
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
