/**
 * The PostgreSQL backend over the driver you already have: `pg` (`Pool` and `Client`),
 * postgres.js (`sql`), Bun's `SQL`, and any client with `query(text, params)` (Neon's serverless
 * driver and others), recognised by their methods; leasehold imports none of them.
 *
 * One table, one row per lock name: owner, nonce, fence and `expires_at`. Every operation is one
 * statement that judges the expiry by the database's own clock (`clock_timestamp()`) in that
 * statement, as Redis' PX does: no clock of the clients' is compared with another's. Rows are
 * never deleted (a release only ends the lease), so the fence of a name strictly increases
 * across holders for as long as the table lives. A fire of runOnce (`n:fire:<id>`) is the
 * exception: it draws its token from the counter row of its mutex name (`n` and a U+001F
 * `fence` suffix, which no lock name has), so its own row holds no counter and is deleted once it
 * expired (docs/DESIGN.md §17). Not advisory locks: those belong to a session
 * and break on pooled and HTTP drivers. Shared mode (readers and writers, docs/DESIGN.md §18) uses
 * the same row: held shared, it lists the live readers and the writer marked waiting.
 *
 * A waiting acquire listens for the release (`LISTEN`/`NOTIFY` on one session per backend object;
 * docs/DESIGN.md §19) over a pg Pool, postgres.js or Bun's SQL; a release notifies only while a
 * waiter announced itself on the name.
 *
 * The table: create it with the migration SQL in docs/backends/postgres.md, or pass
 * `createTable: true` to run `CREATE TABLE IF NOT EXISTS` before the first operation.
 *
 * @example With pg
 * ```ts
 * import { createMutex } from "leasehold";
 * import { postgres } from "leasehold/postgres";
 * import pg from "pg";
 *
 * const pool = new pg.Pool({ connectionString: "postgres://app@localhost/app" });
 * await using lease = await createMutex(postgres(pool), { name: "nightly-report" }).acquire();
 * ```
 *
 * @module
 */
import type { AcquireResult, Backend, HolderInfo, ReleaseRequest, RenewRequest } from "../../backend.ts";
import { BackendError } from "../../errors.ts";
import { check, fail } from "../../options.ts";
import { RACED } from "../../signals.ts";
import { counterOf } from "../../slots.ts";
import { timer } from "../../time.ts";
import { abortableCall, malformed as malformedReply, permissionFix } from "../shared/errors.ts";
import { cleaner, secretsIn } from "../shared/redact.ts";
import { wakes } from "../shared/wakes.ts";

/** Any function: the drivers' own signatures are many and overloaded. */
export type Method = (...args: never) => unknown;

/**
 * The clients {@link postgres} accepts, by the method it uses:
 * - postgres.js `sql` and Bun's `SQL`: `unsafe(text, params)`, resolving the rows;
 * - `pg` `Pool` or `Client`, and any other client: `query(text, params)`, resolving `{ rows }` or
 *   the rows themselves.
 */
export type PostgresClientLike = { unsafe: Method } | { query: Method };

/** Options of {@link postgres}. */
export interface PostgresOptions {
  /** The lock table's name: letters, digits and `_`, not starting with a digit. Default `"leasehold_locks"`. */
  table?: string;
  /** The table's schema (same characters). Default: none, the connection's `search_path` decides. */
  schema?: string;
  /**
   * Run `CREATE TABLE IF NOT EXISTS` (the migration in docs/backends/postgres.md) before the
   * first operation. Default `false`: create the table with your migrations, and the role needs
   * no DDL right.
   */
  createTable?: boolean;
}

const NAME = "postgres";

const SHAPES = "a pg Pool or Client, a postgres.js sql, Bun's SQL, or any client with query(text, params)";

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** The table's columns; the migration in docs/backends/postgres.md is this statement. */
const columns =
  "(name text PRIMARY KEY, owner text NOT NULL, nonce text NOT NULL, fence bigint NOT NULL, expires_at timestamptz NOT NULL)";

/** ms from now until `expires_at`, by the database's clock, as text. */
const LEFT = "ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::int8::text";
const UNTIL = "clock_timestamp() + $4::float8 * interval '1 millisecond'";
/**
 * The nonce of a completed fire's record (`complete`, for runOnce; docs/DESIGN.md §17): the row
 * keeps the runner's owner and fence, with `expires_at` at the end of `retain`. No caller's nonce
 * can be it (`nonceArg` refuses it, as it refuses the released row's `''`), so renew, release and
 * raise never match the record.
 */
const DONE = "|";

/**
 * Appended to a mutex name for the name of its counter row: the counter its fires draw their
 * tokens from, and its plain leases too (above the name's own row's fence). A lock name has no
 * control character, so no lock's row can have this name.
 */
const COUNTER = "\u001ffence";

/** The channel every release a waiter announced itself for is notified on (docs/DESIGN.md §19). */
const CHANNEL = "leasehold";

/**
 * Appended to a key (as SQL) for the name of the row by which its waiters announce themselves
 * (§19): live while one listens, so that its releases notify. No lock's row can have this name.
 */
const WAITING = "chr(31) || 'wait'";

/** How long an announcement lasts, in ms; the watches renew theirs every third of it. */
const ANNOUNCED = 60_000;

/** A fire key's suffix after `<name>:fire` (src/slots.ts counterOf), for the sweep of expired fire rows. */
const FIRE_TAIL = "^(:.+|@[0-9A-F]{64})$";

/**
 * Shared mode (docs/DESIGN.md §18): the nonce of a name's row held shared. Its `owner` is then a
 * JSON object: the readers, `"<nonce>": [expiry, token, owner]`, and the writer marked waiting, if
 * any, `"": [expiry, waiter id, owner]` (no nonce is empty); expiries in µs since the epoch by the
 * database's clock. `fence` is the name's counter; `expires_at` the last reader's expiry, or the
 * time the last reader left while a writer's mark lasts. No caller's nonce can be `*`
 * (`nonceArg`), so the exclusive statements count the row as taken until `expires_at` and never
 * as theirs.
 */
const SHARED = "*";

/** The database's clock now, in µs since the epoch (an int8: exact in any driver's text). */
const NOW_US = "(extract(epoch FROM clock_timestamp()) * 1000000)::int8";

/**
 * The new `(owner, nonce, expires_at` and `cols)` of a name's row after a shared operation, from
 * a sub-select that reads the row `l` (its newest version, under its row lock: docs/DESIGN.md §18).
 * `c` reads the clock once: `now` and `until` (now + `ttl` ms); `old` is the row's list ({} unless
 * it holds shared); `r.live` the readers still live and `r.waiting` the writer's mark if live
 * (`{"": …}`, else {}). `list` (a jsonb of `r`) is the readers after, `mark` the mark after.
 * Neither left: the row is released as an exclusive release leaves it (nonce '', `expires_at`
 * now, owner `gone`, an expression of `s`). Else both, `*`, and the latest reader's expiry (now
 * when only the mark is left: free for a writer, closed to readers).
 */
function sharedRow({
  list,
  mark = "r.waiting",
  ttl = "0",
  gone = "''",
  extra = "",
  cols = "",
}: Record<string, string>): string {
  const old = `CASE WHEN l.nonce = '${SHARED}' THEN l.owner::jsonb ELSE '{}'::jsonb END`;
  const live =
    "coalesce((SELECT jsonb_object_agg(key, value) FROM jsonb_each(c.old) WHERE key <> '' AND (value ->> 0)::int8 > c.now), '{}'::jsonb)";
  const waiting =
    "CASE WHEN (c.old -> '' ->> 0)::int8 > c.now THEN jsonb_build_object('', c.old -> '') ELSE '{}'::jsonb END";
  const last =
    "'epoch'::timestamptz + (SELECT max((value ->> 0)::int8) FROM jsonb_each(s.list)) * interval '1 microsecond'";
  return (
    `(SELECT CASE WHEN s.j = '{}' THEN ${gone} ELSE s.j::text END, CASE WHEN s.j = '{}' THEN '' ELSE '${SHARED}' END, ` +
    `CASE WHEN s.list = '{}' THEN clock_timestamp() ELSE ${last} END${cols} ` +
    `FROM (SELECT q.*, q.list || q.mark AS j FROM (SELECT ${list} AS list, ${mark} AS mark, r.* FROM ` +
    `(SELECT c.*, ${live} AS live, ${waiting} AS waiting FROM ` +
    `(SELECT z.now, z.now + ${ttl}::int8 * 1000 AS until, ${old} AS old${extra} FROM (SELECT ${NOW_US} AS now) z) c) r) q) s)`
  );
}

/**
 * The statements, for table `t` (quoted). Every number comes back as text: drivers differ on
 * bigint (a string, a BigInt or a number) and text reads the same in all of them.
 */
function statements(t: string) {
  /**
   * Wake on release (docs/DESIGN.md §19): a column that notifies the channel with the payload
   * `<t> U+001F <name $1>` (just `<t>` if that would pass NOTIFY's 8000 bytes: every waiter of the
   * table wakes) when a waiter announced itself on $1 (its row `$1 U+001F wait` is live), and
   * only then: NOTIFY takes a lock at commit that serialises every notifying commit of the
   * database, which a release nobody waits for does not pay. Sent at commit, never on a rollback.
   */
  const payload = `'${t}' || chr(31) || $1`;
  const notify =
    `, CASE WHEN EXISTS (SELECT 1 FROM ${t} w WHERE w.name = $1 || ${WAITING} AND w.expires_at > clock_timestamp()) ` +
    `THEN pg_notify('${CHANNEL}', CASE WHEN octet_length(${payload}) < 8000 THEN ${payload} ELSE '${t}' END)::text END AS w`;
  /**
   * What an acquire answers after the insert `taken`: its fence when granted; else the name's row
   * (`where`: which rows count) as 'taken' with the holder's ms left, or 'done' with a completed
   * fire's fence and owner; no row at all when none counts. `marked`: `taken` may also be the row
   * held shared that marked a waiting writer (its nonce is not $3): 'taken', the ms left.
   */
  const answer = (where = "", marked = false) =>
    `SELECT 'ok' AS k, fence::text AS n, NULL::text AS o FROM taken${marked ? " WHERE nonce = $3" : ""} UNION ALL ` +
    (marked ? `SELECT 'taken', ${LEFT}, NULL FROM taken WHERE nonce <> $3 UNION ALL ` : "") +
    `SELECT CASE WHEN nonce = '${DONE}' THEN 'done' ELSE 'taken' END, CASE WHEN nonce = '${DONE}' THEN fence::text ELSE ${LEFT} END, ` +
    `CASE WHEN nonce = '${DONE}' THEN owner END FROM ${t} WHERE name = $1${where} AND NOT EXISTS (SELECT 1 FROM taken)`;
  /** An exclusive grant's fence: the same when ours and live (a retried acquire), else a fresh one. */
  const fence =
    "CASE WHEN l.nonce = excluded.nonce AND l.expires_at > clock_timestamp() THEN l.fence ELSE greatest(l.fence + 1, excluded.fence) END";
  /** The acquire statement whose row to insert (name, owner, nonce, fence, expires_at) is `row`. */
  const take = (row: string) =>
    `WITH taken AS (INSERT INTO ${t} AS l (name, owner, nonce, fence, expires_at) ${row} ` +
    `ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, nonce = excluded.nonce, expires_at = excluded.expires_at, fence = ${fence} ` +
    `WHERE l.expires_at <= clock_timestamp() OR l.nonce = excluded.nonce RETURNING fence) ${answer()}`;
  /**
   * A fire's key ($6 its mutex name, $5 that name's counter row): unless `held` (the fire's row is
   * held by another), the counter row (locked by its upsert, so fires of one name never share a
   * token) moves above itself, the name's row and the fire's row; `c` answers that fence.
   */
  const counter = (held: string) =>
    `WITH c AS (INSERT INTO ${t} AS c (name, owner, nonce, fence, expires_at) SELECT $5, '', '', ` +
    `greatest(coalesce((SELECT fence FROM ${t} WHERE name = $6), 0), coalesce((SELECT fence FROM ${t} WHERE name = $1), 0)) + 1, '-infinity' ` +
    `WHERE NOT EXISTS (SELECT 1 FROM ${t} WHERE name = $1 AND ${held} AND expires_at > clock_timestamp()) ` +
    "ON CONFLICT (name) DO UPDATE SET fence = greatest(c.fence + 1, excluded.fence) RETURNING fence), ";
  const acquireRow = `VALUES ($1, $2, $3, coalesce((SELECT fence FROM ${t} WHERE name = $5), 0) + 1, ${UNTIL})`;
  /**
   * Shared mode (§18): a reader takes the name's row ($1; $2 owner, $3 nonce, $4 ttl) when it is
   * held shared or not live, and no writer's mark in it is live; `token`: a sub-select answering
   * `f`, the next token when the row is new. The row's readers become those still live and this
   * one (its expiry, token and owner), with a fresh token above the row's fence; the row expires
   * with the last of them. Refused: 'taken' with the exclusive holder's ms left, 'done', or no row.
   */
  const takeShared = (token: string) =>
    `INSERT INTO ${t} AS l (name, owner, nonce, fence, expires_at) SELECT $1, ` +
    `jsonb_build_object($3::text, jsonb_build_array(x.until, x.f, $2::text))::text, '${SHARED}', x.f, ` +
    "'epoch'::timestamptz + x.until * interval '1 microsecond' " +
    `FROM (SELECT f, ${NOW_US} + $4::int8 * 1000 AS until FROM ${token} y) x ` +
    "ON CONFLICT (name) DO UPDATE SET (owner, nonce, expires_at, fence) = " +
    sharedRow({
      list: "r.live || jsonb_build_object($3::text, jsonb_build_array(r.until, r.tok, $2::text))",
      ttl: "$4",
      extra: ", greatest(l.fence + 1, excluded.fence) AS tok",
      cols: ", s.tok",
    }) +
    ` WHERE (l.nonce = '${SHARED}' OR l.expires_at <= clock_timestamp()) AND NOT coalesce(CASE WHEN l.nonce = '${SHARED}' ` +
    `THEN (l.owner::jsonb -> '' ->> 0)::int8 > ${NOW_US} END, false) RETURNING fence) ` +
    answer(` AND nonce <> '${SHARED}' AND expires_at > clock_timestamp()`);
  /** The shared row of $1 whose list meets `test` (the row's owner read as JSON only then). */
  const readerOf = (test: string) =>
    `name = $1 AND nonce = '${SHARED}' AND CASE WHEN nonce = '${SHARED}' THEN ${test} END`;
  return {
    create: `CREATE TABLE IF NOT EXISTS ${t} ${columns}`,
    // Free, expired or already ours: take it (a fresh fence, above the name's row and its counter
    // row $5 if any, or the same one when ours and live: a retried acquire). Taken: no row from the
    // insert, and the holder's ms left; held by a completed fire's record (complete): 'done', the
    // runner's fence and owner.
    acquire: take(acquireRow),
    // A fire's key, with its token from its mutex name's counter row (`counter`).
    acquireFire:
      counter("nonce <> $3") + take(`SELECT $1, $2, $3, fence, ${UNTIL} FROM c`).slice("WITH ".length),
    // Shared mode (§18): acquire by a waiting writer ($6 its waiter id). Granted as acquire; refused
    // by readers (the row held shared and live), the row marks it waiting in the same write: the
    // mark `""` holds the waiter until its ttl from now (or the mark's own end, if later). Refused
    // by an exclusive holder or a record, nothing is written.
    acquireWaiting:
      `WITH taken AS (INSERT INTO ${t} AS l (name, owner, nonce, fence, expires_at) ${acquireRow} ` +
      "ON CONFLICT (name) DO UPDATE SET (owner, nonce, expires_at, fence) = (SELECT CASE WHEN z.g THEN excluded.owner ELSE m.o END, " +
      `CASE WHEN z.g THEN excluded.nonce ELSE m.n END, CASE WHEN z.g THEN excluded.expires_at ELSE m.e END, CASE WHEN z.g THEN ${fence} ELSE l.fence END ` +
      "FROM (SELECT l.expires_at <= clock_timestamp() OR l.nonce = excluded.nonce AS g) z, " +
      sharedRow({
        list: "r.live",
        mark: "jsonb_build_object('', jsonb_build_array(greatest(r.until, (r.waiting -> '' ->> 0)::int8), $6::text, $2::text))",
        ttl: "$4",
      }) +
      ` m(o, n, e)) WHERE l.expires_at <= clock_timestamp() OR l.nonce = excluded.nonce OR l.nonce = '${SHARED}' ` +
      `RETURNING fence, nonce, expires_at) ${answer("", true)}`,
    // Shared mode (§18; $5 the counter row; a fire's key: $6 its mutex name, and its token drawn as
    // acquireFire's unless an exclusive lease holds the key).
    acquireShared: `WITH taken AS (${takeShared(`(SELECT coalesce((SELECT fence FROM ${t} WHERE name = $5), 0) + 1 AS f)`)}`,
    acquireSharedFire: `${counter(`nonce <> '${SHARED}'`)}taken AS (${takeShared("(SELECT fence AS f FROM c)")}`,
    // A live reader $2 lasts $3 ms from now; the row expires with the last reader.
    renewShared:
      `UPDATE ${t} AS l SET (owner, nonce, expires_at) = ` +
      sharedRow({
        list: "r.live || jsonb_build_object($2::text, jsonb_build_array(r.until, r.old -> $2::text -> 1, r.old -> $2::text -> 2))",
        ttl: "$3",
      }) +
      ` WHERE ${readerOf(`(owner::jsonb -> $2::text ->> 0)::int8 > ${NOW_US}`)} RETURNING fence::text AS n`,
    // The reader $2 goes, or the mark if it is the waiter $2's (a writer that gave up), and so do
    // the readers and mark that lapsed; the row expires with the last reader left, or is released
    // with neither.
    releaseShared:
      `UPDATE ${t} AS l SET (owner, nonce, expires_at) = ` +
      sharedRow({
        list: "r.live - $2::text",
        mark: "CASE WHEN r.waiting -> '' ->> 1 = $2::text THEN '{}'::jsonb ELSE r.waiting END",
        gone: "coalesce(s.old -> $2::text ->> 2, s.old -> '' ->> 2, '')",
      }) +
      ` WHERE ${readerOf("(owner::jsonb -> $2::text) IS NOT NULL OR owner::jsonb -> '' ->> 1 = $2::text")} RETURNING fence::text AS n${notify}`,
    renew: `UPDATE ${t} SET expires_at = ${UNTIL.replace("$4", "$3")} WHERE name = $1 AND nonce = $2 AND expires_at > clock_timestamp() RETURNING fence::text AS n`,
    release: `UPDATE ${t} SET nonce = '', expires_at = clock_timestamp() WHERE name = $1 AND nonce = $2 RETURNING fence::text AS n${notify}`,
    // The row's fence is both the lease's token and the name's counter: raising it raises both;
    // the counter row $4 (a fire's mutex name's, or the name's own), if any, is raised with it.
    raise:
      `WITH r AS (UPDATE ${t} SET fence = greatest(fence, $3::int8) WHERE name = $1 AND nonce = $2 AND expires_at > clock_timestamp() RETURNING fence), ` +
      `c AS (UPDATE ${t} SET fence = greatest(fence, $3::int8) WHERE name = $4 AND EXISTS (SELECT 1 FROM r)) ` +
      "SELECT fence::text AS n FROM r",
    // A record (nonce DONE) reads as its runner's owner and fence, `d` 'true'. A row held shared
    // reads as its newest live reader (the greatest token), with `r` how many are live.
    inspect:
      `SELECT owner, fence::text AS n, ${LEFT} AS ttl, (nonce = '${DONE}')::text AS d, NULL::text AS r FROM ${t} ` +
      `WHERE name = $1 AND nonce <> '${SHARED}' AND expires_at > clock_timestamp() UNION ALL ` +
      "(SELECT value ->> 2, value ->> 1, ceil(((value ->> 0)::int8 - now) / 1000.0)::int8::text, 'false', (count(*) OVER ())::text " +
      `FROM (SELECT CASE WHEN nonce = '${SHARED}' THEN owner::jsonb END AS j, ${NOW_US} AS now FROM ${t} WHERE name = $1 AND nonce = '${SHARED}') s, jsonb_each(s.j) ` +
      "WHERE key <> '' AND (value ->> 0)::int8 > now ORDER BY (value ->> 1)::int8 DESC LIMIT 1)",
    // The holder's live lease becomes the record of its completed fire, for retain ms ($3); up to
    // 64 expired rows of fires of the same mutex name ($4: the name and ":fire"; not slot keys,
    // which keep their own counter, nor counter rows) are deleted: they hold no counter
    // (acquireFire); so are the lapsed announcements of their waiters (§19), `b` the key of each.
    complete:
      `WITH swept AS (DELETE FROM ${t} WHERE name IN (SELECT name FROM (SELECT name, expires_at, ` +
      `regexp_replace(name, ${WAITING} || '$', '') AS b FROM ${t} WHERE left(name, length($4)) = $4) x ` +
      `WHERE substr(b, length($4) + 1) ~ '${FIRE_TAIL}' AND b !~ ':permit:[0-9]+$' AND strpos(b, chr(31)) = 0 AND b <> $1 ` +
      "AND expires_at <= clock_timestamp() LIMIT 64)) " +
      `UPDATE ${t} SET nonce = '${DONE}', expires_at = ${UNTIL.replace("$4", "$3")} WHERE name = $1 AND nonce = $2 AND expires_at > clock_timestamp() RETURNING fence::text AS n${notify}`,
    // A waiter announces itself (§19): the rows `<key> U+001F wait` of the keys in the JSON array
    // $1 live $2 ms from now (or longer, if they already do), in the keys' order (no deadlock
    // between two announcers). They hold no lease and no counter; they stay, like counter rows,
    // but for a fire's key's (complete sweeps them).
    announce:
      `INSERT INTO ${t} AS l (name, owner, nonce, fence, expires_at) SELECT k || ${WAITING}, '', '', 0, ` +
      `clock_timestamp() + $2::float8 * interval '1 millisecond' FROM (SELECT jsonb_array_elements_text($1::text::jsonb) AS k ORDER BY 1) s ` +
      "ON CONFLICT (name) DO UPDATE SET expires_at = greatest(l.expires_at, excluded.expires_at)",
  };
}

type Rows = Record<string, unknown>[];
type Query = (text: string, params: string[]) => Promise<Rows>;

function shapeOf(client: unknown): Query | null {
  if ((typeof client !== "object" && typeof client !== "function") || client === null) return null;
  const c = client as Record<string, unknown>;
  type Call = (text: string, params: string[]) => Promise<unknown>;
  const rowsOf = (r: unknown): Rows => {
    const rows = Array.isArray(r) ? r : (r as { rows?: unknown } | null)?.rows;
    if (!Array.isArray(rows))
      throw new BackendError("the driver answered without rows", { backend: NAME, retryable: true });
    return rows as Rows;
  };
  for (const method of ["unsafe", "query"]) {
    if (typeof c[method] === "function") {
      const call = (c[method] as Call).bind(client);
      return async (text, params) => rowsOf(await call(text, params));
    }
  }
  return null;
}

/** A session listening on {@link CHANNEL}; `stop` ends it (idempotent). */
interface Listening {
  stop(): void;
}

/** The part of a pg Pool's client that listening uses. */
interface PoolSession {
  query(text: string): Promise<unknown>;
  on(event: string, fn: (message: { channel?: string; payload?: string }) => void): unknown;
  /** Absent (not an EventEmitter): the session is closed rather than given back with our handlers. */
  off?(event: string, fn: (message: { channel?: string; payload?: string }) => void): unknown;
  release(destroy: boolean): void;
}

/**
 * How `client` can listen (docs/DESIGN.md §19), or undefined when it cannot. `listen(channel,
 * fn, onlisten)`: postgres.js and Bun's SQL, on a connection of their own they keep, reconnect
 * and listen again on (`again` is called then: a release may have gone by unheard). A pg Pool:
 * a session of its own from `connect()`, held while listening, then given back to the pool once
 * `UNLISTEN` has undone its LISTEN (closed instead if that fails); `lost` is called when it drops. A pool of at most one connection
 * would be taken whole, a lone pg Client is the user's one session (which leasehold does not
 * change, and cannot portably open a second one like), a bare `query` has no session: none
 * listens, and their waiters poll.
 */
function listenerOf(
  client: object,
):
  | ((notice: (payload: string) => void, again: () => void, lost: () => void) => Promise<Listening>)
  | undefined {
  const c = client as Record<string, unknown>;
  if (typeof c.listen === "function") {
    type Listen = (
      channel: string,
      fn: (payload: string) => void,
      onlisten: () => void,
    ) => Promise<{ unlisten(): Promise<unknown> }>;
    const listen = (c.listen as Listen).bind(client);
    return async (notice, again) => {
      let first = true;
      // postgres.js 3.4 listens again after a reconnect under a new registration, which the
      // first's unlisten does not remove: once stopped, this one's callbacks do nothing.
      let stopped = false;
      const sub = await listen(
        CHANNEL,
        (payload) => stopped || notice(String(payload ?? "")),
        () => {
          if (!first && !stopped) again();
          first = false;
        },
      );
      return {
        stop: () => {
          if (!stopped) Promise.resolve(sub.unlisten()).catch(() => {});
          stopped = true;
        },
      };
    };
  }
  const max = (c.options as { max?: unknown } | undefined)?.max;
  if (
    typeof c.connect !== "function" ||
    typeof c.totalCount !== "number" ||
    (typeof max === "number" && max < 2)
  )
    return undefined;
  const connect = (c.connect as () => Promise<PoolSession>).bind(client);
  return async (notice, _again, lost) => {
    const session = await connect();
    let stopping = false;
    let ended = false;
    // Given back to the pool once its LISTEN is undone (`keep`), so the pool keeps a connection it
    // would otherwise open again for the next statement (a TCP and SCRAM handshake: the hand-over
    // after each wait took 11–22 ms instead of 3–5 on loopback here, issue 29); closed when it
    // failed. Its handlers go first: the pool's client carries nothing of leasehold's.
    const end = (keep: boolean) => {
      if (ended) return;
      ended = true;
      const clean = typeof session.off === "function";
      if (clean) for (const [event, fn] of handlers) session.off!(event, fn);
      try {
        session.release(!(keep && clean));
      } catch {
        // Already given back: nothing to close.
      }
    };
    // Every error of this session is handled here (an unhandled one would end the process).
    const dropped = () => {
      if (ended) return;
      end(false);
      if (!stopping) lost();
    };
    const heard = (m: { channel?: string; payload?: string }) => {
      if (m.channel === CHANNEL) notice(m.payload ?? "");
    };
    const handlers = [
      ["error", dropped],
      ["end", dropped],
      ["notification", heard],
    ] as const;
    for (const [event, fn] of handlers) session.on(event, fn);
    try {
      await session.query(`LISTEN ${CHANNEL}`);
    } catch (error) {
      end(false);
      throw error;
    }
    return {
      stop: () => {
        if (stopping || ended) return;
        stopping = true;
        session.query(`UNLISTEN ${CHANNEL}`).then(
          () => end(true),
          () => end(false),
        );
      },
    };
  };
}

/** The passwords and connection strings a driver's options hold, to keep them out of messages. */
function secretsOf(client: object): string[] {
  const c = client as Record<string, Record<string, unknown> | undefined>;
  return secretsIn(
    [
      c.options?.password,
      c.options?.pass,
      c.connectionParameters?.password,
      (client as { password?: unknown }).password,
    ],
    [c.options?.connectionString, c.options?.url],
  );
}

/** The SQLSTATE of a driver's error: `code` (pg, postgres.js) or `errno` (Bun). */
function sqlState(error: unknown): string | undefined {
  const e = error as { code?: unknown; errno?: unknown } | null;
  return [e?.code, e?.errno].find((s): s is string => typeof s === "string" && /^[0-9A-Z]{5}$/.test(s));
}

// SQLSTATE classes worth another try: connection exceptions, an admin or crash shutdown, a
// server starting up, insufficient resources, serialization failures and deadlocks, lock waits.
const TRANSIENT = /^(08|53|57P0[1-4]|40001|40P01|55P03|58)/;

/**
 * Creates a PostgreSQL backend for {@link createMutex} over a driver you already have.
 *
 * @param client A pool or client of one of the {@link PostgresClientLike} shapes. A pool is best:
 *   leasehold runs single statements, outside any transaction of yours. It never connects, ends
 *   or configures the client.
 * @param options The `table` and `schema`, and whether to `createTable`.
 * @returns A backend named `"postgres"` with no ttl bounds of its own; with `watch` (a waiter
 *   woken by LISTEN/NOTIFY, docs/DESIGN.md §19) over a pg Pool of 2 connections or more,
 *   postgres.js or Bun's SQL.
 * @throws {TypeError} When the client has none of the accepted shapes, or `table` or `schema` is
 *   not a plain identifier.
 *
 * @example postgres.js, with the table created on first use
 * ```ts
 * import { createMutex } from "leasehold";
 * import { postgres } from "leasehold/postgres";
 * import postgresJs from "postgres";
 *
 * const sql = postgresJs("postgres://app@localhost/app");
 * const mutex = createMutex(postgres(sql, { schema: "app", createTable: true }), { name: "nightly-report" });
 * ```
 */
export function postgres(client: PostgresClientLike, options: PostgresOptions = {}): Backend {
  const got =
    client === null ? "null" : typeof client === "object" ? "an object without those methods" : typeof client;
  const query: Query = shapeOf(client) ?? fail(`[${NAME}]`, `client must be ${SHAPES}; got ${got}`);
  const { table = "leasehold_locks", schema, createTable = false } = options ?? {};
  for (const [option, value] of [
    ["table", table],
    ["schema", schema],
  ] as const) {
    check(
      value === undefined || (typeof value === "string" && IDENTIFIER.test(value)),
      `[${NAME}]`,
      `option ${option} must be 1 to 63 letters, digits or _, not starting with a digit`,
    );
  }
  check(typeof createTable === "boolean", `[${NAME}]`, "option createTable must be a boolean");
  const qualified = (schema === undefined ? "" : `"${schema}".`) + `"${table}"`;
  const sql = statements(qualified);
  const { clean, cause } = cleaner(secretsOf(client));

  /** The BackendError for whatever the driver threw. */
  function driverError(error: unknown): BackendError {
    const state = sqlState(error);
    const message = clean(error instanceof Error ? error.message : String(error)) || "the driver failed";
    const detail = state ? `${message} (SQLSTATE ${state})` : message;
    const auth = state !== undefined && (state.startsWith("28") || state === "42501");
    if (state === "42P01") {
      return new BackendError(
        `the lock table ${qualified} does not exist (${message}): create it with the migration SQL in ` +
          "leasehold's docs/backends/postgres.md, or pass createTable: true",
        { backend: NAME, retryable: false, cause: cause(error) },
      );
    }
    // A permission the runtime refused (Deno without --allow-net): no retry can grant it.
    const fix = permissionFix(error);
    return new BackendError(fix ? `${detail}: ${fix}` : detail, {
      backend: NAME,
      // No SQLSTATE: the connection failed, closed or timed out, which may work again.
      retryable: !fix && (state === undefined || TRANSIENT.test(state)),
      auth,
      cause: cause(error),
    });
  }

  // With createTable, the first operation creates the table; a failure is tried again next time.
  // Instances started together race: PostgreSQL's CREATE TABLE IF NOT EXISTS is not safe against
  // a concurrent one: the loser gets a unique violation on the catalog (23505, raised only once
  // the winner committed), 42P07 (the table) or 42710 (its row type exists): the table is there.
  let created: Promise<unknown> | undefined;
  async function run(text: string, params: string[]): Promise<Rows> {
    if (createTable) {
      created ??= query(sql.create, []).catch((error) => {
        const state = sqlState(error);
        if (state === "23505" || state === "42P07" || state === "42710") return;
        created = undefined;
        throw error;
      });
      await created;
    }
    return query(text, params);
  }

  async function call(text: string, params: string[], signal?: AbortSignal): Promise<Rows> {
    return abortableCall(run(text, params), signal, driverError);
  }

  // Wake on release (docs/DESIGN.md §19): one session listens for every watch of this backend
  // object, opened with the first and closed with the last; a pg session that drops is opened
  // again while watches last (after 1 s, doubling to 30 s), and wakes every waiter once it is.
  const listener = listenerOf(client);
  const waiting = wakes();
  const prefix = `${qualified}\u001f`;
  const notice = (payload: string) => {
    if (payload === qualified) waiting.wake();
    else if (payload.startsWith(prefix)) waiting.wake(payload.slice(prefix.length));
  };
  let session: Promise<Listening> | undefined;
  let backoff = 0;
  let stopReopen = () => {};
  let stopAnnouncing: (() => void) | undefined;
  // Each watched key's announcement, made by its first watch and awaited by the others: a waiter
  // that joins the waiters of a key writes nothing.
  const announced = new Map<string, Promise<unknown>>();
  const announce = (keys: string[], signal?: AbortSignal) =>
    call(sql.announce, [JSON.stringify(keys), String(ANNOUNCED)], signal);
  function listening(): Promise<Listening> {
    if (session) return session;
    const mine: Promise<Listening> = listener!(
      notice,
      () => waiting.wake(),
      () => session === mine && reopen(),
    );
    session = mine;
    mine.then(
      (l) => session !== mine && l.stop(),
      () => {
        if (session === mine) session = undefined;
      },
    );
    return mine;
  }
  function reopen(): void {
    session = undefined;
    if (waiting.size === 0) return;
    backoff = Math.min(Math.max(2 * backoff, 1_000), 30_000);
    stopReopen = timer(backoff, () => {
      if (waiting.size === 0) return;
      listening().then(() => {
        backoff = 0;
        waiting.wake();
      }, reopen);
    });
  }
  /** The last watch ended: the session closes, the announcements stop being renewed (they lapse). */
  function quiet(key: string): void {
    announced.delete(key);
    if (waiting.size > 0) return;
    const s = session;
    session = undefined;
    backoff = 0;
    stopReopen();
    stopAnnouncing?.();
    stopAnnouncing = undefined;
    s?.then(
      (l) => l.stop(),
      () => {},
    );
  }
  function announcing(): void {
    stopAnnouncing = timer(ANNOUNCED / 3, () => {
      announce(waiting.keys()).catch(() => {});
      announcing();
    });
  }
  const watch: Backend["watch"] = async (key, wake, signal) => {
    signal.throwIfAborted();
    const leave = waiting.add(key, wake, signal, quiet);
    try {
      // Listening first: a release that sees the announcement is heard.
      await abortableCall(listening(), signal, driverError);
      let made = announced.get(key);
      if (!made) {
        const mine = announce([key]);
        made = mine;
        announced.set(key, mine);
        mine.catch(() => announced.get(key) === mine && announced.delete(key));
      }
      await abortableCall(made, signal, driverError);
    } catch (error) {
      leave();
      throw error;
    }
    if (!stopAnnouncing && waiting.size > 0) announcing();
  };

  const malformed = (rows: unknown) => malformedReply(NAME, rows, clean, undefined, "rows");
  /** A row's column `n` as a number, or NaN. */
  const num = (row: Record<string, unknown> | undefined, column = "n") =>
    typeof row?.[column] === "string" ? Number(row[column]) : Number.NaN;
  const ttlArg = (ttl: number) => String(Math.ceil(ttl));
  const nonceArg = (nonce: string) => {
    check(
      typeof nonce === "string" && nonce !== "" && nonce !== DONE && nonce !== SHARED,
      `[${NAME}]`,
      `nonce must be a non-empty string other than "${DONE}" and "${SHARED}"`,
    );
    return nonce;
  };

  /** What an acquire statement's rows (its `answer`) say. */
  function answerOf(rows: Rows): AcquireResult {
    const [row] = rows;
    const n = num(row);
    // A token past the safe range (the fence counter was raised to its end) is passed on: the core
    // refuses it as an exhausted fence counter and gives the lock back (docs/DESIGN.md §5.1).
    if (rows.length === 1 && row?.k === "ok" && Number.isInteger(n) && n > 0) return { ok: true, token: n };
    // Taken: the holder's ms left (none when the row appeared during the statement, or readers hold
    // it and a writer waits).
    if (rows.length === 1 && row?.k === "taken")
      return Number.isFinite(n) && n > 0 ? { ok: false, retryAfter: n } : { ok: false };
    if (
      rows.length === 1 &&
      row?.k === "done" &&
      Number.isSafeInteger(n) &&
      n > 0 &&
      typeof row.o === "string"
    )
      return { ok: false, done: { owner: row.o, token: n } };
    if (rows.length === 0) return { ok: false };
    throw malformed(rows);
  }

  /** A renew by the statement `text` (exclusive or shared): whether `nonce` held the lease. */
  const renewing =
    (text: string) =>
    async ({ key, nonce, ttl, signal }: RenewRequest): Promise<boolean> => {
      const rows = await call(text, [key, nonceArg(nonce), ttlArg(ttl)], signal);
      if (rows.length > 1) throw malformed(rows);
      return rows.length === 1;
    };
  /** A release by the statement `text` (exclusive or shared). */
  const releasing =
    (text: string) =>
    async ({ key, nonce, signal }: ReleaseRequest): Promise<void> => {
      const rows = await call(text, [key, nonceArg(nonce)], signal);
      if (rows.length > 1) throw malformed(rows);
    };

  const backend: Backend = {
    name: NAME,
    ...(listener ? { watch } : {}),

    async acquire({ key, owner, nonce, ttl, signal, waiter }): Promise<AcquireResult> {
      // A fire's key draws from its mutex name's counter row (src/slots.ts counterOf).
      const name = counterOf(key);
      const params = [key, owner, nonceArg(nonce), ttlArg(ttl), name + COUNTER];
      if (name !== key) params.push(name);
      // A waiting writer's attempt refused by readers marks it waiting (§18); a fire's key is
      // not marked (runOnce never waits in shared mode).
      const waiting = waiter !== undefined && name === key;
      if (waiting) params.push(nonceArg(waiter));
      const text = name !== key ? sql.acquireFire : waiting ? sql.acquireWaiting : sql.acquire;
      return answerOf(await call(text, params, signal));
    },

    // Shared mode (docs/DESIGN.md §18): one statement per operation, on the name's row.
    async acquireShared({ key, owner, nonce, ttl, signal }): Promise<AcquireResult> {
      const name = counterOf(key);
      const params = [key, owner, nonceArg(nonce), ttlArg(ttl), name + COUNTER];
      if (name !== key) params.push(name);
      return answerOf(await call(name === key ? sql.acquireShared : sql.acquireSharedFire, params, signal));
    },

    renewShared: renewing(sql.renewShared),
    releaseShared: releasing(sql.releaseShared),
    renew: renewing(sql.renew),
    release: releasing(sql.release),

    async raiseFence({ key, nonce, token, signal }): Promise<boolean> {
      check(Number.isSafeInteger(token) && token > 0, `[${NAME}]`, "token must be a positive integer");
      const rows = await call(
        sql.raise,
        [key, nonceArg(nonce), String(token), counterOf(key) + COUNTER],
        signal,
      );
      if (rows.length > 1) throw malformed(rows);
      return rows.length === 1;
    },

    async inspect({ key, signal }): Promise<HolderInfo | null> {
      const rows = await call(sql.inspect, [key], signal);
      const [row] = rows;
      if (!row) return null;
      const token = num(row);
      const left = num(row, "ttl");
      if (rows.length !== 1 || typeof row.owner !== "string" || !Number.isSafeInteger(token))
        throw malformed(rows);
      const holder: HolderInfo = { owner: row.owner, token };
      if (left > 0) holder.ttlLeft = left;
      if (row.d === "true") holder.done = true;
      if (typeof row.r === "string") {
        const readers = Number(row.r);
        if (!(Number.isSafeInteger(readers) && readers > 0)) throw malformed(rows);
        holder.readers = readers;
      }
      return holder;
    },

    async complete({ key, nonce, retain, signal }): Promise<boolean> {
      check(Number.isSafeInteger(retain) && retain >= 1, `[${NAME}]`, "retain must be a positive integer");
      const rows = await call(
        sql.complete,
        [key, nonceArg(nonce), String(retain), `${counterOf(key)}:fire`],
        signal,
      );
      if (rows.length > 1) throw malformed(rows);
      return rows.length === 1;
    },
  };
  // A sent statement is not cancelled: the core bounds each request by racing it (RACED).
  return Object.assign(backend, { [RACED]: true });
}
