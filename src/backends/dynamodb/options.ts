// The dynamodb backend's options: checked, with their defaults and the standard AWS environment
// variables. Internal: not a package entry (the types are re-exported by index.ts).
import type { FetchLike } from "../../backend.ts";
import { check } from "../../options.ts";
import { fetchOption, httpUrl } from "../shared/options.ts";
import type { AwsCredentials } from "../shared/sigv4.ts";

export type { AwsCredentials } from "../shared/sigv4.ts";

/**
 * Credentials, or a function that answers them (called before each request; it should cache,
 * as the AWS SDK's credential providers such as `fromNodeProviderChain()` do).
 */
export type AwsCredentialsOption = AwsCredentials | (() => AwsCredentials | Promise<AwsCredentials>);

/** Options of {@link dynamodb}. */
export interface DynamoDBOptions {
  /**
   * The table's name. Its partition key must be `pk` of type String (S), with no sort key: see
   * `createTable`, or docs/backends/dynamodb.md for the schema.
   */
  table: string;
  /** The AWS region, such as `"eu-west-1"`. Default: `AWS_REGION` or `AWS_DEFAULT_REGION`. */
  region?: string;
  /**
   * The access key pair (with `sessionToken` for temporary credentials), or a function that
   * answers them. Default: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`.
   */
  credentials?: AwsCredentialsOption;
  /**
   * Where to read the `AWS_*` variables when `region` or `credentials` are not given: Workers'
   * `env`, or any object. Default: `process.env` (Node, Bun) or `Deno.env` (Deno, needs
   * `--allow-env`).
   */
  env?: object;
  /** The service URL, for DynamoDB Local, dynalite or a VPC endpoint. Default `https://dynamodb.<region>.amazonaws.com`. */
  endpoint?: string;
  /** The `fetch` to use. Default: the global `fetch`. */
  fetch?: FetchLike;
  /**
   * Create the table (on-demand capacity, key `pk`) when a request finds it missing, then wait
   * until it is active. Needs `dynamodb:CreateTable` and `dynamodb:DescribeTable`. Default `false`.
   */
  createTable?: boolean;
  /** Prepended to every lock name to make its partition key, so one table can serve several apps. Default `"leasehold:"`. */
  prefix?: string;
}

/** The options, checked. */
export interface Config {
  table: string;
  region: string;
  url: URL;
  fetch: FetchLike;
  createTable: boolean;
  prefix: string;
  /** The credentials for the next request, checked. */
  credentials: () => Promise<AwsCredentials>;
}

const WHERE = "[dynamodb]";

/** Reads one variable from `env`, or from `process.env` / `Deno.env` when there is none. */
function reader(env: object | undefined): (name: string) => string | undefined {
  if (env !== undefined) {
    return (name) => {
      const v = (env as Record<string, unknown>)[name];
      return typeof v === "string" && v !== "" ? v : undefined;
    };
  }
  const g = globalThis as {
    process?: { env?: Record<string, string | undefined> };
    Deno?: { env?: { get(name: string): string | undefined } };
  };
  return (name) => {
    let v: string | undefined;
    try {
      v = g.Deno?.env ? g.Deno.env.get(name) : g.process?.env?.[name];
    } catch {
      // Deno without --allow-env: the variable is unreadable, as if unset.
      v = undefined;
    }
    return v === "" ? undefined : v;
  };
}

// A header value fetch accepts (fetch would quote a bad one, secret included, in its error).
const HEADER_SAFE = /^[\x21-\x7e]+$/;

/** Checks credentials, wherever they came from; `from` names their source in a message. */
export function checkCredentials(value: unknown, from: string): AwsCredentials {
  check(
    typeof value === "object" && value !== null,
    WHERE,
    `${from} must be an object { accessKeyId, secretAccessKey, sessionToken? }`,
  );
  const { accessKeyId, secretAccessKey, sessionToken } = value as Record<string, unknown>;
  check(
    typeof accessKeyId === "string" && /^[A-Za-z0-9]{1,128}$/.test(accessKeyId),
    WHERE,
    `${from}: accessKeyId must be an access key id (letters and digits, such as AKIA...)`,
  );
  check(
    typeof secretAccessKey === "string" && secretAccessKey !== "",
    WHERE,
    `${from}: secretAccessKey must be a non-empty string`,
  );
  check(
    sessionToken === undefined || (typeof sessionToken === "string" && HEADER_SAFE.test(sessionToken)),
    WHERE,
    `${from}: sessionToken must be a string of characters allowed in a header`,
  );
  return { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) };
}

/** Checks the options and fills in the defaults; every problem is a TypeError naming the option. */
export function config(options: DynamoDBOptions): Config {
  check(
    typeof options === "object" && options !== null,
    WHERE,
    "options must be an object with at least table",
  );
  const { table, prefix = "leasehold:", createTable = false, env } = options;
  check(
    typeof table === "string" && /^[A-Za-z0-9_.-]{3,255}$/.test(table),
    WHERE,
    "option table must be a table name: 3 to 255 letters, digits, '_', '-' or '.'",
  );
  check(typeof prefix === "string", WHERE, "option prefix must be a string");
  check(typeof createTable === "boolean", WHERE, "option createTable must be true or false");
  check(
    env === undefined || (typeof env === "object" && env !== null),
    WHERE,
    "option env must be an object",
  );
  const read = reader(env);
  const region = options.region ?? read("AWS_REGION") ?? read("AWS_DEFAULT_REGION");
  check(
    region !== undefined,
    WHERE,
    "option region is required (or set AWS_REGION): the table's AWS region, such as eu-west-1",
  );
  check(
    typeof region === "string" && /^[a-z0-9]+(-[a-z0-9]+)+$/.test(region),
    WHERE,
    "option region must be an AWS region name, such as eu-west-1",
  );
  const host = region.startsWith("cn-") ? "amazonaws.com.cn" : "amazonaws.com";
  const url = httpUrl(WHERE, "option endpoint", options.endpoint ?? `https://dynamodb.${region}.${host}`);
  check(url.search === "" && url.hash === "", WHERE, "option endpoint must not have a query or fragment");
  const fetch = fetchOption(WHERE, options.fetch);

  let credentials: Config["credentials"];
  const given = options.credentials;
  if (typeof given === "function") {
    credentials = async () => checkCredentials(await given(), "the credentials function's answer");
  } else if (given !== undefined) {
    const fixed = checkCredentials(given, "option credentials");
    credentials = async () => fixed;
  } else {
    const accessKeyId = read("AWS_ACCESS_KEY_ID");
    const secretAccessKey = read("AWS_SECRET_ACCESS_KEY");
    check(
      accessKeyId !== undefined && secretAccessKey !== undefined,
      WHERE,
      "option credentials is required (or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)",
    );
    const fixed = checkCredentials(
      { accessKeyId, secretAccessKey, sessionToken: read("AWS_SESSION_TOKEN") },
      "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN",
    );
    credentials = async () => fixed;
  }
  return { table, region, url, fetch, createTable, prefix, credentials };
}
