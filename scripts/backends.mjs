// The one table of backends. Everything that lists them reads it: the package's entry points are
// checked against it (scripts/check-exports.mjs), and so are the bundles (check-bundles.mjs), the
// secrets check (test/harness/secrets.ts), bench/size.ts, and the lists in README and docs
// (scripts/backend-lists.mjs). A new backend is a row here; src/backends/README.md says what else.
// Plain ESM with a JSDoc type (backends.d.mts) so that node scripts, vitest and tsx all import it.

/** @typedef {"node" | "bun" | "deno" | "workerd"} Runtime */

/**
 * @typedef {object} BackendRow
 * @property {string} name The subpath, `leasehold/<name>`, and the folder, `src/backends/<name>/`.
 * @property {string} factory The function the entry exports that makes the backend.
 * @property {string | null} server The server the test harness starts for it: the name its global
 *   setup provides (`inject(server)`, test/harness/setup/), or null when it needs none.
 * @property {readonly string[]} secrets The fields of that provided object that hold a secret
 *   (dotted paths), which the secrets check registers.
 * @property {readonly string[]} env The environment variables holding a secret it may read.
 * @property {readonly Runtime[]} runtimes The runtimes the test suite runs it on.
 * @property {readonly RegExp[]} markers Strings only its code contains (protocol text that survives
 *   minification), by which check-bundles finds it in another entry's bundle.
 * @property {string} description What it is, in one line.
 */

/** @type {readonly BackendRow[]} */
export const BACKENDS = [
  {
    name: "memory",
    factory: "memory",
    server: null,
    secrets: [],
    env: [],
    runtimes: ["node", "bun", "deno", "workerd"],
    markers: [/"memory"/],
    description: "in one process: tests, several workers in one process, trying leasehold out",
  },
  {
    name: "upstash",
    factory: "upstash",
    server: "upstash",
    secrets: ["token"],
    env: ["UPSTASH_REDIS_REST_TOKEN", "KV_REST_API_TOKEN"],
    runtimes: ["node", "bun", "deno", "workerd"],
    // The Lua scripts are shared (src/backends/shared/redis-scripts.ts): EVAL_RO is upstash's own.
    markers: [/"upstash"/, /EVAL_RO/],
    description: "Upstash Redis over its REST API, through fetch",
  },
  {
    name: "azure-blob",
    factory: "azureBlob",
    server: "azurite",
    secrets: ["accountKey"],
    env: ["AZURE_STORAGE_CONNECTION_STRING"],
    runtimes: ["node", "bun", "deno", "workerd"],
    markers: [/azure/i, /x-ms-lease/],
    description: "Azure Blob Storage leases over its REST API, through fetch",
  },
  {
    name: "redis",
    factory: "redis",
    server: "redis",
    secrets: [],
    env: [],
    runtimes: ["node", "bun"],
    markers: [/"redis"/, /NOSCRIPT/],
    description: "Redis through your own client: ioredis, node-redis, Bun's, @upstash/redis",
  },
  {
    name: "postgres",
    factory: "postgres",
    server: "postgres",
    secrets: [],
    env: [],
    runtimes: ["node", "bun"],
    markers: [/"postgres"/, /ON CONFLICT/],
    description: "PostgreSQL through your own client: pg, postgres.js, Bun's SQL",
  },
  {
    name: "quorum",
    factory: "quorum",
    server: null,
    secrets: [],
    env: [],
    runtimes: ["node", "bun", "deno", "workerd"],
    markers: [/"quorum"/, /a quorum is/],
    description: "a quorum of N ≥ 3 other backends, which survives some of them failing",
  },
  {
    name: "deno-kv",
    factory: "denoKv",
    server: null,
    secrets: [],
    env: [],
    runtimes: ["deno", "node", "bun"],
    markers: [/"deno-kv"/, /versionstamp/],
    description: "Deno KV: Deno.openKv, Deno Deploy, or @deno/kv on Node and Bun",
  },
  {
    name: "cloudflare",
    factory: "durableObject",
    server: "cloudflare",
    secrets: ["token"],
    env: ["LEASEHOLD_TOKEN"],
    runtimes: ["node", "bun", "deno", "workerd"],
    markers: [/LeaseholdLock/, /leasehold\.internal/],
    description: "a Cloudflare Durable Object: its binding inside Workers, its route from elsewhere",
  },
  {
    name: "dynamodb",
    factory: "dynamodb",
    server: "dynamodb",
    secrets: ["credentials.secretAccessKey"],
    env: ["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"],
    runtimes: ["node", "bun", "deno", "workerd"],
    // The SigV4 signer is shared (src/backends/shared/sigv4.ts): these markers are DynamoDB's own.
    markers: [/DynamoDB_20120810/, /ConditionalCheckFailedException/],
    description: "Amazon DynamoDB over its JSON API, signed with SigV4 through WebCrypto",
  },
];

/**
 * The subpath of a backend: `./<name>`, as package.json and jsr.json "exports" key it.
 * @param {BackendRow} row
 */
export const subpathOf = (row) => `./${row.name}`;
/**
 * Its entry (its factory's module), from the repository's root.
 * @param {BackendRow} row
 */
export const entryOf = (row) => `src/backends/${row.name}/index.ts`;
/**
 * Its page in the documentation, from the repository's root.
 * @param {BackendRow} row
 */
export const docsOf = (row) => `docs/backends/${row.name}.md`;
