// Wake on release on PostgreSQL (docs/DESIGN.md §19), against the shared server: a waiter hears
// the release by LISTEN/NOTIFY and is handed the lock without a poll; a lost notification (its
// session killed with pg_terminate_backend) leaves it to its polls; the listening session is one
// per backend object and closes with the last watch; a release nobody waits for notifies nobody.
// Each test makes its own clients with an application_name of its own, to count their sessions.
import { spawnSync } from "node:child_process";
import pg from "pg";
import postgresJs from "postgres";
import { afterEach, describe, expect, it } from "vitest";
import { postgres } from "../../../src/backends/postgres/index.ts";
import { capabilities, createMutex, type LockEvent } from "../../../src/index.ts";
import { registerSecret } from "../../harness/secrets.ts";
import { ctx } from "./clients.ts";

const COLUMNS =
  "(name text PRIMARY KEY, owner text NOT NULL, nonce text NOT NULL, fence bigint NOT NULL, expires_at timestamptz NOT NULL)";

const TABLE = "leasehold_wake";
/**
 * The leases' ttl: a waiting writer polls at least every ttl / 2 (docs/DESIGN.md §18), so at
 * 120 s and retryDelay 60 s its pauses last 36 s or more: a waiter served within its 20 s
 * timeout was woken, not polled.
 */
const LONG = 120_000;
const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => {});
});

/** A fresh application_name, and pg clients that carry it. */
function app() {
  const name = `wake-${crypto.randomUUID().slice(0, 8)}`;
  const pool = (max = 5) => {
    const p = new pg.Pool({ connectionString: ctx.url, max, application_name: name });
    closers.push(() => p.end());
    return p;
  };
  return { name, pool };
}

const admin = (() => {
  let p: pg.Pool | undefined;
  return () => {
    if (!p) {
      const made = new pg.Pool({ connectionString: ctx.url, max: 2 });
      p = made;
      closers.push(async () => {
        p = undefined;
        await made.end();
      });
    }
    return p;
  };
})();

/** The pids of `app`'s sessions whose last statement was a LISTEN. */
async function listeners(app: string): Promise<number[]> {
  const { rows } = await admin().query(
    "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query ILIKE 'listen%'",
    [app],
  );
  return rows.map((r: { pid: number }) => r.pid);
}

/** Whether a waiter announced itself (its watch started) on each of `names`. */
async function announced(...names: string[]): Promise<boolean> {
  const { rows } = await admin().query(
    `SELECT count(*)::int AS n FROM "${TABLE}" WHERE name = ANY($1) AND expires_at > clock_timestamp()`,
    [names.map((n) => `${n}\u001fwait`)],
  );
  return rows[0].n === names.length;
}

/** Polls `test` every 20 ms until it holds, for at most `ms`. */
async function until(
  test: () => Promise<boolean> | boolean,
  ms = 10_000,
  what = "the condition",
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await test())) {
    if (Date.now() > end) throw new Error(`${what} did not hold within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The attempts a mutex's events show. */
function attempts() {
  const seen: Extract<LockEvent, { type: "attempt" }>[] = [];
  return {
    seen,
    onEvent: (e: LockEvent) => {
      if (e.type === "attempt") seen.push(e);
    },
  };
}

const SHAPES = {
  "pg Pool": (a: ReturnType<typeof app>) => a.pool(),
  "postgres.js": (a: ReturnType<typeof app>) => {
    const sql = postgresJs(ctx.url, { max: 5, onnotice: () => {}, connection: { application_name: a.name } });
    closers.push(() => sql.end({ timeout: 1 }));
    return sql;
  },
};

describe.each(Object.entries(SHAPES))("%s", (_, make) => {
  it("a waiter is handed the lock without a poll: its attempts are the refusal, the one at once after listening, and the woken one", async () => {
    const a = app();
    const backend = postgres(make(a), { table: TABLE, createTable: true });
    expect(capabilities(backend).watch).toBe(true);
    const name = `handed-${crypto.randomUUID()}`;
    const holder = await createMutex(backend, { name, ttl: LONG }).acquire();
    const { seen, onEvent } = attempts();
    const waiter = createMutex(backend, { name, ttl: LONG, retryDelay: 60_000, onEvent });
    const waiting = waiter.acquire({ timeout: 60_000 });
    // Refused, listening, refused again at once, then polling with pauses doubling from 25 ms:
    // after the 9th refusal the next pause is at least 0.6 × 25 ms × 2^8 = 3.8 s.
    await until(() => seen.length >= 9, 20_000, "nine attempts");
    await until(() => announced(name), 10_000, "its announcement");
    const n = seen.length;
    expect(seen.every((e) => e.outcome === "taken")).toBe(true);
    await holder.release();
    const lease = await waiting;
    expect(seen.slice(n).map((e) => e.outcome)).toEqual(["granted"]); // woken, not a poll
    expect(lease.token).toBeGreaterThan(holder.token);
    await lease.release();
  });

  it("a lost notification (the listening session killed before the release): the waiter still gets the lease by a poll", async () => {
    const a = app();
    const backend = postgres(make(a), { table: TABLE, createTable: true });
    const name = `lost-${crypto.randomUUID()}`;
    const holder = await createMutex(backend, { name, ttl: LONG }).acquire();
    const { seen, onEvent } = attempts();
    const waiting = createMutex(backend, { name, ttl: LONG, retryDelay: 300, onEvent }).acquire({
      timeout: 20_000,
    });
    await until(async () => (await listeners(a.name)).length === 1, 10_000, "a listening session");
    const [pid] = await listeners(a.name);
    await admin().query("SELECT pg_terminate_backend($1)", [pid]);
    await until(async () => !(await listeners(a.name)).includes(pid!), 10_000, "the session's end");
    await holder.release();
    const lease = await waiting;
    expect(lease.token).toBeGreaterThan(holder.token);
    expect(seen.at(-1)?.outcome).toBe("granted");
    await lease.release();
  });
});

describe("pg Pool", () => {
  it("one listening session for every watch of a backend object, ended when the last waiter leaves", async () => {
    const a = app();
    const backend = postgres(a.pool(), { table: TABLE, createTable: true });
    const names = [`one-${crypto.randomUUID()}`, `two-${crypto.randomUUID()}`];
    const holders = await Promise.all(
      names.map((name) => createMutex(backend, { name, ttl: LONG }).acquire()),
    );
    const stop = new AbortController();
    const waits = names.map((name) =>
      createMutex(backend, { name, ttl: LONG, retryDelay: 60_000 })
        .acquire({ signal: stop.signal, timeout: 20_000 })
        .catch((e: unknown) => e),
    );
    await until(async () => (await listeners(a.name)).length === 1, 10_000, "a listening session");
    // Both listen, announced, on the one session.
    await until(() => announced(...names), 10_000, "both announcements");
    expect(await listeners(a.name)).toHaveLength(1);
    // One waiter is served, the other gives up: no session is left listening.
    await holders[0]!.release();
    const lease = await waits[0];
    expect(lease).toMatchObject({ token: expect.any(Number) });
    expect(await listeners(a.name)).toHaveLength(1); // the other still waits
    stop.abort();
    expect(await waits[1]).toBeInstanceOf(Error);
    await until(async () => (await listeners(a.name)).length === 0, 10_000, "the listening session's end");
    await (lease as { release(): Promise<void> }).release();
    await holders[1]!.release();
  });

  it("the session is opened again after it dropped, and a later release wakes the waiter without a poll", async () => {
    const a = app();
    const backend = postgres(a.pool(), { table: TABLE, createTable: true });
    const name = `again-${crypto.randomUUID()}`;
    const holder = await createMutex(backend, { name, ttl: LONG }).acquire();
    const { seen, onEvent } = attempts();
    const waiting = createMutex(backend, { name, ttl: LONG, retryDelay: 60_000, onEvent }).acquire({
      timeout: 20_000,
    });
    await until(async () => (await listeners(a.name)).length === 1, 10_000, "a listening session");
    const [pid] = await listeners(a.name);
    await admin().query("SELECT pg_terminate_backend($1)", [pid]);
    await until(
      async () => {
        const now = await listeners(a.name);
        return now.length === 1 && now[0] !== pid;
      },
      15_000,
      "a new listening session",
    );
    // The new session woke the waiter once (a release may have gone by unheard): one more attempt.
    await until(() => seen.length >= 3, 10_000, "the attempt after the new session");
    await holder.release();
    await waiting;
    expect(seen.at(-1)?.outcome).toBe("granted");
    await (await waiting).release();
  });

  it("a release notifies only when a waiter announced itself", async () => {
    const a = app();
    const backend = postgres(a.pool(), { table: TABLE, createTable: true });
    const ear = new pg.Client({ connectionString: ctx.url });
    await ear.connect();
    closers.push(() => ear.end());
    const heard: string[] = [];
    ear.on("notification", (m) => heard.push(m.payload ?? ""));
    await ear.query("LISTEN leasehold");
    // Notifications arrive in commit order: the sentinel, sent after the release, comes first
    // unless the release notified.
    const sentinel = async (tag: string) => {
      await admin().query("SELECT pg_notify('leasehold', $1)", [tag]);
      await until(() => heard.includes(tag), 10_000, `the ${tag} notification`);
    };
    const name = `quiet-${crypto.randomUUID()}`;
    const alone = await createMutex(backend, { name }).acquire();
    await alone.release();
    await sentinel("first");
    expect(heard).toEqual(["first"]);

    const holder = await createMutex(backend, { name, ttl: LONG }).acquire();
    const waiting = createMutex(backend, { name, ttl: LONG, retryDelay: 60_000 }).acquire({
      timeout: 20_000,
    });
    await until(async () => (await listeners(a.name)).length === 1, 10_000, "a listening session");
    await holder.release();
    await (await waiting).release(); // its release notifies too: its own announcement still lives
    await sentinel("second");
    expect(heard.slice(0, 2)).toEqual(["first", `"${TABLE}"\u001f${name}`]);
  });

  it("a role with only the privileges docs/backends/postgres.md lists (SELECT, INSERT, UPDATE) listens, announces and notifies", async () => {
    const role = `lh_${crypto.randomUUID().replaceAll("-", "")}`;
    const password = crypto.randomUUID();
    registerSecret(password);
    await admin().query(`CREATE TABLE IF NOT EXISTS "${TABLE}" ${COLUMNS}`);
    await admin().query(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`);
    closers.push(() => admin().query(`DROP OWNED BY ${role}; DROP ROLE ${role}`));
    await admin().query(`GRANT SELECT, INSERT, UPDATE ON "${TABLE}" TO ${role}`);
    const url = new URL(ctx.url);
    url.username = role;
    url.password = password;
    const a = app();
    const pool = new pg.Pool({ connectionString: url.href, max: 5, application_name: a.name });
    closers.push(() => pool.end());
    const backend = postgres(pool, { table: TABLE });
    const name = `role-${crypto.randomUUID()}`;
    const holder = await createMutex(backend, { name, ttl: LONG }).acquire();
    const waiting = createMutex(backend, { name, ttl: LONG, retryDelay: 60_000 }).acquire({
      timeout: 20_000,
    });
    await until(() => announced(name), 10_000, "its announcement");
    await holder.release();
    await (await waiting).release();
  });

  it("the lapsed announcements on fires' keys are swept with the fires' rows (no row left per fire)", async () => {
    const backend = postgres(app().pool(), { table: TABLE, createTable: true });
    const name = `sweep-${crypto.randomUUID()}`;
    const hashed = `${name}:fire@${"AB".repeat(32)}`;
    const fire = async (key: string, retain: number) => {
      const nonce = crypto.randomUUID();
      expect((await backend.acquire({ key, owner: "o", nonce, ttl: 10_000 })).ok).toBe(true);
      expect(await backend.complete!({ key, nonce, retain })).toBe(true);
    };
    await fire(`${name}:fire:1`, 1);
    await fire(hashed, 1);
    // Announcements of standbys that waited on those fires, lapsed.
    await admin().query(
      `INSERT INTO "${TABLE}" SELECT k || chr(31) || 'wait', '', '', 0, clock_timestamp() FROM unnest($1::text[]) k`,
      [[`${name}:fire:1`, hashed]],
    );
    await new Promise((r) => setTimeout(r, 20));
    await fire(`${name}:fire:2`, 60_000);
    const { rows } = await admin().query(`SELECT name FROM "${TABLE}" WHERE left(name, length($1)) = $1`, [
      `${name}:fire`,
    ]);
    expect(rows.map((r: { name: string }) => r.name)).toEqual([`${name}:fire:2`]);
  });

  it("the listening session goes back to the pool, unlistened, when the last waiter leaves, so later waits open no connection", async () => {
    // A pool already at its max, which never closes an idle connection: it opens one only when
    // one of its own was closed. Closed sessions (the listening one, destroyed) would bring it
    // below what a hand-over uses at once within a few hand-overs.
    const a = app();
    const pool = new pg.Pool({
      connectionString: ctx.url,
      max: 5,
      application_name: a.name,
      idleTimeoutMillis: 0,
    });
    closers.push(() => pool.end());
    await Promise.all(Array.from({ length: 5 }, () => pool.query("SELECT pg_sleep(0.05)")));
    let opened = 0;
    pool.on("connect", () => opened++);
    const backend = postgres(pool, { table: TABLE, createTable: true });
    const name = `back-${crypto.randomUUID()}`;
    for (let i = 0; i < 6; i++) {
      const holder = await createMutex(backend, { name, ttl: LONG }).acquire();
      const waiting = createMutex(backend, { name, ttl: LONG, retryDelay: 60_000 }).acquire({
        timeout: 20_000,
      });
      await until(() => announced(name), 10_000, "the waiter's announcement");
      await holder.release();
      await (await waiting).release();
      await until(async () => (await listeners(a.name)).length === 0, 10_000, "the session unlistened");
    }
    expect(opened).toBe(0);
    expect(pool.totalCount).toBe(5);
  });

  it("a pool of one connection, and a lone Client: no watch (their waiters poll)", async () => {
    const a = app();
    expect(capabilities(postgres(a.pool(1))).watch).toBe(false);
    expect(capabilities(postgres(new pg.Client({ connectionString: ctx.url }))).watch).toBe(false);
    expect(capabilities(postgres({ query: async () => [] })).watch).toBe(false);
  });
});

it("Bun's SQL listens too: a waiter under Bun is handed the lock without a poll (test/harness/fixtures/bun-pg-wake.ts)", () => {
  const r = spawnSync("node_modules/.bin/bun", ["run", "test/harness/fixtures/bun-pg-wake.ts"], {
    encoding: "utf8",
    env: { ...process.env, POSTGRES_URL: ctx.url },
    timeout: 60_000,
  });
  const line = r.stdout.split("\n").find((l) => l.startsWith("{"));
  expect(line, r.stderr.slice(-2_000)).toBeDefined();
  expect(JSON.parse(line!)).toMatchObject({ ok: true });
  expect(r.status).toBe(0);
}, 70_000);
