/**
 * The Cloudflare Durable Objects backend: a strongly consistent lock on the edge. One Durable
 * Object per lock name holds the lease and the fence counter in its transactional storage, so
 * there is no replica to fail over to and no token can go back; waiters are served first come,
 * first served, and woken on release instead of polling.
 *
 * - {@link LeaseholdLock}: the Durable Object class. Export it from your Worker and bind it in
 *   wrangler.toml (a `[[durable_objects.bindings]]` and a migration with
 *   `new_sqlite_classes = ["LeaseholdLock"]`).
 * - {@link durableObject}: the backend: `durableObject(env.LOCKS)` inside the Worker, or
 *   `durableObject({ url, token })` from Node, Bun and Deno through a route served by
 *   {@link lockHandler}, authenticated with a bearer secret.
 *
 * This module imports nothing Workers-only: it loads on every runtime.
 *
 * @example The Worker: the object, and the route for other runtimes
 * ```ts
 * import { type DurableObjectNamespaceLike, lockHandler } from "leasehold/cloudflare";
 * export { LeaseholdLock } from "leasehold/cloudflare";
 *
 * export default {
 *   fetch(request: Request, env: { LOCKS: DurableObjectNamespaceLike; LEASEHOLD_DO_SECRET: string }) {
 *     return lockHandler(env.LOCKS, { token: env.LEASEHOLD_DO_SECRET })(request);
 *   },
 * };
 * ```
 *
 * @module
 */
export {
  type DurableObjectNamespaceLike,
  type DurableObjectStubLike,
  type DurableObjectUrlOptions,
  durableObject,
} from "./backend.ts";
export { type LockHandlerOptions, lockHandler } from "./handler.ts";
export { type DurableObjectStateLike, type DurableObjectStorageLike, LeaseholdLock } from "./object.ts";
