/**
 * leasehold: a distributed mutex, semaphore and leader election for every runtime with `fetch`.
 * Backends live in their own entry points, one per store: `leasehold/memory`, `leasehold/upstash`,
 * `leasehold/azure-blob`, `leasehold/redis`, `leasehold/postgres`, `leasehold/quorum`,
 * `leasehold/deno-kv`, `leasehold/cloudflare` and `leasehold/dynamodb` (the README's install
 * table says what each is and where it runs); `leasehold/testing` checks a backend of your own;
 * `leasehold/node-cron` runs each fire of a node-cron task once across processes.
 *
 * @module
 */
export * from "./src/index.ts";
