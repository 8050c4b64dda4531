/**
 * The Redis backend over the client you already have: ioredis 5 and 6 (`Redis` and `Cluster`),
 * node-redis v4 to v6 (`createClient`, `createCluster`), Bun's built-in `RedisClient` (`Bun.redis`) and
 * `@upstash/redis`, recognised by their methods; leasehold imports none of them.
 *
 * The same Lua scripts, key layout and token checks as `leasehold/upstash` (one shared module):
 * a lock taken through either excludes the other on the same database. For a lock named `n`,
 * `leasehold:{n}` holds the lease and `leasehold:{n}:fence` the fence counter; the hash tag
 * keeps both in one cluster slot (a fire of runOnce, `n:fire:<id>`, is `leasehold:{n}:fire:<id>`
 * and draws from `leasehold:{n}:fence`). Each operation is one `EVALSHA` (one `EVAL` instead the first
 * time a server does not know the script).
 *
 * A command cannot be taken back once sent on a TCP connection: when the core gives up on an
 * attempt (its per-attempt bound, or your signal), the command still runs, and the core treats
 * it as a request whose reply was lost (an acquire's possible lock is released in the
 * background; a late reply never revives a lease).
 *
 * A waiting `acquire()` is woken by the release of its lock (`watch`): the scripts that free a
 * lock publish on `leasehold:` and its lock key, and the waiters of one backend subscribe on one
 * extra connection made from your client with `duplicate()` (ioredis, node-redis, Bun's
 * `RedisClient`), opened by the first waiter and closed when the last one stops waiting. An
 * `@upstash/redis` client has no watch: its waiters poll.
 *
 * Redis replicates asynchronously: a failover that loses the last writes can let a second holder
 * in, and can set the fence counter back (this backend then raises the counter above every token
 * it saw, grants with that token and tells `onFenceHealed`, rather than repeat a token). Keep
 * eviction off (`maxmemory-policy noeviction`, the default) for the database holding the locks.
 *
 * @example With ioredis
 * ```ts
 * import { Redis } from "ioredis"; // the named export: a default import is no class under NodeNext
 * import { createMutex } from "leasehold";
 * import { redis } from "leasehold/redis";
 *
 * const client = new Redis("redis://localhost:6379");
 * await using lease = await createMutex(redis(client), { name: "nightly-report" }).acquire();
 * ```
 *
 * @module
 */
import type { Backend } from "../../backend.ts";
import { BackendError } from "../../errors.ts";
import { check, fail } from "../../options.ts";
import { RACED } from "../../signals.ts";
import { abortableCall, malformed, permissionFix, REDIS_TRANSIENT } from "../shared/errors.ts";
import { cleaner, secretsIn } from "../shared/redact.ts";
import { INSPECT } from "../shared/redis-lua.ts";
import { type FenceHealed, scriptBackend } from "../shared/redis-scripts.ts";
import { bun, ioredis, listener, nodeRedis, type Open } from "./watch.ts";

export type { FenceHealed } from "../shared/redis-scripts.ts";

/** Any function: the clients' own signatures are many and overloaded. */
export type Method = (...args: never) => unknown;

/**
 * The clients {@link redis} accepts, by the methods it uses:
 * - ioredis `Redis` or `Cluster`: `evalsha`, `eval` and `call`;
 * - node-redis v4 to v6 client or cluster: `evalSha`, `eval` and `sendCommand`;
 * - Bun's `RedisClient`: `send`;
 * - `@upstash/redis` `Redis`: `evalsha` and `eval`.
 */
export type RedisClientLike =
  | { evalsha: Method; eval: Method; call: Method }
  | { evalSha: Method; eval: Method; sendCommand: Method }
  | { send: Method }
  | { evalsha: Method; eval: Method };

/** Options of {@link redis}. */
export interface RedisOptions {
  /** Prepended to every key, so one database can serve several apps. Default `"leasehold:"`. */
  prefix?: string;
  /**
   * Called when a lock's fence counter went back (a restart without persistence, a failover or
   * flush that lost writes, eviction) and this backend raised it above every token it had seen
   * for the lock, granting the lease with that token instead of repeating one: the lock's name,
   * the tokens and the likely cause, no secret. Default: `console.warn` of `info.message`. A
   * function that throws is ignored.
   */
  onFenceHealed?: (info: FenceHealed) => void;
}

const NAME = "redis";

const SHAPES =
  "an ioredis Redis or Cluster, a node-redis client or cluster (createClient, createCluster), Bun's " +
  "RedisClient (Bun.redis) or an @upstash/redis Redis";

/** Runs a script by its SHA-1 (`sha`) or, with `eval`, by its text: the client's own calls. */
type Evaluate = (sha: boolean, script: string, keys: string[], args: string[]) => Promise<unknown>;

type Call = (...args: unknown[]) => Promise<unknown>;

// Each shape, in the order tried: the methods it must have, its two calls, EVALSHA and EVAL, as
// the client spells them (over those methods, bound to the client), and how it opens a subscriber
// connection for `watch` (watch.ts) when it has `duplicate` and `subscribe`.
const CALLS: [string[], (methods: [Call, Call]) => Evaluate, ((client: never) => Open)?][] = [
  // ioredis: evalsha(sha, numkeys, ...keys, ...args).
  [
    ["evalsha", "eval", "call"],
    ([evalsha, evaluate]) =>
      (sha, s, keys, args) =>
        (sha ? evalsha : evaluate)(s, keys.length, ...keys, ...args),
    ioredis,
  ],
  // node-redis: evalSha(sha, { keys, arguments }); a cluster routes by the first key.
  [
    ["evalSha", "eval", "sendCommand"],
    ([evalsha, evaluate]) =>
      (sha, s, keys, args) =>
        (sha ? evalsha : evaluate)(s, { keys, arguments: args }),
    nodeRedis,
  ],
  // Bun's RedisClient: send(command, args), every argument a string.
  [
    ["send"],
    ([send]) =>
      (sha, s, keys, args) =>
        send(sha ? "EVALSHA" : "EVAL", [s, String(keys.length), ...keys, ...args]),
    bun,
  ],
  // @upstash/redis: evalsha(sha, keys, args). No watch: REST has no connection to subscribe on.
  [
    ["evalsha", "eval"],
    ([evalsha, evaluate]) =>
      (sha, s, keys, args) =>
        (sha ? evalsha : evaluate)(s, keys, args),
  ],
];

/** The client's calls, and its subscriber connections when it can make them; null for no known shape. */
function shapeOf(client: unknown): { evaluate: Evaluate; open: Open | undefined } | null {
  if ((typeof client !== "object" && typeof client !== "function") || client === null) return null;
  const c = client as Record<string, unknown>;
  for (const [names, calls, subscriber] of CALLS) {
    if (names.every((n) => typeof c[n] === "function")) {
      const subscribes = typeof c.duplicate === "function" && typeof c.subscribe === "function";
      return {
        evaluate: calls(names.map((n) => (c[n] as Call).bind(client)) as [Call, Call]),
        open: subscribes ? subscriber?.(client as never) : undefined,
      };
    }
  }
  return null;
}

/** The password and URL a client's options hold (ioredis, node-redis), to keep them out of messages. */
function secretsOf(client: object): string[] {
  const options = (client as { options?: Record<string, unknown> }).options;
  const cluster = options?.redisOptions as { password?: unknown } | undefined;
  return secretsIn([options?.password, cluster?.password], [options?.url]);
}

const AUTH = /\b(WRONGPASS|NOAUTH|NOPERM)\b/;
// An error reply of the server: its code first, in capitals (ERR, WRONGTYPE, NOSCRIPT...).
const REPLY = /^[A-Z][A-Z_]+( |$)/;

const hex = (bytes: ArrayBuffer) =>
  [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("");

/**
 * Creates a Redis backend for {@link createMutex} over a client you already have.
 *
 * @param client A connected client of one of the {@link RedisClientLike} shapes. leasehold never
 *   connects, closes or configures it.
 * @param options An optional key `prefix` and `onFenceHealed`.
 * @returns A backend named `"redis"` with no ttl bounds of its own; with `watch` over a client that
 *   has `duplicate()` and `subscribe()` (all but `@upstash/redis`).
 * @throws {TypeError} When the client has none of the accepted shapes, `prefix` is not a string or
 *   `onFenceHealed` not a function.
 *
 * @example node-redis
 * ```ts
 * import { createMutex } from "leasehold";
 * import { redis } from "leasehold/redis";
 * import { createClient } from "redis";
 *
 * const client = await createClient({ url: "redis://localhost:6379" }).connect();
 * const mutex = createMutex(redis(client, { prefix: "app1:" }), { name: "nightly-report" });
 * ```
 */
export function redis(client: RedisClientLike, options: RedisOptions = {}): Backend {
  const got =
    client === null ? "null" : typeof client === "object" ? "an object without those methods" : typeof client;
  const { evaluate, open } = shapeOf(client) ?? fail(`[${NAME}]`, `client must be ${SHAPES}; got ${got}`);
  const { prefix = "leasehold:", onFenceHealed } = options ?? {};
  check(typeof prefix === "string", `[${NAME}]`, "option prefix must be a string");
  const { clean, cause } = cleaner(secretsOf(client));

  /** The BackendError for whatever the client threw. */
  function clientError(error: unknown): BackendError {
    const message = clean(error instanceof Error ? error.message : String(error));
    const reply = REPLY.test(message);
    const auth = AUTH.test(message);
    // A permission the runtime refused (Deno without --allow-net): no retry can grant it.
    const fix = permissionFix(error);
    const text = message || "the client failed without a message";
    return new BackendError(fix ? `${text}: ${fix}` : text, {
      backend: NAME,
      // A connection that failed, closed or timed out may work again; a refused command will not.
      retryable: !fix && !auth && (!reply || REDIS_TRANSIENT.test(message)),
      auth,
      cause: cause(error),
    });
  }

  // The scripts' SHA-1s, computed once (Web Crypto: every runtime leasehold supports has it), then
  // kept as strings: the requests after the first wait for no promise of it.
  const shas = new Map<string, string | Promise<string>>();
  const shaOf = (script: string) => {
    let sha = shas.get(script);
    if (!sha) {
      sha = crypto.subtle.digest("SHA-1", new TextEncoder().encode(script)).then(hex);
      sha.then(
        (known) => shas.set(script, known),
        () => {},
      );
      shas.set(script, sha);
    }
    return sha;
  };

  async function run(script: string, keys: string[], args: string[]): Promise<unknown> {
    try {
      const sha = shaOf(script);
      return await evaluate(true, typeof sha === "string" ? sha : await sha, keys, args);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (!/NOSCRIPT/.test(message)) throw error;
    }
    return evaluate(false, script, keys, args);
  }

  async function call(script: string, keys: string[], args: (string | number)[], signal?: AbortSignal) {
    return abortableCall(run(script, keys, args.map(String)), signal, clientError);
  }

  const backend = scriptBackend({
    name: NAME,
    prefix,
    evaluate: call,
    read: (key, signal) => call(INSPECT, [key, `${key}:readers`], [], signal),
    malformed: (reply) => malformed(NAME, reply, clean),
    counterLoss:
      "by eviction (set maxmemory-policy to noeviction), or by a restart without persistence, a failover or a flush that lost writes",
    onFenceHealed,
    listen: open && listener(open, clientError),
  });
  // A cluster runs a script only over keys of one slot, and the leases of many names are in many:
  // their renewals go one request each there (ioredis Cluster, node-redis createCluster).
  const c = client as { isCluster?: unknown; getSlotMaster?: unknown };
  if (c.isCluster === true || typeof c.getSlotMaster === "function") delete backend.renewMany;
  // A sent command cannot be taken back: the core bounds each request by racing it (RACED).
  return Object.assign(backend, { [RACED]: true });
}
