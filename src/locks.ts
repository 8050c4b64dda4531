// createLockManager: the W3C Web Locks API (request, query) over a backend, so that code written
// for navigator.locks locks across machines (docs/web-locks.md). Its own function, so an app that
// does not use it does not ship it. Per name, one queue of this manager's requests follows the
// specification's algorithms; a request the queue grants is then an acquire of the name's mutex.
import { type Backend, canShare, type HolderInfo } from "./backend.ts";
import { inspectKey } from "./engine.ts";
import type { Lease } from "./lease.ts";
import { createMutex, type Mutex } from "./mutex.ts";
import { check, checkFunction, checkMutexOptions, checkSignal, cores, kind, optionsOf } from "./options.ts";
import type { LockMode, MutexOptions } from "./types.ts";

/**
 * Options of {@link createLockManager}: those of {@link createMutex} that hold for every name,
 * and `onError`. The lock names come with each request. All durations are milliseconds.
 */
export interface LockManagerOptions
  extends Pick<MutexOptions, "ttl" | "retryDelay" | "stopMargin" | "onEvent"> {
  /**
   * The identity the backend records for this manager's leases, and the `clientId` of its
   * {@link LockInfo}s. 1–256 characters of well-formed Unicode without control characters.
   * Default: a random UUID (one per manager).
   */
  owner?: string;
  /**
   * Called with each retryable backend failure while a request waits (the wait goes on); see
   * {@link AcquireOptions.onError}. Without it, such failures are printed with `console.error`.
   */
  onError?: (error: unknown) => void;
}

/** Options of {@link LockManager.request}, as in the Web Locks specification. */
export interface LockOptions {
  /** `"exclusive"` (the default): one holder per name. `"shared"`: readers beside readers. */
  mode?: LockMode;
  /**
   * Grant the lock only if it can be granted without waiting; otherwise the callback is called
   * with `null` (and the request resolves with its result). Default false.
   */
  ifAvailable?: boolean;
  /**
   * Refused with a `NotSupportedError`: a holder in another process cannot be stopped before the
   * thief would get in (docs/web-locks.md). Only `false` (the default) is accepted.
   */
  steal?: boolean;
  /**
   * Aborts the request while it waits: it then rejects with `signal.reason`. Ignored once the
   * callback was called.
   */
  signal?: AbortSignal;
}

/** The lock handed to a request's callback: the specification's `Lock`, with the lease's `token`, `signal` and `valid`. */
export interface Lock {
  /** The name it was requested with. */
  readonly name: string;
  /** `"exclusive"` or `"shared"`. */
  readonly mode: LockMode;
  /** The fencing token: strictly greater than every earlier token on the name. Pass it to fenced writes. */
  readonly token: number;
  /**
   * Aborts, with a {@link LeaseLostError}, when the lease is lost (before anyone else can take the
   * lock) or released: stop touching the resource then. The callback is not stopped for you.
   */
  readonly signal: AbortSignal;
  /** Whether the lease is held right now, on the local monotonic clock ({@link Lease.valid}). */
  readonly valid: boolean;
}

/** A held lock or a pending request in a {@link LockManagerSnapshot}, as in the specification. */
export interface LockInfo {
  /** The name requested. */
  name: string;
  /** Its mode. */
  mode: LockMode;
  /** The manager's `clientId` (its `owner`). */
  clientId: string;
}

/** The holder the backend reports for a name asked about with {@link LockManager.query}. Advisory. */
export interface LockHolder extends LockInfo {
  /** The holder's fencing token (for a shared lock, the newest reader's). */
  token: number;
  /** For a shared lock: how many shared leases are live (the holder shown is the newest). */
  readers?: number;
}

/** What {@link LockManager.query} reports. */
export interface LockManagerSnapshot {
  /** This manager's held locks. */
  held: LockInfo[];
  /** This manager's requests not granted yet, in request order per name. */
  pending: LockInfo[];
  /** With `names`: the backend's holder of each of those names that is held (any manager's, or a mutex's). */
  holders?: LockHolder[];
}

/** Options of {@link LockManager.query}. */
export interface QueryOptions {
  /** Also ask the backend who holds these names (one request per name). */
  names?: readonly string[];
  /** Aborts the backend requests; `query` then rejects with `signal.reason`. */
  signal?: AbortSignal;
}

/**
 * The Web Locks API over a backend: the shape of `navigator.locks`, locking across every process
 * that uses the same backend. Made by {@link createLockManager}.
 */
export interface LockManager {
  /** The `clientId` of this manager's {@link LockInfo}s: its `owner`, which the backend records. */
  readonly clientId: string;
  /**
   * Requests the lock `name` and calls `callback` with it once granted; the lock is held until the
   * callback's result settles, then released, and then the returned promise settles like that
   * result. Rejects with a `TypeError` for a callback that is no function or a bad option, a
   * `NotSupportedError` `DOMException` for a name starting with `-`, for `steal: true` and for the
   * option mixes the specification refuses, `signal.reason` when aborted before the callback
   * runs, a {@link LeaseLostError} as soon as the lease is lost while the callback runs, and a
   * {@link BackendError} when the backend fails for good.
   */
  request<T>(name: string, callback: (lock: Lock) => T): Promise<Awaited<T>>;
  /** As above, with {@link LockOptions}; without `ifAvailable: true`, the callback always gets a lock. */
  request<T>(
    name: string,
    options: LockOptions & { ifAvailable?: false },
    callback: (lock: Lock) => T,
  ): Promise<Awaited<T>>;
  /** As above; with `ifAvailable: true` the callback gets `null` when the lock is not free at once. */
  request<T>(name: string, options: LockOptions, callback: (lock: Lock | null) => T): Promise<Awaited<T>>;
  /**
   * This manager's held locks and pending requests, and with `names` the backend's holder of each
   * (advisory: it may change right after). Other managers' pending requests are not known.
   */
  query(options?: QueryOptions): Promise<LockManagerSnapshot>;
}

/** One request: its state goes queued → acquiring (sent to the backend) → held → done. */
interface Request {
  name: string;
  mode: LockMode;
  ifAvailable: boolean;
  signal: AbortSignal | undefined;
  callback: (lock: Lock | null) => unknown;
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
  state: "queued" | "acquiring" | "held" | "releasing" | "done";
  onAbort: () => void;
}

/**
 * One name's state: its mutex, the specification's lock request queue, and `active`, the held
 * lock set's locks of the name together with the requests granted by the queue and sent to the
 * backend (they count as held for the queue, so that it grants in the specification's order).
 */
interface Queue {
  mutex: Mutex;
  queue: Request[];
  active: Request[];
}

const notSupported = (message: string): DOMException =>
  new DOMException(`[leasehold] request: ${message}`, "NotSupportedError");

/** Lock name characters kept as they are in an escaped name; each other UTF-16 code unit is `+XXXX`. */
const ESCAPED = /[^A-Za-z0-9_:@-]/g;

/**
 * Creates a lock manager: the W3C Web Locks API (`request`, `query`) over `backend`, so that the
 * shape of `navigator.locks` locks across machines, with a local deadline and a fencing token
 * behind each lock. Checks every option now (a `TypeError` or `RangeError` naming it) and does no
 * I/O. Each name is the lock of the same name (`createMutex` contends with it) when it is a valid
 * lock name that does not start with `+`; any other string maps to an escaped one (docs/web-locks.md).
 *
 * @param backend Where the locks live; `mode: "shared"` needs one that can hold shared leases.
 * @param options The timing and identity of every lock; see {@link LockManagerOptions}.
 * @returns A {@link LockManager}.
 *
 * @example Readers and a writer across machines
 * ```ts
 * import { createLockManager } from "leasehold";
 * import { memory } from "leasehold/memory";
 *
 * declare function readReport(): Promise<string>; // your reads
 * declare function writeReport(fence: number, signal: AbortSignal): Promise<void>; // your writes
 *
 * const locks = createLockManager(memory()); // every process on one store shares the names
 * const text = await locks.request("report", { mode: "shared" }, () => readReport()); // beside other readers
 * await locks.request("report", (lock) => writeReport(lock.token, lock.signal)); // alone, fenced
 * ```
 */
export function createLockManager(backend: Backend, options: LockManagerOptions = {}): LockManager {
  const where = "createLockManager";
  const { onError, ...rest } = optionsOf(where, options);
  checkFunction(where, "onError", onError);
  // createMutex's options that mean nothing here: refused, not ignored (a wait is bounded by a
  // request's signal, such as AbortSignal.timeout(ms); every lock renews itself).
  for (const key of ["name", "renew", "timeout"] as const)
    check(
      !(key in rest),
      `${where}:`,
      `option ${key} is not one of createLockManager's (ttl, owner, retryDelay, stopMargin, onEvent, onError)${key === "timeout" ? "; bound a request with its signal, such as { signal: AbortSignal.timeout(ms) }" : ""}`,
    );
  // Every option but the name, checked once; each name's mutex is made with them (and one owner).
  const o = checkMutexOptions(backend, { ...rest, name: "x" }, where);
  const base = {
    ttl: o.ttl,
    owner: o.owner,
    retryDelay: o.retryDelay,
    stopMargin: o.stopMargin,
    ...(o.onEvent ? { onEvent: o.onEvent } : {}),
  };
  const clientId = o.owner;
  const queues = new Map<string, Queue>();

  /**
   * The mutex of `name`: the lock of that name when createMutex accepts it (its rule is the one
   * rule) and it does not start with `+`; else `+` and the name with each code unit but letters,
   * digits and `_ : @ -` escaped as `+XXXX` (hex): every string maps to a distinct lock.
   */
  const mutexOf = (name: string, where = "request"): Mutex => {
    if (!name.startsWith("+")) {
      try {
        return createMutex(backend, { ...base, name });
      } catch {
        // Not a lock name (the other options were checked above): escaped below.
      }
    }
    const key = `+${name.replace(ESCAPED, (c) => `+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}`)}`;
    check(
      key.length <= 255,
      `${where}:`,
      `name ${JSON.stringify(name.slice(0, 40))}... maps to a lock name of ${key.length} characters, more than 255 (each character but letters, digits and _ : @ - takes 5 once escaped)`,
      RangeError,
    );
    return createMutex(backend, { ...base, name: key });
  };

  const queueOf = (name: string): Queue => {
    let q = queues.get(name);
    if (!q) {
      q = { mutex: mutexOf(name), queue: [], active: [] };
      queues.set(name, q);
    }
    return q;
  };

  /** The specification's "grantable": first in its queue, and no held lock of the name in the way. */
  const grantable = (r: Request, q: Queue): boolean =>
    (q.queue.length === 0 || q.queue[0] === r) &&
    (r.mode === "exclusive" ? q.active.length === 0 : !q.active.some((a) => a.mode === "exclusive"));

  /** The specification's "process the lock request queue": starts each grantable request in order. */
  const processQueue = (name: string, q: Queue): void => {
    for (let r = q.queue[0]; r && grantable(r, q); r = q.queue[0]) {
      q.queue.shift();
      start(r, q);
    }
    if (q.queue.length === 0 && q.active.length === 0) queues.delete(name);
  };

  /** Takes `r` out of its queue or the held set (the request is over) and processes the queue. */
  const leave = (r: Request, q: Queue): void => {
    r.signal?.removeEventListener("abort", r.onAbort);
    const list = r.state === "queued" ? q.queue : q.active;
    const at = list.indexOf(r);
    if (at >= 0) list.splice(at, 1);
    processQueue(r.name, q);
  };

  /** Calls `callback` (never synchronously) and gives its result as a promise; a throw is a rejection. */
  const call = ({ callback }: Request, lock: Lock | null): Promise<unknown> =>
    Promise.resolve(lock).then((l) => callback(l));

  /** A request granted by its queue: an acquire of the name's mutex (one attempt for ifAvailable). */
  const start = (r: Request, q: Queue): void => {
    r.state = "acquiring";
    q.active.push(r);
    const mode = r.mode;
    const got = r.ifAvailable
      ? q.mutex.tryAcquire({ mode })
      : q.mutex.acquire({
          mode,
          ...(r.signal ? { signal: r.signal } : {}),
          ...(onError ? { onError } : {}),
        });
    got.then(
      (lease) => granted(r, q, lease),
      (error: unknown) => {
        if (r.state === "done") return; // aborted: it rejected already
        leave(r, q);
        r.state = "done";
        r.reject(error);
      },
    );
  };

  const granted = (r: Request, q: Queue, lease: Lease | null): void => {
    if (r.state === "done") {
      // Aborted after the backend granted it: the specification releases such a lock unused.
      lease?.release().catch(() => {});
      return;
    }
    if (!lease) {
      // ifAvailable, and the backend said taken: the callback gets null.
      leave(r, q);
      r.state = "done";
      call(r, null).then(r.resolve, r.reject);
      return;
    }
    r.signal?.removeEventListener("abort", r.onAbort);
    r.state = "held";
    const { signal, token } = lease;
    const lock: Lock = {
      name: r.name,
      mode: r.mode,
      token,
      signal,
      get valid() {
        return lease.valid;
      },
    };
    // Lost while the callback runs (the specification's steal, done by time or the store): the
    // lock leaves the held set and the request rejects at once with the loss; the callback goes on.
    const lost = () => {
      if (r.state !== "held") return;
      leave(r, q);
      r.state = "done";
      r.reject(signal.reason);
    };
    if (signal.aborted) queueMicrotask(lost);
    else signal.addEventListener("abort", lost, { once: true });
    // When the callback's result settles: release the lock, then settle the request with that
    // result (the specification's order). A failed release rejects a request whose callback
    // fulfilled, as mutex.run does; the store frees the lock at its ttl anyway.
    const settle = async (outcome: PromiseSettledResult<unknown>): Promise<void> => {
      if (r.state !== "held") {
        await lease.release().catch(() => {}); // lost: the request rejected already
        return;
      }
      r.state = "releasing";
      let failed: PromiseRejectedResult | undefined;
      await lease.release().catch((reason: unknown) => {
        failed = { status: "rejected", reason };
      });
      leave(r, q);
      r.state = "done";
      const end = outcome.status === "rejected" ? outcome : (failed ?? outcome);
      if (end.status === "rejected") r.reject(end.reason);
      else r.resolve(end.value);
    };
    call(r, lock).then(
      (value) => settle({ status: "fulfilled", value }),
      (reason: unknown) => settle({ status: "rejected", reason }),
    );
  };

  function request(name: unknown, ...args: unknown[]): Promise<unknown> {
    return new Promise((resolve, reject) => {
      // The WebIDL conversions first (TypeErrors), then the method's steps, in the specification's order.
      const at = "request:";
      check(args.length >= 1, at, "a name and a callback are required");
      const [options, callback] = args.length >= 2 ? args : [undefined, args[0]];
      check(typeof name === "string", at, `name must be a string, got ${kind(name)}`);
      check(
        options === undefined || options === null || typeof options === "object",
        at,
        `options must be an object, got ${kind(options)}`,
      );
      const {
        mode = "exclusive",
        ifAvailable = false,
        steal = false,
        signal,
      } = (options ?? {}) as LockOptions;
      check(
        mode === "exclusive" || mode === "shared",
        at,
        `mode must be "shared" or "exclusive", got ${typeof mode === "string" ? JSON.stringify(mode) : kind(mode)}`,
      );
      check(typeof ifAvailable === "boolean", at, `ifAvailable must be a boolean, got ${kind(ifAvailable)}`);
      check(typeof steal === "boolean", at, `steal must be a boolean, got ${kind(steal)}`);
      checkSignal("request", signal);
      check(typeof callback === "function", at, `callback must be a function, got ${kind(callback)}`);
      if (name.startsWith("-"))
        throw notSupported(
          `names starting with "-" are reserved by the Web Locks specification, got ${JSON.stringify(name)}`,
        );
      if (steal && ifAvailable) throw notSupported("steal and ifAvailable cannot both be true");
      if (steal && mode !== "exclusive") throw notSupported('steal needs mode "exclusive"');
      if (signal && (steal || ifAvailable))
        throw notSupported("signal cannot be given with steal or ifAvailable");
      if (steal)
        throw notSupported(
          "steal is not supported: the holder may be another process, which cannot be stopped before the thief would get in, so a steal would put two live holders on the lock; wait with a signal instead (the holder's lease ends at its ttl if it stops renewing)",
        );
      signal?.throwIfAborted();
      check(
        mode === "exclusive" || canShare(backend),
        at,
        `the ${backend.name} backend cannot hold shared leases; mode "shared" needs one that can (docs/DESIGN.md §18)`,
      );
      const q = queueOf(name);
      const r: Request = {
        name,
        mode,
        ifAvailable,
        signal,
        callback: callback as Request["callback"],
        resolve,
        reject,
        state: "queued",
        onAbort: () => {
          if (r.state !== "queued" && r.state !== "acquiring") return;
          leave(r, q);
          r.state = "done";
          reject(signal?.reason);
        },
      };
      signal?.addEventListener("abort", r.onAbort, { once: true });
      if (ifAvailable && !grantable(r, q)) {
        r.state = "done";
        call(r, null).then(resolve, reject);
        return;
      }
      q.queue.push(r);
      processQueue(name, q);
    });
  }

  const info = (r: Request): LockInfo => ({ name: r.name, mode: r.mode, clientId });

  const holderOf = (name: string, h: HolderInfo | null): LockHolder[] =>
    h
      ? [
          {
            name,
            mode: h.readers ? "shared" : "exclusive",
            clientId: h.owner,
            token: h.token,
            ...(h.readers ? { readers: h.readers } : {}),
          },
        ]
      : [];

  const query = async (options?: QueryOptions): Promise<LockManagerSnapshot> => {
    const { names, signal } = optionsOf("query", options);
    checkSignal("query", signal);
    check(
      names === undefined || (Array.isArray(names) && names.every((n) => typeof n === "string")),
      "query:",
      "names must be an array of strings",
    );
    const held: LockInfo[] = [];
    const pending: LockInfo[] = [];
    for (const q of queues.values()) {
      for (const r of q.active) (r.state === "acquiring" ? pending : held).push(info(r));
      for (const r of q.queue) pending.push(info(r));
    }
    if (!names) return { held, pending };
    signal?.throwIfAborted();
    const asked = await Promise.all(
      names.map(async (name) => {
        const mutex = queues.get(name)?.mutex ?? mutexOf(name, "query");
        return holderOf(name, await inspectKey(cores.get(mutex)!, mutex.name, signal));
      }),
    );
    return { held, pending, holders: asked.flat() };
  };

  return { clientId, request: request as LockManager["request"], query };
}
