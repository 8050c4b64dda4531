// createMutex checks every option at creation, and each method its own options, with a TypeError
// or RangeError that names the option and what is valid.
import { describe, expect, it, vi } from "vitest";
import { azureBlob } from "../../src/backends/azure-blob/index.ts";
import { memory } from "../../src/backends/memory/index.ts";
import { createElection, createMutex, createSemaphore } from "../../src/index.ts";
import { azureFetch, fakeClockInEachTest, reply, thrown } from "../harness/doubles.ts";

fakeClockInEachTest();

describe("options are checked at createMutex", () => {
  const ok = memory();
  it.each([
    [{ name: "" }, RangeError, /name must be 1-255/],
    [{ name: "x".repeat(256) }, RangeError, /name must be 1-255/],
    [{ name: "a b" }, RangeError, /name "a b" is invalid/],
    [{ name: "a//b" }, RangeError, /invalid/],
    [{ name: "ends." }, RangeError, /invalid/],
    [{ name: "/starts" }, RangeError, /invalid/],
    [{ name: "a/../b" }, RangeError, /invalid/],
    [{ name: "a/./b" }, RangeError, /invalid/],
    [{ name: 3 }, TypeError, /name must be a string/],
    [{ name: "n", ttl: 0 }, RangeError, /ttl must be an integer number of ms from 10/],
    [{ name: "n", ttl: Number.NaN }, RangeError, /ttl/],
    [{ name: "n", ttl: Number.POSITIVE_INFINITY }, RangeError, /ttl/],
    [{ name: "n", ttl: 1500.5 }, RangeError, /ttl/],
    [{ name: "n", ttl: 1_000, stopMargin: 500 }, RangeError, /stopMargin must be .* < ttl \/ 2 \(500\)/],
    [{ name: "n", stopMargin: -1 }, RangeError, /stopMargin/],
    [{ name: "n", retryDelay: -1 }, RangeError, /retryDelay must be a number of ms from 0/],
    [{ name: "n", renew: "yes" }, TypeError, /renew must be a boolean/],
  ])("%o", (options, ErrorType, message) => {
    expect(() => createMutex(ok, options as never)).toThrow(ErrorType);
    expect(() => createMutex(ok, options as never)).toThrow(message);
  });

  // What createMutex accepts, every backend stores and gives back exactly (the conformance suite
  // checks the accepted edge owners on each); PostgreSQL's text cannot hold U+0000, which failed
  // every acquire there, so control characters are refused here, for every backend.
  const OWNER_RULE =
    /^\[leasehold\] create(Mutex|Semaphore): owner must be 1-256 characters \(UTF-16 code units\) of well-formed Unicode without control characters \(U\+0000-U\+001F, U\+007F-U\+009F\), got /;
  it.each([
    ["", "0 characters"],
    ["x".repeat(257), "257 characters"],
    ["🔒".repeat(128) + "x", "257 characters"],
    ["a\uD800b", "a lone surrogate at index 1"],
    ["\uDC00", "a lone surrogate at index 0"],
    ["ab\uDC00\uD800", "a lone surrogate at index 2"],
    ["a\u0000b", "a control character (U+0000) at index 1"],
    ["host\t1", "a control character (U+0009) at index 4"],
    ["line\n", "a control character (U+000A) at index 4"],
    ["\u001b[31mred", "a control character (U+001B) at index 0"],
    ["del\u007f", "a control character (U+007F) at index 3"],
    ["é\u0085", "a control character (U+0085) at index 1"],
    ["\u009f", "a control character (U+009F) at index 0"],
    [42, "number"],
  ])(
    "refuses owner %j at createMutex and createSemaphore: a TypeError with the rule and what was wrong",
    (owner, got) => {
      for (const make of [
        () => createMutex(ok, { name: "n", owner: owner as string }),
        () => createSemaphore(ok, { name: "n", limit: 2, owner: owner as string }),
      ]) {
        const error = thrown(make);
        expect(error).toBeInstanceOf(TypeError);
        expect((error as Error).message).toMatch(OWNER_RULE);
        expect((error as Error).message.endsWith(`got ${got}`)).toBe(true);
      }
    },
  );

  it("accepts owners at the edges of the rule: 1 and 256 code units, astral characters, U+00A0, U+FEFF, U+FFFF", () => {
    for (const owner of ["x", " ", "x".repeat(256), "🔒".repeat(128), "\u00A0\uFEFF\uFFFF\u2028|%"]) {
      expect(createMutex(ok, { name: "n", owner }).owner).toBe(owner);
      expect(createSemaphore(ok, { name: "n", limit: 2, owner }).owner).toBe(owner);
    }
  });

  it("accepts names with the allowed punctuation", () => {
    for (const name of ["a", "jobs/nightly-report", "tenant:42@eu+1", "v1.2_x"]) {
      expect(createMutex(ok, { name }).name).toBe(name);
    }
  });

  it("rejects a backend missing a method, naming it", () => {
    const { release: _, ...partial } = memory();
    expect(() => createMutex(partial as never, { name: "n" })).toThrow(/missing method\(s\): release/);
    expect(() => createMutex(null as never, { name: "n" })).toThrow(TypeError);
  });

  it("rejects a ttl outside the backend's range, saying the range", () => {
    const ranged = { ...memory(), name: "ranged", ttlRange: [15_000, 60_000] as const };
    expect(() => createMutex(ranged, { name: "n", ttl: 10_000 })).toThrow(
      /ttl must be from 15000 to 60000 ms for the ranged backend/,
    );
    expect(createMutex(ranged, { name: "n", ttl: 60_000 }).name).toBe("n");
  });

  it("rejects a bad acquire timeout", async () => {
    await expect(createMutex(ok, { name: "n" }).acquire({ timeout: -1 })).rejects.toThrow(RangeError);
  });

  it("rejects bad options of acquire, tryAcquire, holder, lead and watch with a TypeError naming the option", async () => {
    const mutex = createMutex(ok, { name: "n" });
    const election = createElection(mutex);
    const task = async () => {};
    const bad = null as never;
    const cases: [Promise<unknown> | (() => unknown), RegExp][] = [
      [mutex.acquire(bad), /acquire: options must be an object, got null/],
      [mutex.acquire({ signal: "x" as never }), /acquire: signal must be an AbortSignal, got string/],
      [mutex.acquire({ onError: 1 as never }), /acquire: onError must be a function/],
      [mutex.acquire({ timeout: "5" as never }), /acquire: timeout must be a number of ms >= 0, got string/],
      [mutex.tryAcquire(bad), /tryAcquire: options must be an object/],
      [mutex.tryAcquire({ signal: {} as never }), /tryAcquire: signal must be an AbortSignal/],
      [mutex.holder({ signal: 3 as never }), /holder: signal must be an AbortSignal/],
      [election.lead(task, bad), /lead: options must be an object/],
      [election.lead(task, { signal: "x" as never }), /lead: signal must be an AbortSignal, got string/],
      [election.lead(task, { onError: "log" as never }), /lead: onError must be a function/],
      [election.lead(task, { stopTimeout: Number.NaN }), /lead: stopTimeout must be a number of ms >= 0/],
      [() => election.watch(bad), /watch: options must be an object/],
      [() => election.watch({ signal: true as never }), /watch: signal must be an AbortSignal/],
      [
        () => election.watch({ interval: Number.POSITIVE_INFINITY }),
        /watch: interval must be a finite number/,
      ],
    ];
    for (const [call, message] of cases) {
      const error = await (typeof call === "function" ? Promise.resolve().then(call) : call).catch(
        (e: unknown) => e,
      );
      expect(error, String(message)).toBeInstanceOf(Error);
      expect((error as Error).name).toMatch(/^(TypeError|RangeError)$/);
      expect((error as Error).message).toMatch(message);
    }
    expect(vi.getTimerCount()).toBe(0);
  });

  // Not validated before (CHANGELOG.md, Fixed: "stopTimeout and watch's interval were not validated").
  it("rejects a bad stopTimeout and watch interval", async () => {
    const election = createElection(createMutex(memory(), { name: "opts" }));
    await expect(election.lead(async () => {}, { stopTimeout: -1 })).rejects.toThrow(RangeError);
    expect(() => election.watch({ interval: Number.NaN })).toThrow(/interval must be a finite number/);
  });

  it("createElection takes a Mutex and nothing else", () => {
    const copy = { ...createMutex(memory(), { name: "e" }) };
    for (const bad of [undefined, null, {}, memory(), { acquire() {}, holder() {} }, copy]) {
      expect(() => createElection(bad as never)).toThrow(
        new TypeError("[leasehold] createElection: mutex must be a Mutex from createMutex"),
      );
    }
    const mutex = createMutex(memory(), { name: "e", ttl: 3_000, retryDelay: 250, owner: "me" });
    expect(mutex).toMatchObject({ name: "e", ttl: 3_000, owner: "me" });
    for (const internal of ["retryDelay", "stopMargin", "onEvent"])
      expect(mutex).not.toHaveProperty(internal);
    expect(createElection(mutex).isLeader).toBe(false);
  });

  // The azure-blob backend threw on the first acquire instead (CHANGELOG.md, Fixed: "A bad owner
  // was reported on first use").
  it("an owner that is not well-formed Unicode is rejected by createMutex, not on first use", async () => {
    let created: ReturnType<typeof createMutex> | undefined;
    try {
      created = createMutex(
        azureBlob({
          connectionString: "UseDevelopmentStorage=true",
          container: "locks",
          fetch: azureFetch(() => reply(201)),
        }),
        { name: "o", ttl: 15_000, owner: "bad\ud800" },
      );
    } catch (error) {
      expect(error).toBeInstanceOf(TypeError);
      expect((error as Error).message).toMatch(/owner/);
      return;
    }
    await expect(created.tryAcquire()).resolves.toBeDefined();
  });
});
