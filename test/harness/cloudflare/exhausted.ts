// ExhaustedLock, which the test worker (worker.ts) exports and binds as EXHAUSTED: LeaseholdLock
// with fence counters that no request can bring there any more.
import type { DurableObjectStateLike } from "../../../src/backends/cloudflare/index.ts";
import { LeaseholdLock } from "../../../src/backends/cloudflare/index.ts";
import { slotKey } from "../../../src/slots.ts";

/** The semaphore whose slot 0 starts with an exhausted fence counter in ExhaustedLock. */
export const EXHAUSTED_SEMAPHORE = "exhausted-semaphore";

/**
 * LeaseholdLock as a raise to Number.MAX_SAFE_INTEGER − 1 before MAX_RAISE existed left it, which
 * no request can do now: the object's own key, and slot 0 of EXHAUSTED_SEMAPHORE, read back from
 * storage with that fence and no lease until they are saved. The storage is workerd's, read
 * through a wrapper that adds the entries.
 */
export class ExhaustedLock extends LeaseholdLock {
  constructor(state: DurableObjectStateLike, env: unknown) {
    const storage = state.storage;
    super(
      {
        blockConcurrencyWhile: (callback) => state.blockConcurrencyWhile(callback),
        storage: {
          async list(options) {
            const saved = await storage.list(options);
            for (const at of ["lock", `lock:${slotKey(EXHAUSTED_SEMAPHORE, 0)}`])
              if (!saved.has(at)) saved.set(at, { fence: Number.MAX_SAFE_INTEGER - 1, lease: null });
            return saved;
          },
          put: (key, value) => storage.put(key, value),
          delete: (key) => storage.delete(key),
          setAlarm: (time) => storage.setAlarm(time),
        },
      },
      env,
    );
  }
}
