// Property tests (fast-check):
// - over the options: createMutex returns a mutex, or throws a TypeError/RangeError that names an
//   invalid option; never anything else, whatever the values;
// - over the backend's answers: random status codes, bodies (JSON, HTML, XML, truncated, empty,
//   huge), headers, delays, hangs and network failures, fed to the upstash and azure-blob backends
//   through an injected fetch (and, for upstash, a real HTTP server), driven through createMutex.
//   Every operation ends within its time bound with a correct result or a typed LockError
//   (isLockError), and nothing but a well-formed success is ever taken as an acquisition.
import { createServer, type Server } from "node:http";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { azureBlob } from "../../src/backends/azure-blob/index.ts";
import { durableObject } from "../../src/backends/cloudflare/index.ts";
import { memory } from "../../src/backends/memory/index.ts";
import { upstash } from "../../src/backends/upstash/index.ts";
import { type Backend, createMutex, type FetchLike, isLockError, type Lease } from "../../src/index.ts";
import { defaultStopMargin, guardOf, quietBound, renewalBound } from "../../src/timing.ts";
import { listenLoopback } from "../harness/servers/listen.ts";

const TOKEN = "property-TOKEN-5f0c1e2d";
const NUM_RUNS = Number(process.env.LEASEHOLD_PROPERTY_RUNS ?? 60);

// ---------------------------------------------------------------------------------------------
// Options

/** Stands for a 2 MB JSON success body (expanded when served, so counterexamples stay readable). */
const HUGE = "<huge: 2 MB JSON success>";
const HUGE_BODY = `{"result":[1,5,0],"pad":"${"x".repeat(2_000_000)}"}`;
const bodyOf = (r: { body: string }) => (r.body === HUGE ? HUGE_BODY : r.body);

const NAME_CHARS = "abcXYZ019-_.:/@+";
const nameArb = fc.oneof(
  fc.string({ unit: fc.constantFrom(...NAME_CHARS), minLength: 0, maxLength: 12 }),
  fc.string({ minLength: 0, maxLength: 300 }),
  fc.string({ unit: fc.constantFrom("a", "b", "/", "."), minLength: 1, maxLength: 8 }),
  fc.string({ unit: fc.constantFrom("a", "1"), minLength: 250, maxLength: 260 }),
  fc.constantFrom<unknown>(
    undefined,
    null,
    42,
    {},
    ["x"],
    "ok-name",
    "a/b",
    "a//b",
    "./a",
    "a/./b",
    "a/../b",
    "a.",
  ),
);
const numberArb = (lo: number, hi: number) =>
  fc.oneof(
    fc.integer({ min: lo, max: hi }),
    fc.double({ noNaN: false }),
    fc.constantFrom<unknown>(
      undefined,
      null,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      -1,
      0,
      9.5,
      2 ** 31,
      "100",
      true,
    ),
  );
const ownerArb = fc.oneof(
  fc.constant<unknown>(undefined),
  fc.string({ minLength: 0, maxLength: 300 }),
  fc.string({ unit: "grapheme", minLength: 1, maxLength: 40 }),
  fc.constantFrom<unknown>(null, 7, {}, "", "x".repeat(256), "x".repeat(257)),
);

const NAME_OK = /^[A-Za-z0-9_.:/@+-]+$/;
/** The documented rules, written independently of src/mutex.ts. Returns the invalid options. */
function invalidOptions(o: Record<string, unknown>, range?: readonly [number, number]): Set<string> {
  const bad = new Set<string>();
  const { name } = o;
  if (
    typeof name !== "string" ||
    name.length < 1 ||
    name.length > 255 ||
    !NAME_OK.test(name) ||
    /^[/.]|[/.]$/.test(name) ||
    name.includes("//") ||
    name.split("/").some((s) => s === "." || s === "..")
  ) {
    bad.add("name");
  }
  const ttl = o.ttl === undefined ? 15_000 : o.ttl;
  const ttlOk =
    typeof ttl === "number" &&
    Number.isSafeInteger(ttl) &&
    ttl >= 10 &&
    ttl <= 2_147_483_647 &&
    (!range || (ttl >= range[0] && ttl <= range[1]));
  if (!ttlOk) bad.add("ttl");
  const sm = o.stopMargin ?? (ttlOk ? defaultStopMargin(ttl as number) : 0);
  if (ttlOk && !(typeof sm === "number" && Number.isFinite(sm) && sm >= 0 && sm < (ttl as number) / 2)) {
    bad.add("stopMargin");
  }
  const rd = o.retryDelay === undefined ? 1_000 : o.retryDelay;
  if (!(typeof rd === "number" && Number.isFinite(rd) && rd >= 0 && rd <= 2_147_483_647))
    bad.add("retryDelay");
  const renew = o.renew === undefined ? true : o.renew;
  if (typeof renew !== "boolean") bad.add("renew");
  const owner = o.owner ?? "default";
  if (!(typeof owner === "string" && owner.length >= 1 && owner.length <= 256)) bad.add("owner");
  return bad;
}

describe("options", () => {
  const backends: [string, Backend][] = [
    ["memory", memory()],
    ["upstash", upstash({ url: "https://example.upstash.io", token: TOKEN })],
    ["azure-blob", azureBlob({ container: "locks", connectionString: "UseDevelopmentStorage=true" })],
    ["cloudflare", durableObject({ url: "https://locks.example.workers.dev/leasehold", token: TOKEN })],
  ];
  for (const [label, backend] of backends) {
    it(`${label}: createMutex returns a mutex or throws a TypeError/RangeError naming an invalid option`, () => {
      fc.assert(
        fc.property(
          fc.record(
            {
              name: nameArb,
              ttl: fc.oneof(numberArb(10, 100_000), fc.integer({ min: 14_000, max: 61_000 })),
              stopMargin: numberArb(0, 30_000),
              retryDelay: numberArb(0, 5_000),
              renew: fc.constantFrom<unknown>(undefined, true, false, 0, "yes"),
              owner: ownerArb,
            },
            { requiredKeys: ["name"] },
          ),
          (options) => {
            const bad = invalidOptions(options, backend.ttlRange);
            let result: unknown;
            try {
              result = createMutex(backend, options as never);
            } catch (error) {
              expect(bad.size, `threw for valid options: ${String(error)}`).toBeGreaterThan(0);
              expect([TypeError, RangeError]).toContain((error as Error).constructor);
              const message = (error as Error).message;
              expect(
                [...bad].some((opt) => new RegExp(`\\b${opt}\\b`).test(message)),
                `${message} names none of ${[...bad]}`,
              ).toBe(true);
              return;
            }
            expect([...bad], "accepted invalid options").toEqual([]);
            expect(result).toMatchObject({ name: options.name });
          },
        ),
        { numRuns: 1_000 },
      );
    });
  }
});

// ---------------------------------------------------------------------------------------------
// Backend answers

/** One answer of the fake server. `hang`: never answers; `netError`: fetch rejects; `cut`: text() rejects. */
interface Reply {
  status: number;
  body: string;
  headers: Record<string, string>;
  delay: number;
  hang: boolean;
  netError: boolean;
  cut: boolean;
}

const upstashBody = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 1, max: 1_000 }).map((n) => `{"result":[1,${n},0]}`) },
  {
    weight: 2,
    arbitrary: fc.integer({ min: -5, max: 5_000 }).map((n) => `{"result":[0,${n},7]}`),
  },
  { weight: 2, arbitrary: fc.constantFrom('{"result":1}', '{"result":0}', '{"result":null}') },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      '{"result":[1,1.5,0]}',
      '{"result":[1,-3,0]}',
      '{"result":[1,"5",0]}',
      '{"result":[1,9007199254740993,0]}',
      '{"result":[true,5,0]}',
      '{"result":[1,5,6]}',
      '{"result":[1,5]}',
      '{"result":[0,"nonce|7|someone",100]}',
      '{"result":[1]}',
      '{"result":{"0":1,"1":5}}',
      '{"result":"OK"}',
      '{"result":["nonce|x|y",100]}',
      '{"result":["nonce|3|owner",-2]}',
      '{"error":"ERR something"}',
      '{"error":"LOADING Redis is loading"}',
      '{"error":"NOPERM this user has no permissions"}',
      '{"error":5,"result":[1,5,0]}',
      '{"result":[1,5,0],"error":"ERR both"}',
      '[{"result":[1,5,0]}]',
      "null",
      "1",
      '"text"',
      "{}",
      '{"result":[1,5,0]', // truncated
      '{"resu',
      "",
      "<html><body><h1>502 Bad Gateway</h1></body></html>",
      '<?xml version="1.0"?><Error><Code>ServerBusy</Code></Error>',
      `{"error":"ERR bad token ${TOKEN}"}`,
    ),
  },
  { weight: 1, arbitrary: fc.json() },
  { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
  { weight: 1, arbitrary: fc.constant(HUGE) },
);

const headersArb = fc.dictionary(
  fc.constantFrom(
    "content-type",
    "x-ms-error-code",
    "x-ms-blob-sequence-number",
    "x-ms-lease-state",
    "retry-after",
    "x-custom",
  ),
  fc.oneof(
    fc.constantFrom(
      "application/json",
      "text/html",
      "LeaseAlreadyPresent",
      "BlobNotFound",
      "ContainerNotFound",
      "3",
      "0",
      "-1",
      "leased",
    ),
    fc.string({ maxLength: 20 }),
  ),
  { maxKeys: 3 },
);

const replyArb = (body: fc.Arbitrary<string>): fc.Arbitrary<Reply> =>
  fc.record({
    status: fc.oneof(
      { weight: 6, arbitrary: fc.constant(200) },
      {
        weight: 3,
        arbitrary: fc.constantFrom(201, 204, 400, 401, 403, 404, 408, 409, 412, 429, 500, 502, 503),
      },
      { weight: 1, arbitrary: fc.integer({ min: 200, max: 599 }) },
    ),
    body,
    headers: headersArb,
    delay: fc.oneof(
      { weight: 4, arbitrary: fc.constant(0) },
      { weight: 1, arbitrary: fc.integer({ min: 1, max: 40 }) },
    ),
    hang: fc.oneof(
      { weight: 12, arbitrary: fc.constant(false) },
      { weight: 1, arbitrary: fc.constant(true) },
    ),
    netError: fc.oneof(
      { weight: 15, arbitrary: fc.constant(false) },
      { weight: 1, arbitrary: fc.constant(true) },
    ),
    cut: fc.oneof({ weight: 15, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
  });

interface Exchange {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: string;
  reply: Reply;
  /** Whether the whole answer reached the library. */
  delivered: boolean;
}

/** A fetch that plays `replies` in order (the last one repeats), honouring the signal like fetch does. */
function fakeFetch(
  replies: Reply[],
  log: Exchange[],
  pick?: (url: string, method: string, headers: Record<string, string>) => Reply | undefined,
): FetchLike {
  let i = 0;
  return (url, init) => {
    const reply = pick?.(url, init.method, init.headers) ?? replies[Math.min(i++, replies.length - 1)]!;
    const ex: Exchange = {
      url,
      method: init.method,
      headers: init.headers,
      body: init.body ?? "",
      reply,
      delivered: false,
    };
    log.push(ex);
    const { signal } = init;
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      if (reply.hang) return;
      timer = setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        if (reply.netError) {
          // Quotes what the request carried: the upstash bearer token (a secret upstash must
          // redact), or for azure (SharedKey) the URL.
          const auth = init.headers.authorization ?? "";
          const quoted = auth.startsWith("Bearer ") ? auth : url;
          const e = new TypeError("fetch failed", {
            cause: Object.assign(new Error(`connect ECONNRESET while sending ${quoted}`), {
              code: "ECONNRESET",
            }),
          });
          return reject(e);
        }
        const headers = new Headers(reply.headers);
        resolve({
          status: reply.status,
          headers,
          text: async () => {
            if (reply.cut) throw new TypeError("terminated", { cause: new Error("other side closed") });
            ex.delivered = true;
            return bodyOf(reply);
          },
        });
      }, reply.delay);
    });
  };
}

/** Settles `p` and measures it. */
async function timed<T>(
  p: Promise<T>,
): Promise<{ ok: true; value: T; ms: number } | { ok: false; error: unknown; ms: number }> {
  const t0 = performance.now();
  try {
    const value = await p;
    return { ok: true, value, ms: performance.now() - t0 };
  } catch (error) {
    return { ok: false, error, ms: performance.now() - t0 };
  }
}

const SLACK = 500; // ms beyond each bound: timers, microtasks, a loaded CI machine (a hang is seconds)

function expectLockError(r: { ok: false; error: unknown }, what: string): void {
  expect(
    isLockError(r.error),
    `${what} rejected with a non-LockError: ${String(r.error)} ${(r.error as Error)?.stack}`,
  ).toBe(true);
}

/** Well-formed Upstash acquire success: 200, JSON object without a string error, result [1, token > 0, 0]. */
function upstashToken(ex: Exchange): number | undefined {
  if (!ex.delivered || ex.reply.status !== 200) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(bodyOf(ex.reply));
  } catch {
    return undefined;
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) return undefined;
  const { result, error } = json as { result?: unknown; error?: unknown };
  if (typeof error === "string") return undefined;
  return Array.isArray(result) &&
    result.length === 3 &&
    result[0] === 1 &&
    result[2] === 0 &&
    Number.isSafeInteger(result[1]) &&
    (result[1] as number) > 0
    ? (result[1] as number)
    : undefined;
}

const isUpstashAcquire = (ex: Exchange) => ex.body.includes("INCR");

/** A RAISE (the fence healed, src/backends/shared/redis-scripts.ts `heal`) answered 1: done. */
function upstashRaised(ex: Exchange): boolean {
  if (!ex.delivered || ex.reply.status !== 200 || !ex.body.includes("KEEPTTL")) return false;
  try {
    return JSON.parse(bodyOf(ex.reply)).result === 1;
  } catch {
    return false;
  }
}

describe("upstash: random answers through an injected fetch", () => {
  it("every operation ends in time with a correct result or a LockError; only well-formed successes are leases", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(replyArb(upstashBody), { minLength: 1, maxLength: 6 }), async (replies) => {
        const log: Exchange[] = [];
        const ttl = 300;
        const stopMargin = 30;
        const guard = guardOf(ttl, stopMargin);
        const backend = upstash({
          url: "https://fake.upstash.io",
          token: TOKEN,
          fetch: fakeFetch(replies, log),
        });
        const mutex = createMutex(backend, { name: "prop", ttl, stopMargin, retryDelay: 20, renew: false });

        const leases: Lease[] = [];
        const checkLease = (lease: Lease, from: number) => {
          leases.push(lease);
          const window = log.slice(from);
          const granted = window.filter(isUpstashAcquire).map(upstashToken);
          // Its own well-formed grant, or one with a token not above a token seen before, which
          // the backend heals: it raises the fence (RAISE answered 1) and grants the raised token.
          const ok =
            granted.includes(lease.token) ||
            (granted.some((token) => token !== undefined && token < lease.token) &&
              window.some(upstashRaised));
          expect(
            ok,
            `lease ${lease.token} without a well-formed success: ${JSON.stringify(log.slice(from).map((e) => e.reply))}`,
          ).toBe(true);
        };

        // tryAcquire: bounded by ttl − guard.
        let from = log.length;
        const t = await timed(mutex.tryAcquire());
        expect(t.ms).toBeLessThan(ttl - guard + SLACK);
        if (!t.ok) expectLockError(t, "tryAcquire");
        else if (t.value) checkLease(t.value, from);
        else {
          const ex = log.slice(from).find(isUpstashAcquire)!;
          expect(JSON.parse(bodyOf(ex.reply)).result[0]).toBe(0); // null only for a well-formed "taken"
        }

        // renew and release of a lease we got: bounded by renewalBound and quietBound (src/timing.ts).
        if (t.ok && t.value) {
          from = log.length;
          const r = await timed(t.value.renew());
          expect(r.ms).toBeLessThan(renewalBound(ttl, ttl - guard) + SLACK);
          if (r.ok)
            expect(
              log
                .slice(from)
                .some(
                  (ex) =>
                    ex.delivered && ex.reply.status === 200 && JSON.parse(bodyOf(ex.reply)).result === 1,
                ),
            ).toBe(true);
          else expectLockError(r, "renew");
        }

        // acquire with a timeout: bounded by the timeout.
        from = log.length;
        const a = await timed(mutex.acquire({ timeout: 150 }));
        expect(a.ms).toBeLessThan(150 + SLACK);
        if (a.ok) checkLease(a.value, from);
        else expectLockError(a, "acquire");

        // holder(): a correct reading or a LockError (bounded by a signal: see secrets/resources for the unbounded case).
        const h = await timed(mutex.holder({ signal: AbortSignal.timeout(200) }));
        expect(h.ms).toBeLessThan(200 + SLACK);
        if (h.ok && h.value !== null) {
          expect(Number.isSafeInteger(h.value.token)).toBe(true);
          expect(typeof h.value.owner).toBe("string");
        } else if (!h.ok && !(h.error instanceof DOMException && h.error.name === "TimeoutError")) {
          expectLockError(h, "holder");
        }

        for (const lease of leases) {
          const rel = await timed(lease.release());
          expect(rel.ms).toBeLessThan(quietBound(ttl) + SLACK);
          if (!rel.ok) expectLockError(rel, "release");
          expect(lease.signal.aborted).toBe(true);
        }
      }),
      { numRuns: NUM_RUNS },
    );
  });
});

describe("upstash: random answers from a real HTTP server", () => {
  let server: Server;
  let url = "";
  let current: Reply | undefined;
  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        const reply = current!;
        if (reply.hang) return;
        setTimeout(() => {
          if (reply.netError) {
            res.socket?.destroy();
            return;
          }
          const body = Buffer.from(bodyOf(reply));
          const headers: Record<string, string> = {};
          for (const [k, v] of Object.entries(reply.headers)) if (/^[\x20-\x7e]*$/.test(v)) headers[k] = v;
          if (reply.cut) {
            res.writeHead(reply.status, { ...headers, "content-length": String(body.length + 10) });
            res.write(body, () => res.destroy());
            return;
          }
          res.writeHead(reply.status, { ...headers, "content-length": String(body.length) });
          res.end(body);
        }, reply.delay);
      });
    });
    url = await listenLoopback(server);
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  it("tryAcquire and acquire end in time; a lease only from a well-formed 200 [1, token]", async () => {
    await fc.assert(
      // One answer for every request of a run (a background release of the previous run may land
      // at any time, so a sequence could not be matched to requests).
      fc.asyncProperty(replyArb(upstashBody), async (reply) => {
        current = reply;
        const replies = [reply];
        const ttl = 300;
        const stopMargin = 30;
        const mutex = createMutex(upstash({ url, token: TOKEN }), {
          name: "prop",
          ttl,
          stopMargin,
          retryDelay: 20,
          renew: false,
        });
        const t = await timed(mutex.tryAcquire());
        expect(t.ms).toBeLessThan(ttl - guardOf(ttl, stopMargin) + SLACK);
        const first = replies[0]!;
        const firstToken = upstashToken({
          url,
          method: "POST",
          headers: {},
          body: "",
          reply: first,
          delivered: !first.hang && !first.netError && !first.cut,
        });
        if (t.ok && t.value) {
          expect(t.value.token).toBe(firstToken);
          await t.value.release().catch(() => {});
        } else if (!t.ok) expectLockError(t, "tryAcquire");
        else expect(firstToken).toBeUndefined();
        const a = await timed(mutex.acquire({ timeout: 120 }));
        expect(a.ms).toBeLessThan(120 + SLACK);
        if (a.ok) {
          const tokens = replies.map((r) =>
            upstashToken({
              url,
              method: "POST",
              headers: {},
              body: "",
              reply: r,
              delivered: !r.hang && !r.netError && !r.cut,
            }),
          );
          expect(tokens).toContain(a.value.token);
          await a.value.release().catch(() => {});
        } else expectLockError(a, "acquire");
      }),
      { numRuns: Math.ceil(NUM_RUNS / 3) },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Azure

const azureReply = (ok: number) =>
  replyArb(
    fc.oneof(
      fc.constant(""),
      fc.constantFrom(
        '<?xml version="1.0" encoding="utf-8"?><Error><Code>LeaseAlreadyPresent</Code><Message>There is already a lease present.</Message></Error>',
        '<?xml version="1.0"?><Error><Code>BlobNotFound</Code></Error>',
        '<?xml version="1.0"?><Error><Code>ServerBusy</Code></Error>',
        "<html><body>503 Service Unavailable</body></html>",
        '{"error":"not xml"}',
        "<Error><Code>Lease",
      ),
      fc.string({ maxLength: 100 }),
    ),
  ).chain((r) => fc.constantFrom(r, { ...r, status: ok, hang: false, netError: false, cut: false }));

/** Well-formed fence reply: 200 with a positive decimal x-ms-blob-sequence-number. */
function azureToken(ex: Exchange): number | undefined {
  const seq = new Headers(ex.reply.headers).get("x-ms-blob-sequence-number");
  if (!ex.delivered || ex.reply.status !== 200 || seq === null) return undefined;
  // Lenient on the header's spelling, as src/backends/azure-blob/index.ts is today (Number(…)); see the
  // it.fails below for the strict rule.
  const n = Number(seq);
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

describe("azure-blob: random answers through an injected fetch", () => {
  it("every operation ends in time with a correct result or a LockError; only well-formed successes are leases", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          lease: azureReply(201),
          fence: azureReply(200).chain((r) =>
            fc.constantFrom(r, {
              ...r,
              headers: { ...r.headers, "x-ms-blob-sequence-number": String(r.delay + 1) },
            }),
          ),
          meta: azureReply(200),
          other: azureReply(200),
        }),
        async (plan) => {
          // No hangs on the lease request here: a hung acquire is bounded by ttl − guard ≈ 14 s (Azure's
          // minimum ttl), covered in test/harness/fault-proxy.test.ts; acquire({ timeout }) below bounds the rest.
          const log: Exchange[] = [];
          const pick = (u: string, method: string, h: Record<string, string>): Reply => {
            if (u.includes("comp=lease") && h["x-ms-lease-action"] === "acquire") return plan.lease;
            if (u.includes("comp=properties")) return plan.fence;
            if (u.includes("comp=metadata")) return plan.meta;
            return method === "PUT" && u.includes("comp=lease") ? { ...plan.other, hang: false } : plan.other;
          };
          const backend = azureBlob({
            accountUrl: "http://127.0.0.1:1/devstoreaccount1",
            accountName: "devstoreaccount1",
            accountKey:
              "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
            container: "locks",
            fetch: fakeFetch([], log, pick),
          });
          const ttl = 15_000;
          const mutex = createMutex(backend, { name: "prop", ttl, retryDelay: 20, renew: false });
          const a = await timed(mutex.acquire({ timeout: 200 }));
          expect(a.ms, JSON.stringify(plan)).toBeLessThan(200 + SLACK);
          if (a.ok) {
            const lease = a.value;
            const fences = log.filter((e) => e.url.includes("comp=properties")).map(azureToken);
            expect(fences, `lease ${lease.token} from ${JSON.stringify(plan)}`).toContain(lease.token);
            expect(
              log.some(
                (e) =>
                  e.url.includes("comp=lease") &&
                  e.headers["x-ms-lease-action"] === "acquire" &&
                  e.delivered &&
                  [200, 201].includes(e.reply.status),
              ),
            ).toBe(true);
            expect(
              log.some((e) => e.url.includes("comp=metadata") && e.delivered && e.reply.status === 200),
            ).toBe(true);
            const rel = await timed(lease.release());
            expect(rel.ms).toBeLessThan(quietBound(ttl) + SLACK);
            if (!rel.ok) expectLockError(rel, "release");
          } else expectLockError(a, "acquire");
          const h = await timed(mutex.holder({ signal: AbortSignal.timeout(200) }));
          if (!h.ok && !(h.error instanceof DOMException)) expectLockError(h, "holder");
        },
      ),
      { numRuns: NUM_RUNS },
    );
  });
});
