/**
 * leasehold: a distributed mutex, semaphore and leader election for every runtime with `fetch`.
 * Backends live in their own entry points, one per store: `leasehold/memory`, `leasehold/upstash`,
 * `leasehold/azure-blob`, `leasehold/redis`, `leasehold/postgres`, `leasehold/quorum`,
 * `leasehold/deno-kv`, `leasehold/cloudflare` and `leasehold/dynamodb` (the README's install
 * table says what each is and where it runs); `leasehold/testing` checks a backend of your own.
 *
 * @module
 */
export type {
  AcquireAny,
  AcquireAnyRequest,
  AcquireAnyResult,
  AcquireGranted,
  AcquireRefused,
  AcquireRequest,
  AcquireResult,
  Backend,
  BackendBase,
  Capabilities,
  Close,
  CloseOptions,
  CompleteRequest,
  FetchLike,
  FireHolder,
  FireRecord,
  HolderInfo,
  InspectRequest,
  KeyRequest,
  ObservedExpiry,
  ObservedRefusal,
  QueuedAcquire,
  QueuedAcquireRequest,
  QueuedHolderInfo,
  RaiseFence,
  RaiseFenceRequest,
  ReleaseAnyRequest,
  ReleaseNotices,
  ReleaseRequest,
  RenewMany,
  RenewManyRequest,
  RenewRequest,
  SharedLocks,
} from "./backend.ts";
export { capabilities } from "./backend.ts";
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
export {
  createLockManager,
  type Lock,
  type LockHolder,
  type LockInfo,
  type LockManager,
  type LockManagerOptions,
  type LockManagerSnapshot,
  type LockOptions,
  type QueryOptions,
} from "./locks.ts";
export { createMutex, type Mutex } from "./mutex.ts";
export { type Fire, nearestTick, type OnceOptions, type OnceResult, runOnce } from "./once.ts";
export {
  createSemaphore,
  type Permit,
  type Semaphore,
  type SemaphoreOptions,
  type SlotHolder,
} from "./semaphore.ts";
/**
 * For a backend of your own with `complete` (FireRecord): the lock key whose fence counter the
 * leases of `key` draw their tokens from, the mutex's name for a fire's key (docs/DESIGN.md §17).
 */
export { counterOf } from "./slots.ts";
export type { AcquireOptions, LockMode, ModeOption, MutexAcquireOptions, MutexOptions } from "./types.ts";
