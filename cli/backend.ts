// The backend the environment and the flags describe: each store configured as its ecosystem
// does (docs/cli.md, "Backends"), one at a time.
import type { Backend } from "../src/backend.ts";
import { parseConnectionString } from "../src/backends/azure-blob/auth.ts";
import { azureBlob } from "../src/backends/azure-blob/index.ts";
import { durableObject } from "../src/backends/cloudflare/index.ts";
import { dynamodb } from "../src/backends/dynamodb/index.ts";
import { postgres } from "../src/backends/postgres/index.ts";
import { redis } from "../src/backends/redis/index.ts";
import { fromEnv } from "../src/backends/upstash/index.ts";
import type { Options } from "./args.ts";
import { BACKENDS, type BackendName, ENV } from "./help.ts";
import { messageOf, secrets, UsageError } from "./output.ts";
import { parsePostgresUrl, postgresClient } from "./pgwire.ts";
import { parseRedisUrl, redisClient } from "./resp.ts";

type Env = Record<string, string | undefined>;

/** The backend, where it is (never a secret), and how to close its connections. */
export interface Store {
  backend: Backend;
  /** Such as `redis at 127.0.0.1:6379, database 1`. */
  label: string;
  close(): Promise<void>;
}

const POSTGRES_URL = /^postgres(ql)?:\/\//;

/** The variables whose being set picks each backend, as they are named in messages. */
const SIGNS: Record<BackendName, (env: Env) => string[]> = {
  upstash: (env) =>
    [ENV.upstashUrl, ENV.upstashToken, "KV_REST_API_URL", "KV_REST_API_TOKEN"].filter((v) => set(env, v)),
  "azure-blob": (env) => [ENV.azure].filter((v) => set(env, v)),
  redis: (env) => [ENV.redis].filter((v) => set(env, v)),
  // Only a postgres:// DATABASE_URL: a mysql:// one is some other program's.
  postgres: (env) => (POSTGRES_URL.test(env[ENV.postgres] ?? "") ? [ENV.postgres] : []),
  // The table, not AWS_*: those are set on every AWS host, for every program.
  dynamodb: (env) => [ENV.dynamodbTable].filter((v) => set(env, v)),
  cloudflare: (env) => [ENV.doUrl, ENV.doSecret].filter((v) => set(env, v)),
};

const set = (env: Env, name: string) => (env[name] ?? "") !== "";

/** The backend the environment and flags describe; a UsageError names what is missing or ambiguous. */
export function backendFrom(o: Options, env: Env): Store {
  const kind = o.backend ?? detect(env);
  if (!(BACKENDS as readonly string[]).includes(kind))
    throw new UsageError(`--backend must be one of ${BACKENDS.join(", ")}, got ${JSON.stringify(kind)}`);
  return BUILD[kind as BackendName](o, env);
}

function detect(env: Env): BackendName {
  const found = BACKENDS.map((b) => [b, SIGNS[b](env)] as const).filter(([, vars]) => vars.length > 0);
  if (found.length === 1) return found[0]![0];
  if (found.length === 0) {
    throw new UsageError(
      `no backend configured: set ${ENV.redis}, ${ENV.postgres}, ${ENV.upstashUrl} and ${ENV.upstashToken}, ` +
        `${ENV.azure} and --container (or ${ENV.container}), ${ENV.dynamodbTable} with the AWS_* variables, ` +
        `or ${ENV.doUrl} and ${ENV.doSecret} (docs/cli.md, "Backends")`,
    );
  }
  throw new UsageError(
    `more than one backend is configured (${found.map(([b, vars]) => `${vars.join(", ")}: ${b}`).join("; ")}): ` +
      `choose one with --backend ${found.map(([b]) => b).join("|")}, or unset the others' variables`,
  );
}

/** A UsageError for a backend's constructor's TypeError, naming where the value came from. */
function configured<T>(where: string, make: () => T): T {
  try {
    return make();
  } catch (error) {
    throw new UsageError(`${where}: ${messageOf(error)}`);
  }
}

const needs = (backend: string, missing: string[]) => {
  if (missing.length > 0)
    throw new UsageError(`the ${backend} backend needs ${missing.join(" and ")} (not set)`);
};

/**
 * The target of the URL in `env[variable]`, which `backend` needs, read by `parse`; the URL and
 * its password are secrets from now on.
 */
function urlTarget<T extends { password?: string | undefined }>(
  backend: string,
  env: Env,
  variable: string,
  parse: (text: string) => T,
): T {
  needs(backend, set(env, variable) ? [] : [variable]);
  const text = env[variable]!;
  secrets.push(text);
  const target = configured(variable, () => parse(text));
  if (target.password !== undefined) secrets.push(target.password, encodeURIComponent(target.password));
  return target;
}

const hostOf = (url: URL) => `${url.protocol}//${url.host}${url.pathname === "/" ? "" : url.pathname}`;

const noClose = async () => {};

const BUILD: Record<BackendName, (o: Options, env: Env) => Store> = {
  upstash(_o, env) {
    const missing = [ENV.upstashUrl, ENV.upstashToken].filter(
      (v, n) => !set(env, v) && !set(env, n === 0 ? "KV_REST_API_URL" : "KV_REST_API_TOKEN"),
    );
    needs("upstash", missing);
    for (const v of [ENV.upstashToken, "KV_REST_API_TOKEN"]) if (set(env, v)) secrets.push(env[v]!);
    let at = "";
    for (const v of [ENV.upstashUrl, "KV_REST_API_URL"]) {
      try {
        if (!set(env, v)) continue;
        const url = new URL(env[v]!);
        secrets.push(decodeURIComponent(url.password));
        at ||= hostOf(url);
      } catch {}
    }
    const backend = configured(`${ENV.upstashUrl} / ${ENV.upstashToken}`, () => fromEnv(env));
    return { backend, label: `upstash at ${at}`, close: noClose };
  },

  "azure-blob"(o, env) {
    const container = o.container ?? env[ENV.container];
    needs("azure-blob", [
      ...(set(env, ENV.azure) ? [] : [ENV.azure]),
      ...(container ? [] : [`--container (or ${ENV.container})`]),
    ]);
    const connectionString = env[ENV.azure]!;
    secrets.push(connectionString);
    return configured(`${ENV.azure} / --container`, () => {
      // The backend's own parser: its key and SAS (and the SAS's signature, in both forms) are secrets.
      const { accountKey, sasToken, accountUrl } = parseConnectionString(connectionString);
      for (const value of [accountKey, sasToken]) if (value) secrets.push(value);
      const sig = sasToken && /(?:^|&)sig=([^&]+)/.exec(sasToken)?.[1];
      if (sig) secrets.push(sig, decodeURIComponent(sig));
      const backend = azureBlob({
        connectionString,
        container: container!,
        createContainer: o.createContainer,
      });
      return {
        backend,
        label: `azure-blob at ${hostOf(new URL(accountUrl))}, container ${container}`,
        close: noClose,
      };
    });
  },

  redis(_o, env) {
    const target = urlTarget("redis", env, ENV.redis, parseRedisUrl);
    const client = redisClient(target);
    const host = target.host.includes(":") ? `[${target.host}]` : target.host;
    return {
      backend: redis(client),
      label: `redis at ${host}:${target.port}, database ${target.db}${target.tls ? " (TLS)" : ""}`,
      close: async () => client.close(),
    };
  },

  postgres(o, env) {
    const target = urlTarget("postgres", env, ENV.postgres, parsePostgresUrl);
    const table = o.table ?? env[ENV.postgresTable];
    const client = postgresClient(target);
    const backend = configured(
      o.table === undefined && table !== undefined ? ENV.postgresTable : "--table",
      () => postgres(client, { ...(table === undefined ? {} : { table }), createTable: o.createTable }),
    );
    const host = target.host.includes(":") ? `[${target.host}]` : target.host;
    return {
      backend,
      label: `postgres at ${host}:${target.port}/${target.database}, table ${table ?? "leasehold_locks"} (sslmode ${target.sslmode})`,
      close: () => client.end(),
    };
  },

  dynamodb(o, env) {
    const table = o.table ?? env[ENV.dynamodbTable];
    needs("dynamodb", table ? [] : [`--table (or ${ENV.dynamodbTable})`]);
    for (const v of ["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"]) if (set(env, v)) secrets.push(env[v]!);
    const endpoint = ["AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL"].find((v) => set(env, v));
    return configured(`--table / AWS_*${endpoint ? ` / ${endpoint}` : ""}`, () => {
      const backend = dynamodb({
        table: table!,
        env,
        createTable: o.createTable,
        ...(endpoint ? { endpoint: env[endpoint]! } : {}),
      });
      const region = env.AWS_REGION || env.AWS_DEFAULT_REGION;
      const at = endpoint ? ` at ${hostOf(new URL(env[endpoint]!))}` : "";
      return { backend, label: `dynamodb table ${table} in ${region}${at}`, close: noClose };
    });
  },

  cloudflare(_o, env) {
    needs(
      "cloudflare",
      [ENV.doUrl, ENV.doSecret].filter((v) => !set(env, v)),
    );
    secrets.push(env[ENV.doSecret]!);
    return configured(`${ENV.doUrl} / ${ENV.doSecret}`, () => {
      const backend = durableObject({ url: env[ENV.doUrl]!, token: env[ENV.doSecret]! });
      return { backend, label: `cloudflare at ${hostOf(new URL(env[ENV.doUrl]!))}`, close: noClose };
    });
  },
};
