/**
 * leasehold: a distributed mutex, semaphore and leader election for every runtime with `fetch`.
 * Backends live in their own entry points, one per store: `leasehold/memory`, `leasehold/upstash`,
 * `leasehold/azure-blob`, `leasehold/redis`, `leasehold/postgres`, `leasehold/quorum`,
 * `leasehold/deno-kv`, `leasehold/cloudflare` and `leasehold/dynamodb` (the README's install
 * table says what each is and where it runs); `leasehold/testing` checks a backend of your own.
 *
 * @module
 */
export type { AcquireResult, Backend, FetchLike, HolderInfo } from "./backend.ts";
export {
  createElection,
  type Election,
  type Health,
  type LeadershipChange,
  type LeadOptions,
  type WatchOptions,
} from "./election.ts";
export {
  BackendError,
  isLockError,
  LeaseLostError,
  LockError,
  type LockErrorCode,
  LockTimeoutError,
} from "./errors.ts";
export type { LockEvent, LockEventBody, LockEventCode, LossReason } from "./events.ts";
export type { Lease } from "./lease.ts";
export { type AcquireOptions, createMutex, type Mutex, type MutexOptions } from "./mutex.ts";
export {
  createSemaphore,
  MAX_LIMIT,
  type Permit,
  type Semaphore,
  type SemaphoreOptions,
  type SlotHolder,
  slotKey,
} from "./semaphore.ts";
