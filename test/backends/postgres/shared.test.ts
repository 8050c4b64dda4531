// Shared mode on the postgres backend (docs/DESIGN.md §18), against the real PostgreSQL server the
// harness starts: each shared operation (and a waiting writer's attempt) is one statement; the
// row it writes (the name's row held shared lists its readers and the waiting writer's mark;
// nothing is left after the last release beyond what exclusive mode leaves); the
// statements under READ COMMITTED when they meet on the name's row (each interleaving made
// deterministic by a transaction of the test's own that holds the row lock, and shown waiting in
// pg_stat_activity); and a hammer of readers and writers over many connections of pg and
// postgres.js, checking the one-live-lease guarantee from the leases and the fence from the tokens.
import pg from "pg";
import postgresJs from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AcquireResult, Backend } from "../../../src/backend.ts";
import { postgres } from "../../../src/backends/postgres/index.ts";
import { createMutex, type Lease } from "../../../src/index.ts";
import { sleep } from "../../../src/time.ts";
import { registerSecret } from "../../harness/secrets.ts";
import { ctx } from "./clients.ts";

const pool = new pg.Pool({ connectionString: ctx.url, max: 20 });
const sql = postgresJs(ctx.url, { max: 10, onnotice: () => {} });
afterAll(async () => {
  await pool.end();
  await sql.end();
});

const TABLE = `shared_${crypto.randomUUID().slice(0, 8)}`;
const shared = { mode: "shared" } as const;
const unique = (what: string) => `${what}-${crypto.randomUUID().slice(0, 8)}`;

/** The backend over the shared pool, counting its statements. */
function counted(): { backend: Backend; statements: () => number } {
  let statements = 0;
  const client = {
    query: async (text: string, params: unknown[]) => {
      statements++;
      return (await pool.query(text, params)).rows;
    },
  };
  return { backend: postgres(client, { table: TABLE, createTable: true }), statements: () => statements };
}

/** Every row of the name `key` and any of its own (a name and U+001F: none in shared mode), by name. */
async function rowsOf(key: string) {
  const { rows } = await pool.query(
    `SELECT name, owner, nonce, fence::text AS fence, expires_at > clock_timestamp() AS live FROM "${TABLE}" ` +
      "WHERE name = $1 OR left(name, length($1) + 1) = $1 || chr(31) ORDER BY name",
    [key],
  );
  return rows as { name: string; owner: string; nonce: string; fence: string; live: boolean }[];
}

// The table, made once by the backend's own migration (createTable), before any test.
beforeAll(async () => {
  await counted().backend.inspect({ key: "create the table" });
});

/**
 * An entry of the list of a row held shared: a reader's [expiry in µs since the epoch, token,
 * owner], or under the key "" the waiting writer's [expiry, waiter id, owner].
 */
type Entry = [number, number | string, string];
const listOf = async (key: string) => JSON.parse((await rowsOf(key))[0]!.owner) as Record<string, Entry>;

describe("postgres: shared mode, one statement per operation", () => {
  it("acquireShared, renewShared, releaseShared, inspect and a waiting writer's attempt are one statement each, granted or refused", async () => {
    const { backend, statements } = counted();
    const key = unique("statements");
    const count = async <T>(op: () => Promise<T>): Promise<[T, number]> => {
      const before = statements();
      const value = await op();
      return [value, statements() - before];
    };
    await backend.inspect({ key: "warm-up" }); // createTable's statement, once per backend
    const base = { key, ttl: 10_000 };
    expect(await count(() => backend.acquireShared!({ ...base, owner: "r1", nonce: "r1" }))).toEqual([
      { ok: true, token: 1 },
      1,
    ]);
    expect(await count(() => backend.renewShared!({ ...base, nonce: "r1" }))).toEqual([true, 1]);
    expect((await count(() => backend.inspect({ key })))[1]).toBe(1);
    // The writer waits: refused and marked, in one statement; a new reader is refused in one.
    const [refused, one] = await count(() =>
      backend.acquire({ ...base, owner: "w", nonce: "w1", waiter: "writer" }),
    );
    expect(refused.ok).toBe(false);
    expect(one).toBe(1);
    expect(await count(() => backend.acquireShared!({ ...base, owner: "r2", nonce: "r2" }))).toEqual([
      { ok: false },
      1,
    ]);
    expect((await count(() => backend.releaseShared!({ ...base, nonce: "r1" })))[1]).toBe(1);
    // Granted, the writer's attempt unmarks it in the same statement.
    const [granted, two] = await count(() =>
      backend.acquire({ ...base, owner: "w", nonce: "w2", waiter: "writer" }),
    );
    expect(granted).toEqual({ ok: true, token: 2 });
    expect(two).toBe(1);
    expect(await count(() => backend.acquireShared!({ ...base, owner: "r3", nonce: "r3" }))).toEqual([
      { ok: false, retryAfter: expect.any(Number) },
      1,
    ]);
    await backend.release({ key, nonce: "w2" });
  });
});

describe("postgres: shared mode's rows", () => {
  it("the name's row lists its readers and lasts as long as the longest-lived; a waiting writer's mark is in it; nothing is left after the last release beyond what exclusive mode leaves", async () => {
    const { backend } = counted();
    const key = unique("rows");
    const make = (owner: string, ttl: number) =>
      createMutex(backend, { name: key, owner, ttl, renew: false, retryDelay: 50 });
    const short = (await make("short", 5_000).tryAcquire(shared))!;
    const long = (await make("long", 30_000).tryAcquire(shared))!;
    const [row, ...others] = await rowsOf(key);
    expect(others).toEqual([]);
    expect(row).toMatchObject({ name: key, nonce: "*", fence: String(long.token), live: true });
    const list = JSON.parse(row!.owner) as Record<string, Entry>;
    expect(Object.values(list).map(([, token, owner]) => [token, owner])).toEqual(
      expect.arrayContaining([
        [short.token, "short"],
        [long.token, "long"],
      ]),
    );
    // The row expires with the longest-lived reader (30 s), not the newest or the first.
    const expiry = async () =>
      (
        await pool.query(
          `SELECT (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 AS left FROM "${TABLE}" WHERE name = $1`,
          [key],
        )
      ).rows[0].left as number;
    expect(await expiry()).toBeGreaterThan(20_000);
    expect(await backend.inspect({ key })).toMatchObject({ owner: "long", token: long.token, readers: 2 });

    // A writer waits: its mark is the list's entry "", with its waiter id and owner; no other row.
    let marked = (): void => {};
    const refused = new Promise<void>((resolve) => {
      marked = resolve;
    });
    const writing = createMutex(backend, {
      name: key,
      owner: "writer",
      ttl: 20_000,
      retryDelay: 50,
      onEvent: (event) => {
        if (event.type === "attempt" && event.outcome === "taken") marked();
      },
    }).acquire({ timeout: 15_000 });
    await refused;
    expect((await rowsOf(key)).length).toBe(1);
    expect((await listOf(key))[""]).toEqual([expect.any(Number), expect.any(String), "writer"]);
    await long.release();
    // The one left: the row now expires with it.
    expect(await expiry()).toBeLessThanOrEqual(5_000);
    expect(await backend.inspect({ key })).toMatchObject({ owner: "short", token: short.token, readers: 1 });
    await short.release();
    const w = await writing;
    expect(w.token).toBeGreaterThan(long.token);
    // Served: the name's row is the writer's, the mark gone with the list.
    expect(await rowsOf(key)).toEqual([
      { name: key, owner: "writer", nonce: expect.any(String), fence: String(w.token), live: true },
    ]);
    await w.release();
    const last = (await make("last", 1_000).tryAcquire(shared))!;
    await last.release();
    // What an exclusive lease leaves after its release: the name's row, released, with the fence.
    const exclusive = unique("rows-exclusive");
    const x = (await createMutex(backend, { name: exclusive, owner: "x" }).tryAcquire())!;
    await x.release();
    expect(await rowsOf(exclusive)).toEqual([
      { name: exclusive, owner: "x", nonce: "", fence: String(x.token), live: false },
    ]);
    expect(await rowsOf(key)).toEqual([
      { name: key, owner: "last", nonce: "", fence: String(last.token), live: false },
    ]);
  });

  it("a writer that gives up is unmarked by releaseShared with its waiter id; a lapsed mark goes with the next write", async () => {
    const { backend } = counted();
    const key = unique("unmark");
    const base = { key, ttl: 10_000 };
    const marks = async () => (await listOf(key))[""]?.[1];
    expect((await backend.acquireShared!({ ...base, owner: "r", nonce: "r" })).ok).toBe(true);
    expect((await backend.acquire({ ...base, owner: "w", nonce: "w", waiter: "gave-up" })).ok).toBe(false);
    expect(await marks()).toBe("gave-up");
    await backend.releaseShared!({ key, nonce: "someone else" });
    expect(await marks()).toBe("gave-up");
    await backend.releaseShared!({ key, nonce: "gave-up" });
    expect(Object.keys(await listOf(key))).toEqual(["r"]);
    // A crashed writer's mark lapses after its ttl, and goes with the next write of the row.
    expect(
      (await backend.acquire({ ...base, ttl: 1_000, owner: "w", nonce: "w", waiter: "crashed" })).ok,
    ).toBe(false);
    expect((await backend.acquireShared!({ ...base, owner: "r2", nonce: "r2" })).ok).toBe(false);
    await sleep(1_300);
    expect((await backend.acquireShared!({ ...base, owner: "r2", nonce: "r2" })).ok).toBe(true);
    expect(Object.keys(await listOf(key)).sort()).toEqual(["r", "r2"]);
    // The readers leave while a writer waits: the row is free for a writer, closed to readers.
    expect((await backend.acquire({ ...base, owner: "w", nonce: "w", waiter: "waits" })).ok).toBe(false);
    await backend.releaseShared!({ key, nonce: "r" });
    await backend.releaseShared!({ key, nonce: "r2" });
    expect((await rowsOf(key)).map((r) => [r.nonce, r.live])).toEqual([["*", false]]);
    expect(await backend.inspect({ key })).toBeNull();
    expect((await backend.acquireShared!({ ...base, owner: "r3", nonce: "r3" })).ok).toBe(false);
    // It gives up: the row is released as an exclusive release leaves it.
    await backend.releaseShared!({ key, nonce: "waits" });
    expect((await rowsOf(key)).map((r) => [r.owner, r.nonce, r.live])).toEqual([["w", "", false]]);
    expect((await backend.acquireShared!({ ...base, owner: "r3", nonce: "r3" })).ok).toBe(true);
    await backend.releaseShared!({ key, nonce: "r3" });
  });

  it("a waiting writer refused outright (a wrong password) sends nothing after it gives up: postgres.js's end() is not left waiting", async () => {
    const wrong = `wrong-${crypto.randomUUID()}`;
    registerSecret(wrong);
    const url = ctx.url.replace(ctx.password, wrong);
    const bad = postgresJs(url, { onnotice: () => {} });
    let statements = 0;
    const client = {
      unsafe: (text: string, params: string[]) => {
        statements++;
        return bad.unsafe(text, params);
      },
    };
    const error = await createMutex(postgres(client), { name: unique("wrong"), ttl: 1_000 })
      .acquire({ timeout: 10_000 })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "ERR_BACKEND_AUTH" });
    await sleep(200);
    // No background releaseShared of a mark no attempt could have written (§18).
    expect(statements).toBe(1);
    await bad.end({ timeout: 5 });
  });

  it("a role with only SELECT, INSERT and UPDATE on the table (what exclusive mode needs) holds shared leases and waits as a writer", async () => {
    const role = `lh_${crypto.randomUUID().slice(0, 8)}`;
    const password = `pw-${crypto.randomUUID()}`;
    registerSecret(password);
    await pool.query(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`);
    await pool.query(`GRANT SELECT, INSERT, UPDATE ON "${TABLE}" TO ${role}`);
    const url = new URL(ctx.url);
    url.username = role;
    url.password = password;
    const limited = new pg.Pool({ connectionString: url.toString(), max: 2 });
    try {
      const backend = postgres(limited, { table: TABLE });
      const key = unique("privileges");
      const base = { key, ttl: 10_000 };
      expect((await backend.acquireShared!({ ...base, owner: "a", nonce: "a" })).ok).toBe(true);
      expect(await backend.renewShared!({ ...base, nonce: "a" })).toBe(true);
      expect((await backend.acquire({ ...base, owner: "w", nonce: "w", waiter: "waits" })).ok).toBe(false);
      await backend.releaseShared!({ key, nonce: "waits" });
      expect((await backend.acquireShared!({ ...base, owner: "b", nonce: "b" })).ok).toBe(true);
      expect(await backend.inspect({ key })).toMatchObject({ readers: 2 });
      for (const nonce of ["a", "b"]) await backend.releaseShared!({ key, nonce });
      expect(await backend.acquire({ ...base, owner: "w", nonce: "w2", waiter: "waits" })).toMatchObject({
        ok: true,
      });
      await backend.release({ key, nonce: "w2" });
    } finally {
      await limited.end();
      await pool.query(`DROP OWNED BY ${role}; DROP ROLE ${role}`);
    }
  });

  it("refuses the nonce *, which would read a row held shared as its own", async () => {
    const { backend } = counted();
    await expect((async () => backend.renew({ key: "n", nonce: "*", ttl: 1_000 }))()).rejects.toThrow(
      /other than "\|" and "\*"/,
    );
    await expect(backend.acquireShared!({ key: "n", owner: "o", nonce: "*", ttl: 1_000 })).rejects.toThrow(
      TypeError,
    );
    await expect(
      backend.acquire({ key: "n", owner: "o", nonce: "n", ttl: 1_000, waiter: "*" }),
    ).rejects.toThrow(TypeError);
  });
});

describe("postgres: shared mode under READ COMMITTED, where statements meet on the name's row", () => {
  /**
   * Runs `first` inside a transaction of a connection of its own (its backend over that
   * connection), then `second` over the pool, which must wait for the row lock (seen in
   * pg_stat_activity), then commits; answers both results.
   */
  async function interleave<A, B>(
    first: (b: Backend) => Promise<A>,
    second: (b: Backend) => Promise<B>,
  ): Promise<[A, B]> {
    const client = await pool.connect();
    try {
      await client.query("BEGIN ISOLATION LEVEL READ COMMITTED");
      const a = await first(postgres(client, { table: TABLE }));
      const pid = (await client.query("SELECT pg_backend_pid() AS pid")).rows[0].pid as number;
      const b = second(counted().backend);
      // Wait until the second statement waits for the first transaction's row lock.
      for (let i = 0; ; i++) {
        const { rows } = await pool.query(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND $1 = ANY(pg_blocking_pids(pid))",
          [pid],
        );
        if (rows[0].n > 0) break;
        if (i > 200) throw new Error("the second statement never waited for the first's row lock");
        await sleep(20);
      }
      await client.query("COMMIT");
      return [a, await b];
    } catch (error) {
      await client.query("ROLLBACK").catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  }
  const base = (key: string, nonce: string, ttl = 10_000) => ({ key, owner: nonce, nonce, ttl });
  const readersOf = async (key: string) => Object.keys(await listOf(key)).sort();

  it("two readers inserting the name's row at once: both hold, with increasing tokens", async () => {
    const key = unique("two-readers");
    const [a, b] = await interleave(
      (t) => t.acquireShared!(base(key, "a")),
      (p) => p.acquireShared!(base(key, "b")),
    );
    expect(a).toEqual({ ok: true, token: 1 });
    expect(b).toEqual({ ok: true, token: 2 });
    expect(await readersOf(key)).toEqual(["a", "b"]);
  });

  it("a reader and a writer at once, either first: the second is refused", async () => {
    const key = unique("reader-first");
    const [r, w] = await interleave<AcquireResult, AcquireResult>(
      (t) => t.acquireShared!(base(key, "r")),
      (p) => p.acquire(base(key, "w")),
    );
    expect([r.ok, w.ok]).toEqual([true, false]);
    const other = unique("writer-first");
    const [w2, r2] = await interleave<AcquireResult, AcquireResult>(
      (t) => t.acquire(base(other, "w")),
      (p) => p.acquireShared!(base(other, "r")),
    );
    expect([w2.ok, r2.ok]).toEqual([true, false]);
  });

  it("a writer marked waiting while a new reader's acquire runs: the reader is refused, though its snapshot saw no mark", async () => {
    const key = unique("mark-reader");
    expect((await counted().backend.acquireShared!(base(key, "r"))).ok).toBe(true);
    const [w, r] = await interleave<AcquireResult, AcquireResult>(
      (t) => t.acquire({ ...base(key, "w"), waiter: "writer" }),
      (p) => p.acquireShared!(base(key, "late")),
    );
    expect([w.ok, r.ok]).toEqual([false, false]);
    expect(await readersOf(key)).toEqual(["", "r"]);
  });

  it("a reader renewing while a writer's attempt runs: the writer sees the renewed reader, though its snapshot saw it expired", async () => {
    const key = unique("renew-writer");
    expect((await counted().backend.acquireShared!(base(key, "r", 1_000))).ok).toBe(true);
    const [renewed, w] = await interleave<boolean, AcquireResult>(
      async (t) => {
        const ok = await t.renewShared!({ key, nonce: "r", ttl: 30_000 });
        await sleep(1_300); // the reader's first expiry passes while the renewal is uncommitted
        return ok;
      },
      (p) => p.acquire(base(key, "w")),
    );
    expect(renewed).toBe(true);
    expect(w.ok).toBe(false);
  });

  it("a reader renewing while another's release commits: the release is not undone", async () => {
    const key = unique("renew-release");
    const { backend } = counted();
    for (const n of ["a", "b"]) expect((await backend.acquireShared!(base(key, n))).ok).toBe(true);
    const [, renewed] = await interleave(
      (t) => t.releaseShared!({ key, nonce: "a" }),
      (p) => p.renewShared!({ key, nonce: "b", ttl: 20_000 }),
    );
    expect(renewed).toBe(true);
    expect(await readersOf(key)).toEqual(["b"]);
  });

  it("two readers releasing at once: the second frees the row, the lock is free at once", async () => {
    const key = unique("release-release");
    const { backend } = counted();
    for (const n of ["a", "b"]) expect((await backend.acquireShared!(base(key, n))).ok).toBe(true);
    await interleave(
      (t) => t.releaseShared!({ key, nonce: "a" }),
      (p) => p.releaseShared!({ key, nonce: "b" }),
    );
    expect((await rowsOf(key)).map((r) => [r.nonce, r.live])).toEqual([["", false]]);
    expect((await backend.acquire(base(key, "w"))).ok).toBe(true);
  });
});

describe("postgres: shared mode, a hammer of readers and writers", () => {
  it("many connections (pg and postgres.js): never a writer beside anyone; every token distinct and increasing per caller; nothing left behind", async () => {
    const backends = [postgres(pool, { table: TABLE }), postgres(sql, { table: TABLE })];
    const key = unique("hammer");
    let readers = 0;
    let writers = 0;
    const violations: string[] = [];
    const tokens: number[] = [];
    const counts = { shared: 0, exclusive: 0, crashed: 0 };
    // Inside the protected section: from the grant's answer to the release's request, within the
    // backend's hold of the lease; a writer must be alone there, readers only among readers.
    const section = async (lease: Lease, hold: number) => {
      if (lease.mode === "shared") readers++;
      else writers++;
      if (writers > 1 || (writers === 1 && readers > 0))
        violations.push(`${writers} writer(s) beside ${readers} reader(s) at token ${lease.token}`);
      for (let i = 0; i < 2; i++) {
        await sleep(hold);
        if (lease.mode === "shared") await lease.renew(); // a reader renewing while writers try
      }
      if (lease.mode === "shared") readers--;
      else writers--;
    };
    const worker = async (w: number) => {
      const mutex = (ttl: number) =>
        createMutex(backends[w % 2]!, { name: key, owner: `worker ${w}`, ttl, retryDelay: 20, renew: false });
      let last = 0;
      for (let i = 0; i < 12; i++) {
        const writer = (w + i) % 4 === 0;
        const crash = !writer && (w * 7 + i) % 11 === 0;
        // A crashed reader never releases: it holds until its short ttl lapses.
        const lease = await mutex(crash ? 400 : 10_000).acquire({
          ...(writer ? {} : shared),
          timeout: 60_000,
        });
        tokens.push(lease.token);
        if (lease.token <= last) violations.push(`worker ${w}: token ${lease.token} after ${last}`);
        last = lease.token;
        counts[crash ? "crashed" : lease.mode]++;
        if (crash) continue;
        await section(lease, writer ? 2 : 5);
        await lease.release();
      }
    };
    // The row, read while they run: held shared, it expires exactly with the latest reader it
    // lists (or, with none, holds a writer's mark); never a list beside an exclusive holder.
    let running = true;
    let samples = 0;
    const sampler = (async () => {
      while (running) {
        const { rows } = await pool.query(
          `SELECT nonce, owner, (extract(epoch FROM expires_at) * 1000000)::int8::text AS e FROM "${TABLE}" WHERE name = $1`,
          [key],
        );
        const row = rows[0] as { nonce: string; owner: string; e: string } | undefined;
        if (row?.nonce === "*") {
          samples++;
          const list = JSON.parse(row.owner) as Record<string, Entry>;
          const readers = Object.entries(list).filter(([k]) => k !== "");
          const last = Math.max(...readers.map(([, [until]]) => until));
          if (readers.length > 0 ? String(last) !== row.e : !("" in list))
            violations.push(`the row ${JSON.stringify(row)} does not expire with its last reader`);
        }
        await sleep(5);
      }
    })();
    await Promise.all(Array.from({ length: 16 }, (_, w) => worker(w)));
    running = false;
    await sampler;
    expect(samples).toBeGreaterThan(0);
    expect(violations).toEqual([]);
    expect(new Set(tokens).size).toBe(tokens.length);
    expect(counts.exclusive).toBe(48);
    expect(counts.shared + counts.crashed).toBe(144);
    expect(counts.crashed).toBeGreaterThan(0);
    // Every writer served: no mark left; the name's row released (or held by a crashed reader
    // still, which lapses); nothing else but the waiters' announcement (wake on release, §19),
    // which holds nothing and lapses 60 s after the last renewal.
    await sleep(500);
    const rows = (await rowsOf(key)).filter((r) => r.name !== `${key}\u001fwait`);
    expect(rows.map((r) => [r.name, r.live])).toEqual([[key, false]]);
    expect(await backends[0]!.inspect({ key })).toBeNull();
  }, 120_000);
});
