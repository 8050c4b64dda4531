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
 * @property {string} description What it is, in one line (the install table in README and docs).
 * @property {string} summary What it is, in a few words (the bullet lists of backends).
 * @property {string} [where] Where it runs, in words, when the list of `runtimes` does not say it
 *   well (a backend over the user's client runs where the client does).
 * @property {true | string} shared Whether it takes `mode: "shared"` (readers and writers,
 *   docs/DESIGN.md §18): true, or why not in a few words. A test checks it against
 *   `capabilities(backend).shared`.
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
    description: "an in-process store: tests, several workers in one process",
    shared: true,
    summary: "one isolated in-process store",
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
    description: "Upstash Redis over its REST API, `fetch` only",
    shared: true,
    summary: "Upstash Redis over its REST API",
  },
  {
    name: "azure-blob",
    factory: "azureBlob",
    server: "azurite",
    secrets: ["accountKey"],
    env: ["AZURE_STORAGE_CONNECTION_STRING"],
    runtimes: ["node", "bun", "deno", "workerd"],
    markers: [/azure/i, /x-ms-lease/],
    description: "Azure Storage blob leases, `fetch` only",
    shared: "a blob lease is exclusive",
    summary: "Azure Storage blob leases",
  },
  {
    name: "redis",
    factory: "redis",
    server: "redis",
    secrets: [],
    env: [],
    runtimes: ["node", "bun"],
    markers: [/"redis"/, /NOSCRIPT/],
    description: "Redis through your client (ioredis, node-redis, Bun's, `@upstash/redis`)",
    shared: true,
    summary: "Redis over the client your app already has",
    where: "where your client runs (tested: Node, Bun)",
  },
  {
    name: "postgres",
    factory: "postgres",
    server: "postgres",
    secrets: [],
    env: [],
    runtimes: ["node", "bun"],
    markers: [/"postgres"/, /ON CONFLICT/],
    description: "PostgreSQL through your driver (pg, postgres.js, Bun's SQL, Neon)",
    shared: "not yet",
    summary: "PostgreSQL over the driver your app already has",
    where: "where your driver runs (tested: Node, Bun)",
  },
  {
    name: "quorum",
    factory: "quorum",
    server: null,
    secrets: [],
    env: [],
    runtimes: ["node", "bun", "deno", "workerd"],
    markers: [/"quorum"/, /a quorum is/],
    description: "one lock over N ≥ 3 independent backends",
    shared: "not yet (a reader granted by a majority needs its fence raised on the members behind)",
    summary: "one lock over N ≥ 3 independent backends",
    where: "those of its members",
  },
  {
    name: "deno-kv",
    factory: "denoKv",
    server: null,
    secrets: [],
    env: [],
    runtimes: ["deno", "node", "bun"],
    markers: [/"deno-kv"/, /versionstamp/],
    description: "Deno KV (`Deno.openKv()`, Deno Deploy, or `@deno/kv`)",
    shared: "not yet (locks expire by observation: each reader would need its own record)",
    summary: "Deno KV, locks expired by observation",
    where: "Deno; Node and Bun through `@deno/kv`",
  },
  {
    name: "cloudflare",
    factory: "durableObject",
    server: "cloudflare",
    secrets: ["token"],
    env: ["LEASEHOLD_DO_SECRET"],
    runtimes: ["node", "bun", "deno", "workerd"],
    markers: [/LeaseholdLock/, /leasehold\.internal/],
    description: "a Cloudflare Durable Object per lock, waiters in line",
    shared: true,
    summary: "a Cloudflare Durable Object per lock",
    where: "Workers (binding); Node, Bun, Deno through the Worker's route",
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
    description: "Amazon DynamoDB over its JSON API, `fetch` only",
    shared: "not yet (locks expire by observation: each reader would need its own record)",
    summary: "Amazon DynamoDB, locks expired by observation",
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
