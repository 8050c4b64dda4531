// The one smoke suite every runtime runs (the way panva/jose tests each runtime): a plain async
// function, handed the library's exports and the servers' coordinates by a thin per-runtime
// runner (run-node.mjs, run-node24.mjs, run-bun.ts, run-deno.ts, worker.ts under workerd). It
// needs no test framework and no runtime API beyond what the library itself uses, and it throws
// on the first failed check. Only erasable TypeScript here (Node 24 strips the types natively).
//
// What it checks, on memory, Upstash (through the test bridge), Azure (Azurite), a quorum of
// three Upstash members (three key prefixes on the bridge), the Cloudflare Durable Object
// (through its lockHandler route, in workerd) and DynamoDB (dynalite; its table made with
// createTable, by whichever runtime comes first):
// - `await using` acquires and releases: the lease's signal aborts with ERR_LEASE_LOST at the
//   end of the scope and the backend is free afterwards;
// - exclusivity: while one mutex holds the lock, a second one's tryAcquire() gives null and
//   holder() reports the first one's owner and token;
// - expiry and takeover (memory, Upstash, quorum, Cloudflare, DynamoDB by observed expiry; ttl 600 ms, renew: false): the holder's signal aborts
//   by itself, then the other mutex acquires with a greater fencing token, and releasing the
//   lost lease does not free the new holder's lock;
// - Azure (ttl ≥ 15 s, so no waiting for a real expiry): the holder's signal aborts by itself
//   while the blob lease still excludes the other mutex (the guard works), and after the lost
//   lease is released the other mutex takes over with a greater token;
// - runOnce on every one of them: a fire runs once, and a later call on another mutex finds it
//   done, naming the runner and its token, without running anything.
import type * as AzureBlobModule from "../../../src/backends/azure-blob/index.ts";
import type * as CloudflareModule from "../../../src/backends/cloudflare/index.ts";
import type * as DynamoDBModule from "../../../src/backends/dynamodb/index.ts";
import type * as MemoryModule from "../../../src/backends/memory/index.ts";
import type * as QuorumModule from "../../../src/backends/quorum/index.ts";
import type * as UpstashModule from "../../../src/backends/upstash/index.ts";
import type * as Core from "../../../src/index.ts";

/**
 * The library as the runner imported it: `leasehold` (the core's namespace, spread), and the
 * backends of `leasehold/memory`, `/upstash`, `/azure-blob`, `/quorum`, `/cloudflare`, `/dynamodb`.
 */
export interface SmokeLib
  extends Pick<typeof Core, "createMutex" | "createLockManager" | "runOnce" | "isLockError"> {
  memory: typeof MemoryModule.memory;
  upstash: typeof UpstashModule.upstash;
  azureBlob: typeof AzureBlobModule.azureBlob;
  quorum: typeof QuorumModule.quorum;
  durableObject: typeof CloudflareModule.durableObject;
  dynamodb: typeof DynamoDBModule.dynamodb;
}

/** Where the servers are. Runners read it from the environment with {@link smokeEnv}. */
export interface SmokeEnv {
  /** A label for this runtime, such as "node20"; it goes into lock names. */
  runtime: string;
  /** Unique per run, so runtimes running at once never share a lock. */
  id: string;
  upstash: { url: string; token: string };
  azure: { connectionString: string; container: string };
  /** The lockHandler route of the test worker (test/harness/setup/cloudflare.ts). */
  cloudflare: { url: string; token: string };
  dynamodb: { endpoint: string; region: string; accessKeyId: string; secretAccessKey: string; table: string };
}

/** What {@link smoke} returns when every check passed. */
export interface SmokeReport {
  runtime: string;
  /** The names of the checks that passed, in order of completion. */
  passed: string[];
  ms: number;
}

/** Every check name a complete run passes; the runtimes test compares against it. */
export const SMOKE_CHECKS: readonly string[] = [
  "memory: await using acquires and releases",
  "memory: exclusive between two mutexes",
  "memory: expires and is taken over with a greater token",
  "upstash: await using acquires and releases",
  "upstash: exclusive between two mutexes",
  "upstash: expires and is taken over with a greater token",
  "azure-blob: await using acquires and releases",
  "azure-blob: exclusive between two mutexes",
  "azure-blob: signal aborts before the blob lease ends, then taken over with a greater token",
  "quorum: await using acquires and releases",
  "quorum: exclusive between two mutexes",
  "quorum: expires and is taken over with a greater token",
  "cloudflare: await using acquires and releases",
  "cloudflare: exclusive between two mutexes",
  "cloudflare: expires and is taken over with a greater token",
  "dynamodb: await using acquires and releases",
  "dynamodb: exclusive between two mutexes",
  "dynamodb: expires and is taken over with a greater token",
  "memory: runs a fire once; a later call finds it done",
  "upstash: runs a fire once; a later call finds it done",
  "azure-blob: runs a fire once; a later call finds it done",
  "quorum: runs a fire once; a later call finds it done",
  "cloudflare: runs a fire once; a later call finds it done",
  "dynamodb: runs a fire once; a later call finds it done",
  "memory: readers share; a writer waits for them and gets a greater token",
  "upstash: readers share; a writer waits for them and gets a greater token",
  "cloudflare: readers share; a writer waits for them and gets a greater token",
  "memory: Web Locks: a reader on one manager, the writer on another after it",
  "upstash: Web Locks: a reader on one manager, the writer on another after it",
];

/** The variables runners pass: UPSTASH_REDIS_REST_URL/_TOKEN, AZURE_STORAGE_CONNECTION_STRING, LEASEHOLD_DO_URL/_TOKEN, AWS_*, … */
export function smokeEnv(read: (name: string) => string | undefined): SmokeEnv {
  const need = (name: string): string => {
    const value = read(name);
    if (!value) throw new Error(`smoke: ${name} is not set (test/package/runtimes.test.ts sets it)`);
    return value;
  };
  return {
    runtime: need("SMOKE_RUNTIME"),
    id: need("SMOKE_ID"),
    upstash: { url: need("UPSTASH_REDIS_REST_URL"), token: need("UPSTASH_REDIS_REST_TOKEN") },
    azure: {
      connectionString: need("AZURE_STORAGE_CONNECTION_STRING"),
      container: read("SMOKE_AZURE_CONTAINER") || "leasehold-smoke",
    },
    cloudflare: { url: need("LEASEHOLD_DO_URL"), token: need("LEASEHOLD_DO_TOKEN") },
    dynamodb: {
      endpoint: need("SMOKE_DYNAMODB_ENDPOINT"),
      region: need("AWS_REGION"),
      accessKeyId: need("AWS_ACCESS_KEY_ID"),
      secretAccessKey: need("AWS_SECRET_ACCESS_KEY"),
      table: read("SMOKE_DYNAMODB_TABLE") || "leasehold-smoke",
    },
  };
}

function check(ok: boolean, what: string): void {
  if (!ok) throw new Error(`smoke check failed: ${what}`);
}

/** Resolves when `signal` aborts; rejects after `ms`. */
function abortedWithin(signal: AbortSignal, ms: number, what: string): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const id = setTimeout(() => reject(new Error(`smoke check failed: ${what} within ${ms} ms`)), ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(id);
        resolve();
      },
      { once: true },
    );
  });
}

type Backend = Core.Backend;

/** await using, exclusivity and holder() on one backend. */
async function exclusive(
  lib: SmokeLib,
  backend: Backend,
  name: string,
  ttl: number,
  pass: (c: string) => void,
) {
  const { createMutex, isLockError } = lib;
  const label = backend.name;
  const a = createMutex(backend, { name, ttl, owner: "smoke-a" });
  const b = createMutex(backend, { name, ttl, owner: "smoke-b" });
  let first: Core.Lease;
  {
    await using lease = await a.acquire({ timeout: 10_000 });
    first = lease;
    check(!lease.signal.aborted && lease.token > 0, `${label}: a fresh lease is live with a token`);
    check((await b.tryAcquire()) === null, `${label}: a second mutex's tryAcquire gives null while held`);
    const seen = await b.holder();
    check(
      seen?.owner === "smoke-a" && seen.token === lease.token,
      `${label}: holder() reports the holder (${JSON.stringify(seen)})`,
    );
    pass(`${label}: exclusive between two mutexes`);
  }
  check(first.signal.aborted, `${label}: the lease's signal aborts when the await using scope ends`);
  const reason = first.signal.reason as { code?: string };
  check(
    isLockError(reason) && reason.code === "ERR_LEASE_LOST",
    `${label}: the released lease's signal.reason is a LeaseLostError`,
  );
  check((await a.holder()) === null, `${label}: the lock is free after the scope ends`);
  {
    await using second = await b.tryAcquire();
    check(
      second !== null && second.token > first.token,
      `${label}: the other mutex takes the freed lock with a greater token`,
    );
  }
  check((await b.holder()) === null, `${label}: free again after the second scope`);
  pass(`${label}: await using acquires and releases`);
}

/** runOnce: a fire runs once under a lease; another mutex's later call finds it done, naming the runner. */
async function once(lib: SmokeLib, backend: Backend, name: string, ttl: number, pass: (c: string) => void) {
  const { createMutex, runOnce } = lib;
  const label = backend.name;
  const fire = Date.UTC(2026, 10, 24);
  let runs = 0;
  const job = (_signal: AbortSignal, lease: Core.Lease) => {
    runs++;
    return lease.token;
  };
  const first = await runOnce(createMutex(backend, { name, ttl, owner: "smoke-a" }), fire, job);
  check(
    first.ran && first.value === first.token,
    `${label}: the first runOnce runs the fire (${JSON.stringify(first)})`,
  );
  const late = await runOnce(createMutex(backend, { name, ttl, owner: "smoke-b" }), fire, job);
  check(
    !late.ran &&
      late.reason === "done" &&
      late.by?.owner === "smoke-a" &&
      first.ran &&
      late.by.token === first.token,
    `${label}: a later runOnce finds the fire done, by the runner (${JSON.stringify(late)})`,
  );
  check(runs === 1, `${label}: the job ran once, not ${runs} times`);
  pass(`${label}: runs a fire once; a later call finds it done`);
}

/**
 * Shared mode: two readers hold at once; a writer is kept out while they do and is served once
 * they release, with a token above theirs.
 */
async function readers(
  lib: SmokeLib,
  backend: Backend,
  name: string,
  ttl: number,
  pass: (c: string) => void,
) {
  const { createMutex } = lib;
  const label = backend.name;
  const [a, b, w] = ["smoke-a", "smoke-b", "smoke-w"].map((owner) =>
    createMutex(backend, { name, ttl, owner }),
  );
  const first = await a!.acquire({ mode: "shared", timeout: 10_000 });
  const second = await b!.tryAcquire({ mode: "shared" });
  check(
    second !== null && second.mode === "shared" && second.token > first.token,
    `${label}: a second reader holds beside the first, with a greater token`,
  );
  check((await w!.tryAcquire()) === null, `${label}: a writer's tryAcquire gives null while readers hold`);
  const seen = await w!.holder();
  check(seen?.readers === 2, `${label}: holder() counts 2 readers (${JSON.stringify(seen)})`);
  const writing = w!.acquire({ timeout: 10_000 });
  await Promise.all([first.release(), second!.release()]);
  {
    await using writer = await writing;
    check(
      writer.mode === "exclusive" && writer.token > second!.token,
      `${label}: the writer's token is above the readers'`,
    );
    check(
      (await a!.tryAcquire({ mode: "shared" })) === null,
      `${label}: a reader's tryAcquire gives null beside the writer`,
    );
  }
  pass(`${label}: readers share; a writer waits for them and gets a greater token`);
}

/**
 * createLockManager: two managers on one store stand for two machines. A shared request on one
 * holds while the other's ifAvailable exclusive request gets null, and its waiting exclusive
 * request is served after the reader with a greater token.
 */
async function webLocks(lib: SmokeLib, backend: Backend, name: string, pass: (c: string) => void) {
  const label = backend.name;
  const [a, b] = [0, 1].map(() => lib.createLockManager(backend, { ttl: 5_000, retryDelay: 50 }));
  let release!: () => void;
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  let granted!: (token: number) => void;
  const reading = new Promise<number>((resolve) => {
    granted = resolve;
  });
  const read = a!.request(name, { mode: "shared" }, async (lock) => {
    check(lock?.mode === "shared", `${label}: the reader's lock is shared`);
    granted(lock!.token);
    await held;
    return lock!.token;
  });
  const readToken = await reading;
  const none = await b!.request(name, { ifAvailable: true }, (lock) => lock);
  check(none === null, `${label}: ifAvailable gives null beside the reader`);
  const write = b!.request(name, (lock) => lock?.token);
  release();
  check((await read) === readToken, `${label}: the reader's request settles with its callback's value`);
  const writeToken = await write;
  check(
    typeof writeToken === "number" && writeToken > readToken,
    `${label}: the writer's token ${writeToken} is above the reader's ${readToken}`,
  );
  pass(`${label}: Web Locks: a reader on one manager, the writer on another after it`);
}

/**
 * A short-ttl lease without renewal expires on its own and is taken over (on DynamoDB, a store
 * without expiry, once the other mutex has seen its record unchanged for the ttl).
 */
async function expiry(lib: SmokeLib, backend: Backend, name: string, pass: (c: string) => void) {
  const { createMutex, isLockError } = lib;
  const label = backend.name;
  const ttl = 1_500; // the taker renews: on a loaded machine a 600 ms lease could lapse before holder() reads it
  const a = createMutex(backend, { name, ttl, renew: false, owner: "smoke-a" });
  const b = createMutex(backend, { name, ttl, owner: "smoke-b", retryDelay: 50 });
  const lost = await a.acquire({ timeout: 10_000 });
  check((await b.tryAcquire()) === null, `${label}: held before it expires`);
  await abortedWithin(lost.signal, 5_000, `${label}: the unrenewed lease's signal aborts by itself`);
  const reason = lost.signal.reason as { code?: string };
  check(isLockError(reason) && reason.code === "ERR_LEASE_LOST", `${label}: aborted with a LeaseLostError`);
  {
    await using next = await b.acquire({ timeout: 5_000 });
    check(next.token > lost.token, `${label}: the taker's token ${next.token} > ${lost.token}`);
    await lost.release(); // never throws for a lost lease, and must not free someone else's lock
    const seen = await a.holder();
    check(seen?.token === next.token, `${label}: releasing the lost lease leaves the new holder in place`);
  }
  pass(`${label}: expires and is taken over with a greater token`);
}

/** Azure leases last ≥ 15 s: check that the signal aborts before the blob lease ends instead. */
async function azureExpiry(lib: SmokeLib, backend: Backend, name: string, pass: (c: string) => void) {
  const { createMutex } = lib;
  // guard = ceil(1 % of 15 000) + 2 + 7 400 ms: the signal aborts ~7.4 s after acquiring, while
  // Azure keeps the lease for 15 s.
  const a = createMutex(backend, { name, ttl: 15_000, renew: false, stopMargin: 7_400, owner: "smoke-a" });
  const b = createMutex(backend, { name, ttl: 15_000, owner: "smoke-b" });
  const lost = await a.acquire({ timeout: 10_000 });
  await abortedWithin(lost.signal, 12_000, "azure-blob: the unrenewed lease's signal aborts by itself");
  check((await b.tryAcquire()) === null, "azure-blob: the blob lease still excludes others after the abort");
  await lost.release();
  {
    await using next = await b.tryAcquire();
    check(next !== null && next.token > lost.token, "azure-blob: taken over with a greater token");
  }
  pass("azure-blob: signal aborts before the blob lease ends, then taken over with a greater token");
}

/** Runs every check; throws on the first failure. */
export async function smoke(lib: SmokeLib, env: SmokeEnv): Promise<SmokeReport> {
  const started = performance.now();
  const passed: string[] = [];
  const pass = (c: string): void => {
    passed.push(c);
  };
  const name = (what: string) => `smoke-${env.id}-${what}`;
  const mem = lib.memory();
  const up = lib.upstash({ url: env.upstash.url, token: env.upstash.token, prefix: "smoke:" });
  const az = lib.azureBlob({
    connectionString: env.azure.connectionString,
    container: env.azure.container,
    createContainer: true,
  });
  const cf = lib.durableObject({ url: env.cloudflare.url, token: env.cloudflare.token });
  // The backends run side by side: the Azure part waits ~7.5 s for its signal, the rest does not.
  await Promise.all([
    (async () => {
      await exclusive(lib, mem, name("x"), 5_000, pass);
      await expiry(lib, mem, name("e"), pass);
      await once(lib, mem, name("o"), 5_000, pass);
      await readers(lib, mem, name("r"), 5_000, pass);
      await webLocks(lib, mem, name("w"), pass);
    })(),
    (async () => {
      await exclusive(lib, up, name("x"), 5_000, pass);
      await expiry(lib, up, name("e"), pass);
      await once(lib, up, name("o"), 5_000, pass);
      await readers(lib, up, name("r"), 5_000, pass);
      await webLocks(lib, up, name("w"), pass);
    })(),
    (async () => {
      const members = [1, 2, 3].map((i) =>
        lib.upstash({ url: env.upstash.url, token: env.upstash.token, prefix: `smoke:q${i}:` }),
      );
      const q = lib.quorum(members);
      await exclusive(lib, q, name("x"), 5_000, pass);
      await expiry(lib, q, name("e"), pass);
      await once(lib, q, name("o"), 5_000, pass);
    })(),
    (async () => {
      await exclusive(lib, cf, name("x"), 5_000, pass);
      await expiry(lib, cf, name("e"), pass);
      await once(lib, cf, name("o"), 5_000, pass);
      await readers(lib, cf, name("r"), 5_000, pass);
    })(),
    (async () => {
      const d = env.dynamodb;
      const ddb = lib.dynamodb({
        table: d.table,
        region: d.region,
        endpoint: d.endpoint,
        credentials: { accessKeyId: d.accessKeyId, secretAccessKey: d.secretAccessKey },
        createTable: true,
        prefix: "smoke:",
      });
      await exclusive(lib, ddb, name("x"), 5_000, pass);
      await expiry(lib, ddb, name("e"), pass);
      await once(lib, ddb, name("o"), 5_000, pass);
    })(),
    (async () => {
      await exclusive(lib, az, name("x"), 15_000, pass);
      await azureExpiry(lib, az, name("e"), pass);
      await once(lib, az, name("o"), 15_000, pass);
    })(),
  ]);
  const missing = SMOKE_CHECKS.filter((c) => !passed.includes(c));
  check(missing.length === 0, `every check ran (missing: ${missing.join("; ")})`);
  return { runtime: env.runtime, passed, ms: Math.round(performance.now() - started) };
}

/** Sends one command to the Upstash REST API at `url` and returns its result. */
export async function restCommand(
  url: string,
  token: string,
  command: (string | number)[],
): Promise<unknown> {
  const r = await fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${token}` },
    body: JSON.stringify(command),
  });
  const body = (await r.json()) as { result?: unknown; error?: string };
  if (!r.ok) throw new Error(`redis ${command[0]}: HTTP ${r.status} ${body.error}`);
  return body.result;
}
