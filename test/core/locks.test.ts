// createLockManager (src/locks.ts, docs/web-locks.md): the W3C Web Locks API over a backend. The
// cases follow the specification (https://w3c.github.io/web-locks/, quoted as "spec: ...") and the
// web-platform-tests of web-locks/*.https.any.js (quoted as "WPT <file>: <test>"), run on memory,
// on the real redis-server the harness starts, on the Upstash REST bridge in front of it, on PostgreSQL and on the
// Durable Object in workerd (its line). Two managers on one store are two machines.
import IORedis from "ioredis";
import pg from "pg";
import { afterAll, describe, expect, inject, it } from "vitest";
import type { Backend, QueuedAcquireRequest } from "../../src/backend.ts";
import { durableObject } from "../../src/backends/cloudflare/index.ts";
import { memory } from "../../src/backends/memory/index.ts";
import { postgres } from "../../src/backends/postgres/index.ts";
import { redis } from "../../src/backends/redis/index.ts";
import { upstash } from "../../src/backends/upstash/index.ts";
import {
  BackendError,
  createLockManager,
  createMutex,
  LeaseLostError,
  type Lock,
  type LockManager,
  type LockManagerOptions,
  type LockOptions,
} from "../../src/index.ts";
import { sleep } from "../../src/time.ts";
import { ctx as pgc } from "../backends/postgres/clients.ts";
import { registerSecret } from "../harness/secrets.ts";

const ctx = inject("redis");
registerSecret(ctx.password);
const up = inject("upstash");
const cf = inject("cloudflare");
registerSecret(cf.token);
const raw = new IORedis({ host: ctx.host, port: ctx.port, username: ctx.username, password: ctx.password });
const pool = new pg.Pool({ connectionString: pgc.url, max: 10 });
afterAll(async () => {
  await raw.quit();
  await pool.end();
});

/** A resolvable promise. */
function deferred<T = void>(): {
  promise: Promise<T>;
  resolve: (value: T) => void;
  reject: (e: unknown) => void;
} {
  let resolve!: (value: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/**
 * WPT helpers.js requestLockAndHold: a request whose callback holds the lock until `release()`;
 * `granted` resolves with the lock once the callback runs.
 */
function hold(locks: LockManager, name: string, options: LockOptions = {}) {
  const granted = deferred<Lock>();
  const held = deferred<string>();
  const done = locks.request(name, options, (lock) => {
    granted.resolve(lock as Lock);
    return held.promise;
  });
  return { granted: granted.promise, release: () => held.resolve("released"), done };
}

const named = (name: string) => ({ name: "NotSupportedError", message: expect.stringContaining(name) });

for (const [label, store] of [
  ["memory", () => memory()],
  ["redis", () => redis(raw)],
  ["upstash", () => upstash({ url: up.url, token: up.token })],
  ["cloudflare", () => durableObject({ url: cf.url, token: cf.token })],
  ["postgres", () => postgres(pool, { table: "lock_manager", createTable: true })],
] as [string, () => Backend][]) {
  describe(`createLockManager on ${label}`, () => {
    const backend = store();
    // Requests that wait retry every 25 ms at most: a holder in another manager is seen soon after it leaves.
    const manager = (options: LockManagerOptions = {}) =>
      createLockManager(backend, { retryDelay: 25, ...options });
    const unique = () => `lm-${crypto.randomUUID().slice(0, 8)}`;

    describe("options (the WebIDL conversions and the request method's steps)", () => {
      it("callback must be a function: a TypeError (WPT acquire: 'callback must be a function')", async () => {
        const locks = manager();
        const res = unique();
        const request = locks.request as (...args: unknown[]) => Promise<unknown>;
        for (const args of [
          [],
          [res],
          [res, undefined],
          [res, null],
          [res, 123],
          [res, "abc"],
          [res, []],
          [res, {}],
        ])
          await expect(request(...args)).rejects.toThrow(TypeError);
        await expect(request(res, new Promise(() => {}))).rejects.toThrow(
          /callback must be a function, got object/,
        );
        await expect(request(res, {}, "x")).rejects.toThrow(/callback must be a function, got string/);
        expect((await locks.query()).pending).toEqual([]);
      });

      it('mode must be "shared" or "exclusive": a TypeError; the lock reports its mode (WPT acquire)', async () => {
        const locks = manager();
        const res = unique();
        for (const mode of ["foo", null, 1])
          await expect(locks.request(res, { mode: mode as never }, () => {})).rejects.toThrow(
            /mode must be "shared" or "exclusive"/,
          );
        expect(await locks.request(res, { mode: "exclusive" }, (lock) => lock.mode)).toBe("exclusive");
        expect(await locks.request(res, { mode: "shared" }, (lock) => lock.mode)).toBe("shared");
        expect(await locks.request(res, (lock) => lock.mode)).toBe("exclusive"); // spec: mode = "exclusive"
      });

      it("spec: 'If name starts with U+002D HYPHEN-MINUS (-), then return a promise rejected with a NotSupportedError' (WPT resource-names)", async () => {
        const locks = manager();
        for (const name of ["-", "-foo"]) {
          const p = locks.request(name, () => {});
          await expect(p).rejects.toBeInstanceOf(DOMException);
          await expect(p).rejects.toMatchObject(named('starting with "-"'));
        }
        expect(await locks.request(`x-${unique()}`, () => "got it")).toBe("got it");
      });

      it("spec: the NotSupportedError mixes of steal, ifAvailable, mode and signal (WPT acquire)", async () => {
        const locks = manager();
        const res = unique();
        const signal = new AbortController().signal;
        const refused = async (options: LockOptions, why: string) => {
          let called = false;
          await expect(locks.request(res, options, () => (called = true))).rejects.toMatchObject(named(why));
          expect(called).toBe(false);
        };
        // "If both options["steal"] and options["ifAvailable"] are true ..."
        await refused({ steal: true, ifAvailable: true }, "steal and ifAvailable");
        // "If options["steal"] is true and options["mode"] is not "exclusive" ..."
        await refused({ mode: "shared", steal: true }, 'steal needs mode "exclusive"');
        // "If options["signal"] exists, and either of options["steal"] or options["ifAvailable"] is true ..."
        await refused({ signal, steal: true }, "signal cannot be given");
        await refused({ signal, ifAvailable: true }, "signal cannot be given");
      });

      it("steal is refused with a NotSupportedError saying why: a holder elsewhere cannot be stopped first", async () => {
        const locks = manager();
        const res = unique();
        await expect(locks.request(res, { steal: true }, () => {})).rejects.toMatchObject(
          named("two live holders"),
        );
        // Nothing was queued or taken: the name is free.
        expect(await locks.request(res, { ifAvailable: true }, (lock) => lock !== null)).toBe(true);
        expect(await locks.request(res, { steal: false }, () => 1)).toBe(1);
      });

      it("the signal option must be an AbortSignal, ifAvailable and steal booleans, options an object: TypeErrors", async () => {
        const locks = manager();
        const res = unique();
        for (const signal of ["string", 12.34, false, {}, () => {}])
          await expect(locks.request(res, { signal: signal as never }, () => {})).rejects.toThrow(
            /signal must be an AbortSignal/,
          );
        await expect(locks.request(res, { ifAvailable: 1 as never }, () => {})).rejects.toThrow(TypeError);
        await expect(locks.request(res, 5 as never, () => {})).rejects.toThrow(/options must be an object/);
        await expect(locks.request(7 as never, () => {})).rejects.toThrow(/name must be a string/);
        // A dictionary may be null or undefined: the defaults.
        expect(await locks.request(res, null as never, (lock) => lock?.mode)).toBe("exclusive");
        expect(await locks.request(res, undefined as never, (lock) => lock?.mode)).toBe("exclusive");
      });

      it("createLockManager checks its options at once, naming itself", () => {
        expect(() => createLockManager(backend, { ttl: 5 })).toThrow(/createLockManager: ttl must be/);
        expect(() => createLockManager(backend, { owner: "" })).toThrow(/createLockManager: owner must be/);
        expect(() => createLockManager(backend, { onError: 1 as never })).toThrow(
          /createLockManager: onError must be a function/,
        );
        expect(() => createLockManager(backend, 3 as never)).toThrow(TypeError);
        expect(createLockManager(backend, { owner: "worker-1" }).clientId).toBe("worker-1");
        // createMutex's options that mean nothing here are refused, not ignored.
        for (const key of ["name", "renew", "timeout"])
          expect(() => createLockManager(backend, { [key]: 1 } as never)).toThrow(
            new RegExp(`createLockManager: option ${key} is not one of createLockManager's`),
          );
        expect(() => createLockManager(backend, { timeout: 5 } as never)).toThrow(/AbortSignal\.timeout/);
      });
    });

    describe("resource names", () => {
      it("any string is a name, given back exactly (WPT resource-names: DOMString edge cases)", async () => {
        const locks = manager();
        const suffix = unique();
        const edges = ["", "abc\x00def", "\uD800", "\uDC00", "\uDC00\uD800", "\uFFFF", "a b/c", "+x", "x."];
        for (const name of ["", ...edges.map((s) => s + suffix)])
          expect(await locks.request(name, (lock) => lock.name)).toBe(name);
      });

      it("names that are not valid UTF-16 are not mangled: '\\uD800' and '\\uFFFD' are two locks (WPT resource-names)", async () => {
        const locks = manager();
        const suffix = unique();
        await locks.request(`\uD800${suffix}`, async () => {
          expect(await locks.request(`\uFFFD${suffix}`, { ifAvailable: true }, (lock) => lock?.name)).toBe(
            `\uFFFD${suffix}`,
          );
        });
      });

      it("a valid lock name is the mutex of that name; another maps to an escaped one, +XXXX per code unit", async () => {
        const locks = manager();
        const res = unique();
        const other = createMutex(backend, { name: res });
        await locks.request(res, async () => {
          expect(await other.tryAcquire()).toBeNull();
        });
        // "a b" is no lock name: it is the lock "+a+0020b", and a name starting with + is escaped too.
        const spaced = `a b${res}`;
        await locks.request(spaced, async () => {
          expect(await createMutex(backend, { name: `+a+0020b${res}` }).tryAcquire()).toBeNull();
        });
        await locks.request(`+${res}`, async () => {
          expect(await createMutex(backend, { name: `++002B${res}` }).tryAcquire()).toBeNull();
          expect(await createMutex(backend, { name: `+${res}` }).tryAcquire()).not.toBeNull();
        });
      });

      it("a name too long once escaped is a RangeError naming the length", async () => {
        const locks = manager();
        await expect(locks.request(" ".repeat(60), () => {})).rejects.toThrow(RangeError);
        await expect(locks.request(" ".repeat(60), () => {})).rejects.toThrow(
          /301 characters, more than 255/,
        );
        expect(await locks.request("a".repeat(255), () => 1)).toBe(1);
        await expect(locks.request("a".repeat(256), () => {})).rejects.toThrow(/more than 255/);
        await expect(locks.query({ names: [" ".repeat(60)] })).rejects.toThrow(
          /query: name .* more than 255/,
        );
      });
    });

    describe("the callback's result", () => {
      it("the request resolves with the callback's value, promisified if not async (WPT held)", async () => {
        const locks = manager();
        const p = locks.request(unique(), () => 123);
        expect(Promise.resolve(p)).toBe(p);
        expect(await p).toBe(123);
        expect(await locks.request(unique(), async () => "async")).toBe("async");
      });

      it("the request rejects with what the callback throws, synchronously or not; a thrown thenable is not called (WPT acquire)", async () => {
        const locks = manager();
        const error = { name: "test" };
        await expect(
          locks.request(unique(), () => {
            throw error;
          }),
        ).rejects.toBe(error);
        await expect(
          locks.request(unique(), async () => {
            throw error;
          }),
        ).rejects.toBe(error);
        let thenInvoked = false;
        // biome-ignore lint/suspicious/noThenProperty: the thenable is the point of the test
        const thenable = { then: () => (thenInvoked = true) };
        await expect(
          locks.request(unique(), async () => {
            throw thenable;
          }),
        ).rejects.toBe(thenable);
        expect(thenInvoked).toBe(false);
      });

      it("the callback is invoked with the lock as its only argument and no this (WebIDL: invoke a callback function)", async () => {
        const locks = manager();
        const seen = await locks.request(unique(), function (this: unknown, ...args: unknown[]) {
          return { self: this, count: args.length };
        });
        expect(seen).toEqual({ self: undefined, count: 1 });
      });

      it("spec: the callback is never called synchronously by request()", async () => {
        const locks = manager();
        let called = false;
        const p = locks.request(unique(), () => (called = true));
        const q = locks.request(unique(), { ifAvailable: true }, () => (called = true));
        expect(called).toBe(false);
        await Promise.all([p, q]);
        expect(called).toBe(true);
      });
    });

    describe("release on settle", () => {
      it("the returned promise resolves after the lock is released (WPT acquire: order holding, returned)", async () => {
        const locks = manager();
        const release = deferred();
        const order: string[] = [];
        const returned = locks.request(unique(), () => release.promise);
        returned.then(() => order.push("returned"));
        release.promise.then(() => order.push("holding"));
        release.resolve();
        await Promise.all([returned, release.promise]);
        expect(order).toEqual(["holding", "returned"]);
      });

      it("spec 'waiting promise settles': release the lock, then resolve the released promise: another machine gets it at once", async () => {
        // The lock is released on the backend before the request settles, so when it does, a
        // single attempt from elsewhere (another manager, a mutex) finds it free.
        const a = manager();
        const b = manager();
        const res = unique();
        for (const outcome of ["fulfilled", "rejected"]) {
          const settled = a.request(res, async () => {
            if (outcome === "rejected") throw new Error("callback failed");
            return "done";
          });
          await settled.catch(() => {});
          expect(await b.request(res, { ifAvailable: true }, (lock) => lock?.mode ?? null)).toBe("exclusive");
          const lease = await createMutex(backend, { name: res }).tryAcquire();
          expect(lease).not.toBeNull();
          await lease?.release();
        }
      });

      it("spec 'waiting promise settles': '1. Release the lock. 2. Resolve the released promise': the store's release comes first", async () => {
        // A release that takes 100 ms, as over a slow network (on loopback it is too quick to tell
        // the order): the only double in this file, a delay around the real store's release.
        const order: string[] = [];
        const slow: Backend = {
          ...backend,
          release: async (r) => {
            await sleep(100);
            await backend.release(r);
            order.push("released");
          },
        };
        const locks = createLockManager(slow);
        for (const fails of [false, true]) {
          order.length = 0;
          const settled = () => order.push("settled");
          await locks
            .request(unique(), () => {
              if (fails) throw new Error("callback failed");
              return 1;
            })
            .then(settled, settled);
          expect(order).toEqual(["released", "settled"]);
        }
      });

      it("the lock is held until the callback's promise resolves or rejects (WPT held)", async () => {
        const locks = manager();
        for (const end of ["resolve", "reject"] as const) {
          const res = unique();
          const granted = deferred();
          const held = deferred();
          const first = locks.request(res, () => {
            granted.resolve();
            return held.promise;
          });
          first.catch(() => {});
          await granted.promise;
          const order: string[] = [];
          const second = locks.request(res, () => {
            order.push("2nd lock granted");
          });
          await sleep(50);
          order.push(end);
          if (end === "resolve") held.resolve();
          else held.reject(new Error("this rejection is expected"));
          await second;
          expect(order).toEqual([end, "2nd lock granted"]);
          if (end === "reject") await expect(first).rejects.toThrow("expected");
          else expect(await first).toBeUndefined();
        }
      });

      it("a held lock keeps the same manager out: ifAvailable gets null (WPT held: 'held lock prevents the same client')", async () => {
        const locks = manager();
        const res = unique();
        let called = false;
        await locks.request(res, async () => {
          await locks.request(res, { ifAvailable: true }, (lock) => {
            called = true;
            expect(lock).toBeNull();
          });
        });
        expect(called).toBe(true);
      });
    });

    describe("modes and the order of grants", () => {
      it("exclusive requests are granted in order; a distinct name is granted at once (WPT mode-exclusive)", async () => {
        const locks = manager();
        const a = unique();
        const b = unique();
        const granted: number[] = [];
        const log = (n: number) => () => {
          granted.push(n);
        };
        await Promise.all([locks.request(a, log(1)), locks.request(a, log(2)), locks.request(a, log(3))]);
        expect(granted).toEqual([1, 2, 3]);
        granted.length = 0;
        let blocked: Promise<unknown> | undefined;
        await locks.request(a, async () => {
          blocked = locks.request(a, log(1));
          await locks.request(b, log(2)); // granted while a is held
        });
        await blocked;
        expect(granted).toEqual([2, 1]);
      });

      it("shared locks are not exclusive (WPT mode-shared)", async () => {
        const locks = manager();
        const a = unique();
        let again = false;
        await locks.request(a, { mode: "shared" }, async () => {
          await locks.request(a, { mode: "shared" }, () => {
            again = true;
          });
        });
        expect(again).toBe(true);
      });

      it("shared locks are held together, the exclusive one waits for all of them, a distinct name does not (WPT mode-mixed)", async () => {
        const locks = manager();
        const a = unique();
        const b = unique();
        const blocked = deferred();
        const granted: string[] = [];
        const shared = [1, 2, 3].map((i) =>
          locks.request(a, { mode: "shared" }, async () => {
            granted.push(`a-shared-${i}`);
            await blocked.promise;
          }),
        );
        let exclusive: Lock | undefined;
        const exclusiveRequest = locks.request(a, (lock) => {
          granted.push("a-exclusive");
          exclusive = lock;
        });
        await locks.request(b, () => {
          granted.push("b-exclusive");
        });
        while (granted.length < 4) await sleep(10); // the three readers' grants from the store
        // All but a-exclusive, in any order: each name is its own request to the store, so grants
        // are ordered within a name only (the WPT test's order across names is one process's).
        expect([...granted].sort()).toEqual(["a-shared-1", "a-shared-2", "a-shared-3", "b-exclusive"]);
        blocked.resolve();
        await exclusiveRequest;
        await Promise.all(shared);
        expect(exclusive?.mode).toBe("exclusive");
        expect(granted.at(-1)).toBe("a-exclusive");
      });

      it("spec 'grantable': shared requests behind an exclusive one wait for it (WPT mode-mixed: an exclusive lock between shared locks)", async () => {
        const locks = manager();
        const res = unique();
        const readers = [0, 1, 2].map(() => hold(locks, res, { mode: "shared" }));
        const writer = hold(locks, res);
        const late = [0, 1].map(() => hold(locks, res, { mode: "shared" }));
        await Promise.all(readers.map((r) => r.granted));
        let state = await locks.query();
        expect(state.held.map((l) => l.mode)).toEqual(["shared", "shared", "shared"]);
        expect(state.pending.map((l) => l.mode)).toEqual(["exclusive", "shared", "shared"]);
        for (const r of readers) r.release();
        const w = await writer.granted;
        state = await locks.query();
        expect(state.held.map((l) => l.mode)).toEqual(["exclusive"]);
        expect(state.pending.map((l) => l.mode)).toEqual(["shared", "shared"]);
        writer.release();
        const after = await Promise.all(late.map((r) => r.granted));
        state = await locks.query();
        expect(state.held.map((l) => l.mode)).toEqual(["shared", "shared"]);
        // Fencing: every grant's token is above every earlier one on the name.
        expect(Math.min(...after.map((l) => l.token))).toBeGreaterThan(w.token);
        for (const r of late) r.release();
        await Promise.all([...readers, writer, ...late].map((r) => r.done));
      });
    });

    describe("ifAvailable", () => {
      it("spec: 'If ifAvailable is true and request is not grantable', the callback gets null and the request resolves with its result (WPT ifAvailable)", async () => {
        const locks = manager();
        const res = unique();
        // Lock available.
        expect(await locks.request(res, { ifAvailable: true }, (lock) => lock?.name)).toBe(res);
        await locks.request(res, async () => {
          // Lock not available: the result is the callback's.
          expect(await locks.request(res, { ifAvailable: true }, (lock) => (lock === null ? 123 : 0))).toBe(
            123,
          );
          // Not available, the callback throws: the request rejects with it.
          const error = { name: "test" };
          await expect(
            locks.request(res, { ifAvailable: true }, () => {
              throw error;
            }),
          ).rejects.toBe(error);
          await expect(
            locks.request(res, { ifAvailable: true }, async () => {
              throw error;
            }),
          ).rejects.toBe(error);
          // An unrelated lock is granted.
          expect(await locks.request(unique(), { ifAvailable: true }, (lock) => lock !== null)).toBe(true);
        });
      });

      it("by mode: shared beside shared is granted; exclusive beside shared and shared beside exclusive get null (WPT ifAvailable)", async () => {
        const locks = manager();
        const res = unique();
        const probe = (mode: "shared" | "exclusive") =>
          locks.request(res, { mode, ifAvailable: true }, (lock) => lock?.mode ?? null);
        await locks.request(res, { mode: "shared" }, async () => {
          expect(await probe("shared")).toBe("shared");
          expect(await probe("exclusive")).toBeNull();
        });
        await locks.request(res, async () => {
          expect(await probe("shared")).toBeNull();
        });
      });

      it("a request waiting in the queue makes ifAvailable null even for a mode the holders allow", async () => {
        // spec 'grantable': "If queue is not empty and request is not the first item in queue, then return false."
        const locks = manager();
        const res = unique();
        const reader = hold(locks, res, { mode: "shared" });
        await reader.granted;
        const writer = hold(locks, res);
        expect(await locks.request(res, { mode: "shared", ifAvailable: true }, (lock) => lock)).toBeNull();
        reader.release();
        await writer.granted;
        writer.release();
        await Promise.all([reader.done, writer.done]);
      });

      it("locks are available once the previous release is processed (WPT ifAvailable, crbug.com/840994)", async () => {
        const locks = manager();
        const one = unique();
        const two = unique();
        await locks.request(one, async () => {
          await locks.request(two, () => {});
          expect(await locks.request(two, { ifAvailable: true }, (lock) => lock !== null)).toBe(true);
        });
      });
    });

    describe("signal", () => {
      it("an already aborted signal rejects with its reason, custom or default, and the callback never runs (WPT signal)", async () => {
        const locks = manager();
        const res = unique();
        let called = false;
        const aborted = new AbortController();
        aborted.abort();
        const p = locks.request(res, { signal: aborted.signal }, () => (called = true));
        await expect(p).rejects.toMatchObject({ name: "AbortError" });
        await expect(p).rejects.toBe(aborted.signal.reason);
        const custom = new AbortController();
        custom.abort("My dog ate it.");
        await expect(locks.request(res, { signal: custom.signal }, () => (called = true))).rejects.toBe(
          "My dog ate it.",
        );
        expect(called).toBe(false);
      });

      it("spec 'signal to abort the request': a pending request rejects with the reason, at once, and leaves the queue (WPT signal)", async () => {
        const locks = manager();
        const res = unique();
        const holder = hold(locks, res);
        await holder.granted;
        const controller = new AbortController();
        let called = false;
        const p = locks.request(res, { signal: controller.signal }, () => (called = true));
        let state = await locks.query();
        expect([state.held.length, state.pending.length]).toEqual([1, 1]);
        setTimeout(() => controller.abort(), 10);
        await expect(p).rejects.toMatchObject({ name: "AbortError" });
        state = await locks.query();
        expect([state.held.length, state.pending.length]).toEqual([1, 0]);
        holder.release();
        await holder.done;
        expect(called).toBe(false);
      });

      it("a request waiting for another machine's holder rejects with the reason when aborted", async () => {
        const a = manager();
        const b = manager();
        const res = unique();
        const holder = hold(a, res);
        await holder.granted;
        const controller = new AbortController();
        const p = b.request(res, { signal: controller.signal }, () => "never");
        await sleep(100); // b's request is now waiting on the store
        expect((await b.query()).pending).toHaveLength(1);
        controller.abort(new Error("gave up"));
        await expect(p).rejects.toThrow("gave up");
        expect((await b.query()).pending).toHaveLength(0);
        holder.release();
        await holder.done;
        // Nothing of b's is left on the name.
        expect(await b.request(res, { ifAvailable: true }, (lock) => lock !== null)).toBe(true);
      });

      it("a synchronously signaled abort wins over a grantable lock, and the next request is not blocked (WPT signal)", async () => {
        const locks = manager();
        const res = unique();
        const controller = new AbortController();
        let got = false;
        const p = locks.request(res, { signal: controller.signal }, () => (got = true));
        controller.abort();
        await expect(p).rejects.toMatchObject({ name: "AbortError" });
        expect(got).toBe(false);
        await locks.request(res, () => (got = true));
        expect(got).toBe(true);
      });

      it("an abort after the grant, or after the release, is ignored (WPT signal)", async () => {
        const locks = manager();
        for (const when of ["granted", "released"]) {
          const controller = new AbortController();
          const acquired = deferred();
          const release = deferred<string>();
          const p = locks.request(unique(), { signal: controller.signal }, () => {
            acquired.resolve();
            return release.promise;
          });
          await acquired.promise;
          if (when === "granted") controller.abort();
          release.resolve("resolved ok");
          if (when === "released") controller.abort();
          expect(await p).toBe("resolved ok");
        }
      });

      it("an abort processes the next pending request (WPT signal)", async () => {
        const locks = manager();
        const res = unique();
        const controller = new AbortController();
        const first = hold(locks, res, { signal: controller.signal });
        const next = locks.request(res, () => "resolved");
        controller.abort();
        await expect(first.done).rejects.toMatchObject({ name: "AbortError" });
        expect(await next).toBe("resolved");
      });
    });

    describe("backend failures (doubles around the real store: faults it does not produce on demand)", () => {
      it("a failed release rejects a request whose callback fulfilled, as mutex.run does; the callback's own error wins", async () => {
        const failure = new BackendError("release failed", { backend: backend.name, retryable: true });
        const failing: Backend = { ...backend, release: () => Promise.reject(failure) };
        const locks = createLockManager(failing);
        await expect(locks.request(unique(), () => "done")).rejects.toBe(failure);
        const own = new Error("callback failed");
        await expect(
          locks.request(unique(), () => {
            throw own;
          }),
        ).rejects.toBe(own);
        expect(await locks.query()).toEqual({ held: [], pending: [] });
      });

      it("a failure that is not retryable rejects the request with it, and the next request on the name goes on", async () => {
        const refused = new BackendError("credentials refused", {
          backend: backend.name,
          retryable: false,
          auth: true,
        });
        let failures = 1; // the first acquire only (a waiting one goes to the line, where there is one)
        const queued = backend.acquireQueued;
        const flaky: Backend = {
          ...backend,
          acquire: (r) => (failures-- > 0 ? Promise.reject(refused) : backend.acquire(r)),
          ...(queued && {
            acquireQueued: (r: QueuedAcquireRequest) =>
              failures-- > 0 ? Promise.reject(refused) : queued.call(backend, r),
          }),
        };
        const locks = createLockManager(flaky);
        const res = unique();
        const first = locks.request(res, () => "never");
        const second = locks.request(res, () => "second");
        await expect(first).rejects.toBe(refused);
        expect(await second).toBe("second");
      });

      it("an ifAvailable request makes one attempt: a retryable failure rejects it rather than calling back null", async () => {
        const failure = new BackendError("no answer", { backend: backend.name, retryable: true });
        const failing: Backend = { ...backend, acquire: () => Promise.reject(failure) };
        const locks = createLockManager(failing);
        let called = false;
        await expect(locks.request(unique(), { ifAvailable: true }, () => (called = true))).rejects.toBe(
          failure,
        );
        expect(called).toBe(false);
      });
    });

    describe("across machines (two managers on one store)", () => {
      it("a writer in one keeps the other's reader out until its callback settles", async () => {
        const a = manager();
        const b = manager();
        const res = unique();
        const writer = hold(a, res);
        const w = await writer.granted;
        expect(await b.request(res, { mode: "shared", ifAvailable: true }, (lock) => lock)).toBeNull();
        let readerIn = false;
        const reader = b.request(res, { mode: "shared" }, (lock) => {
          readerIn = true;
          return lock.token;
        });
        await sleep(200);
        expect(readerIn).toBe(false);
        expect((await b.query()).pending).toEqual([{ name: res, mode: "shared", clientId: b.clientId }]);
        writer.release();
        await writer.done;
        expect(await reader).toBeGreaterThan(w.token);
      });

      it("readers of both hold at once", async () => {
        const a = manager();
        const b = manager();
        const res = unique();
        const one = hold(a, res, { mode: "shared" });
        const two = hold(b, res, { mode: "shared" });
        await Promise.all([one.granted, two.granted]);
        expect(await a.request(res, { ifAvailable: true }, (lock) => lock)).toBeNull();
        one.release();
        two.release();
        await Promise.all([one.done, two.done]);
      });

      it("a waiting writer elsewhere keeps new readers out: this manager's next reader comes after it", async () => {
        const a = manager();
        const refused = deferred();
        // The writer's first attempt refused: it is waiting on the store, marked (docs/DESIGN.md §18).
        const b = manager({
          onEvent: (e) => e.type === "attempt" && e.outcome === "taken" && refused.resolve(),
        });
        const res = unique();
        const order: string[] = [];
        const first = hold(a, res, { mode: "shared" });
        await first.granted;
        const writer = b.request(res, () => {
          order.push("writer");
        });
        await refused.promise;
        const second = a.request(res, { mode: "shared" }, () => {
          order.push("reader 2");
        });
        await sleep(150);
        expect(order).toEqual([]);
        first.release();
        await Promise.all([first.done, writer, second]);
        expect(order).toEqual(["writer", "reader 2"]);
      });

      it("query({ names }) reports the store's holder of each name asked, whoever holds it", async () => {
        const a = manager({ owner: "machine-a" });
        const b = manager({ owner: "machine-b" });
        const x = unique();
        const y = unique();
        const free = unique();
        const writer = hold(b, x);
        const readers = [hold(a, y, { mode: "shared" }), hold(b, y, { mode: "shared" })];
        const w = await writer.granted;
        const [r1, r2] = await Promise.all(readers.map((r) => r.granted));
        const state = await a.query({ names: [x, y, free] });
        expect(state.held).toEqual([{ name: y, mode: "shared", clientId: "machine-a" }]);
        // A name held shared: the newest reader (the greater token), and how many there are.
        const newest =
          r1!.token > r2!.token
            ? { clientId: "machine-a", token: r1!.token }
            : { clientId: "machine-b", token: r2!.token };
        expect(state.holders).toEqual([
          { name: x, mode: "exclusive", clientId: "machine-b", token: w.token },
          { name: y, mode: "shared", ...newest, readers: 2 },
        ]);
        expect("holders" in (await a.query())).toBe(false);
        const aborted = AbortSignal.abort(new Error("stop"));
        await expect(a.query({ names: [x], signal: aborted })).rejects.toThrow("stop");
        await expect(a.query({ names: [x, 1 as never] })).rejects.toThrow(
          /names must be an array of strings/,
        );
        writer.release();
        for (const r of readers) r.release();
        await Promise.all([writer.done, ...readers.map((r) => r.done)]);
      });
    });

    describe("query()", () => {
      it("reports this manager's held and pending locks with name, mode and clientId, pending in request order (WPT query)", async () => {
        const locks = manager();
        const res = unique();
        const other = unique();
        expect(await locks.query()).toEqual({ held: [], pending: [] });
        const holder = hold(locks, res);
        await holder.granted;
        const inner = hold(locks, other, { mode: "shared" });
        await inner.granted;
        const waiting = [
          hold(locks, res, { mode: "shared" }),
          hold(locks, res),
          hold(locks, res, { mode: "shared" }),
        ];
        const state = await locks.query();
        const me = locks.clientId;
        expect(state.held).toEqual(
          expect.arrayContaining([
            { name: res, mode: "exclusive", clientId: me },
            { name: other, mode: "shared", clientId: me },
          ]),
        );
        expect(state.held).toHaveLength(2);
        expect(state.pending).toEqual([
          { name: res, mode: "shared", clientId: me },
          { name: res, mode: "exclusive", clientId: me },
          { name: res, mode: "shared", clientId: me },
        ]);
        holder.release();
        inner.release();
        for (const w of waiting) w.granted.then(() => w.release());
        await Promise.all([holder.done, inner.done, ...waiting.map((w) => w.done)]);
        expect(await locks.query()).toEqual({ held: [], pending: [] });
      });

      it("two managers have different clientIds (WPT query: different ids for different contexts)", () => {
        expect(manager().clientId).not.toBe(manager().clientId);
      });
    });

    describe("a lease lost while the callback runs", () => {
      it("lock.signal aborts, the request rejects at once with the LeaseLostError, the callback runs on, and the next request is served", async () => {
        const locks = manager({ ttl: 1_000 });
        const res = unique();
        const finish = deferred<string>();
        let signal: AbortSignal | undefined;
        let ran = false;
        const p = locks.request(res, (lock) => {
          signal = lock.signal;
          // An event loop stalled past the lease's margin (a long GC, a blocking call): the lease is
          // lost at the next timer, before anyone else can take the lock.
          const until = performance.now() + 1_500;
          while (performance.now() < until) {}
          return finish.promise.then((v) => {
            ran = true;
            return v;
          });
        });
        const rejected = await p.then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(rejected).toBeInstanceOf(LeaseLostError);
        expect(signal?.aborted).toBe(true);
        expect(signal?.reason).toBe(rejected);
        expect(ran).toBe(false); // rejected before the callback settled
        // Out of the held set: the next request on the name is served while the callback still runs.
        expect(await locks.request(res, (lock) => lock.mode)).toBe("exclusive");
        finish.resolve("late");
        await sleep(10);
        expect(ran).toBe(true);
      });
    });

    it('a backend without shared leases refuses mode "shared" at the call, naming it', async () => {
      const locks = createLockManager(memory({ expiry: "observed" }));
      const res = unique();
      // At the call: also while the name is held, when the request would otherwise wait in the queue.
      const holder = hold(locks, res);
      await holder.granted;
      await expect(locks.request(res, { mode: "shared" }, () => {})).rejects.toThrow(
        /request: the memory backend cannot hold shared leases/,
      );
      expect((await locks.query()).pending).toEqual([]);
      holder.release();
      await holder.done;
      expect(await locks.request(res, () => 1)).toBe(1);
    });
  });
}
