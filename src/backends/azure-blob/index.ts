// One long file for one closure: the backend's state (fence memory, blob type) and its fence step.
// (Options, requests and credentials are in their own files.)
/**
 * The Azure Blob Storage backend: one blob per lock name, held with a blob lease. Speaks the
 * REST API over `fetch` only (SharedKey signed with WebCrypto, SAS or bearer tokens), so it runs
 * on Node, Bun, Deno and Cloudflare Workers with no dependency.
 *
 * Each lock is a zero-length blob named `prefix + name`: a page blob where the account allows
 * it, else a block blob (`blobType`). Acquire takes a blob lease with the nonce as its id while
 * reading the blob (HEAD: type, ETag, owner, counter), then fences under that lease:
 *
 * - page blob: increments the sequence number (the fencing token, returned by the same call),
 *   and writes the owner to the metadata (`owner`, percent-encoded) only when it changed;
 * - block blob: writes `fence` = counter + 1 and `owner` to the metadata with `If-Match` on the
 *   ETag read, so the counter only ever grows.
 *
 * Either way an acquire costs two round trips; renew and release cost one, `inspect` one HEAD.
 *
 * A fire of runOnce (`complete`, docs/DESIGN.md §17) is a blob of its own whose token is drawn from
 * its mutex name's blob (its counter, without its lease) and kept in its metadata with the owner;
 * its record is that metadata with `done` (the retain) added, written under its lease, which then
 * goes back: it lasts from the write's Last-Modified by the server's clock. A release deletes the
 * fire's blob; completions delete the name's fire blobs that hold nothing any more.
 *
 * @module
 */
import type { AcquireRefused, AcquireResult, Backend, HolderInfo } from "../../backend.ts";
import { BackendError, fenceExhausted } from "../../errors.ts";
import { linkedSignal } from "../../signals.ts";
import { counterOf } from "../../slots.ts";
import type { HttpReply } from "../shared/http.ts";
import { checkRetain } from "../shared/options.ts";
import { typeError } from "./auth.ts";
import {
  type AzureBlobOptions,
  blobPath,
  checkNonce,
  checkTtl,
  encodeOwner,
  MAX_TTL,
  MIN_TTL,
  NAME,
  resolveOptions,
} from "./options.ts";
import {
  type BlobState,
  blobState,
  container as containerOf,
  decimal,
  errorCode,
  notOurs,
  recordLeft,
  refusedBy,
  xmlText,
} from "./rest.ts";

export type { TokenCredentialLike } from "./auth.ts";
export type { AzureBlobCommonOptions, AzureBlobCredentials, AzureBlobOptions } from "./options.ts";

/** What the last fence step learned of a blob, and the nonce of the lease it fenced. */
type Fenced = BlobState & { nonce: string };

/** How many blobs one sweep of a name's expired fire blobs lists (each with its metadata: an owner may take 4 KB). */
const SWEEP = 8;

/** The owner as acquired, from the metadata as stored. */
function decodeOwner(stored: string | null): string {
  try {
    return decodeURIComponent(stored ?? "");
  } catch {
    return stored ?? "";
  }
}

/** The refusal of an acquire on a blob that holds a live record of a completed fire. */
function doneOf(state: BlobState): AcquireRefused {
  return { ok: false, done: { owner: decodeOwner(state.owner), token: state.counter } };
}

/** A retryable failure of `op` on lock `key`: an answer it cannot use (`status`), or a blob that kept changing. */
function retryable(op: string, key: string, problem: string, status?: number): BackendError {
  return new BackendError(`${op} ${JSON.stringify(key)}: ${problem}`, {
    backend: NAME,
    retryable: true,
    ...(status === undefined ? {} : { status }),
  });
}

/** An answer to a conditional write meaning the blob changed since it was read. */
const stale = (r: HttpReply) => r.status === 412 && errorCode(r) === "ConditionNotMet";

/**
 * An Azure Blob lease backend for {@link createMutex}. Lock `name` lives in the blob
 * `prefix + name` of `container`; the ttl must be 15–60 s (`ttlRange`), Azure's lease range, and
 * is sent as `ceil(ttl / 1000)` seconds. A renewal keeps the duration set at acquire.
 *
 * Requests per operation (round trips, requests): acquire 2 RT — the lease and a HEAD together,
 * then the fence: a page blob 3 requests when the owner is the same as last time, 4 when it
 * changed (the owner write goes with the fence); a block blob 3. Plus the container and the blob
 * the first time, and one more round trip each for a HEAD and the writes again when another
 * holder changed the blob between our HEAD and our lease. A contended acquire: 1 RT, 2 requests. Renew 1, release 1, inspect 1 HEAD.
 * A contended acquire does not report the holder or a `retryAfter`. A fire's key: a late instance's
 * "done" and a running fire's refusal 1 HEAD; a run 5 RT (6 requests) for a new fire, 4 (5) for
 * one whose blob is there; `complete` 2 RT (3 requests: the record, then the release beside a
 * List of the name's fire blobs) plus one DELETE per blob swept; `release` 1 (a DELETE of the
 * fire's blob under its lease); raiseFence 3 RT (the lease checked, the name's counter raised,
 * then the fire's token), answering false while the name is leased. A fire cannot start while a
 * lease on its mutex's name is held (Azure lets only the lease's holder write the counter).
 *
 * Options are checked here: a missing or invalid `container` or `blobType`, no or several
 * credential forms, an option that does not go with the form given (such as `accountName` beside
 * a `sasToken`), a malformed connection string, key or SAS throw a `TypeError` that names the
 * option and never quotes the secret. An account that refuses the blob type asked for is a
 * non-retryable {@link BackendError} naming the account kind.
 *
 * @param options The container, one credential form, and `prefix`, `createContainer`, `blobType`, `fetch`.
 * @returns A {@link Backend} named `"azure-blob"` with `ttlRange` `[15_000, 60_000]`.
 *
 * @example Connection string
 * ```ts
 * import { createMutex } from "leasehold";
 * import { azureBlob } from "leasehold/azure-blob";
 *
 * const backend = azureBlob({ connectionString: process.env.AZURE_STORAGE_CONNECTION_STRING!, container: "locks" });
 * const mutex = createMutex(backend, { name: "nightly-report", ttl: 30_000 });
 * await using lease = await mutex.acquire();
 * ```
 *
 * @example DefaultAzureCredential
 * ```ts
 * import { DefaultAzureCredential } from "@azure/identity";
 * import { azureBlob } from "leasehold/azure-blob";
 *
 * const backend = azureBlob({
 *   accountUrl: "https://myaccount.blob.core.windows.net",
 *   credential: new DefaultAzureCredential(),
 *   container: "locks",
 * });
 * ```
 *
 * @example Azurite with SAS
 * ```ts
 * import { azureBlob } from "leasehold/azure-blob";
 *
 * declare const sasToken: string; // "sv=...&sig=...", with read, write and create
 *
 * const backend = azureBlob({ containerUrl: "http://127.0.0.1:10000/devstoreaccount1/locks", sasToken });
 * ```
 */
export function azureBlob(options: AzureBlobOptions): Backend {
  const resolved = resolveOptions(options);
  const { container, prefix, createContainer, blobType: fixedType } = resolved;
  const { call, httpError } = containerOf(resolved);
  // The type new lock blobs are created as; unset blobType starts with page and switches once.
  let createPage = fixedType !== "block";
  let pageRefusal: string | undefined; // why, when unset blobType switched to block blobs
  // What the last fence step of this backend learned per lock name (the last 4 096 names), so
  // that raiseFence needs no HEAD: the blob's type and, for a block blob, its ETag and counter.
  const fenced = new Map<string, Fenced>();
  /** Whether the credentials may delete a blob: a release of a fire deletes its blob until a 403 says no. */
  let mayDelete = true;
  /** Where the next sweep of a name's fire blobs starts listing (the last listing's marker). */
  const sweepFrom = new Map<string, string>();
  /**
   * The nonces of leases this backend gives back on its own, until a release is answered (the
   * last 4 096): a completed fire's lease, and one acquire was granted and then refused (the blob
   * holds a record) or failed to fence. Until then the lease is on the blob, and Azure would renew
   * it or write under it: renew and complete answer false for them.
   */
  const unreleased = new Map<string, string>();
  /** Remembers what a fence step left, in a map of at most 4 096 names. */
  const remember = <V>(map: Map<string, V>, key: string, value: V) => {
    map.delete(key);
    map.set(key, value);
    if (map.size > 4_096) map.delete(map.keys().next().value as string);
  };

  /** The request target of lock `key`'s blob: `/` + its path. */
  const pathOf = (key: string): string => `/${blobPath(prefix + key)}`;
  /** A Lease Blob request; `seconds` makes it an acquire, with `nonce` as the proposed lease id. */
  const lease = (path: string, action: string, nonce: string, signal?: AbortSignal, seconds?: number) =>
    call(
      "PUT",
      `${path}?comp=lease`,
      seconds === undefined
        ? { "x-ms-lease-action": action, "x-ms-lease-id": nonce }
        : {
            "x-ms-lease-action": action,
            "x-ms-lease-duration": `${seconds}`,
            "x-ms-proposed-lease-id": nonce,
          },
      signal,
    );
  const head = (path: string, signal: AbortSignal | undefined) => call("HEAD", path, {}, signal);
  /** A HEAD that must answer: the blob's state, or undefined when there is no blob (404). */
  async function read(op: string, key: string, path: string, signal: AbortSignal | undefined) {
    const r = await head(path, signal);
    if (r.status === 404) return undefined;
    if (r.status !== 200) throw httpError(op, key, r);
    return blobState(r, true, counterOf(key) !== key)!;
  }
  /**
   * Gives back the lease `nonce` on `key` that is no lease to its holder any more (twice at most,
   * 5 s each, and within `signal`); until a release is answered, `unreleased` keeps the nonce.
   * Never throws.
   */
  async function giveBack(key: string, path: string, nonce: string, signal?: AbortSignal): Promise<void> {
    remember(unreleased, key, nonce);
    for (let attempt = 0; attempt < 2 && !signal?.aborted; attempt++) {
      const bound = linkedSignal([signal], 5_000);
      const r = await lease(path, "release", nonce, bound.signal)
        .catch(() => undefined)
        .finally(bound.done);
      if (r !== undefined && (r.status === 200 || notOurs(r))) {
        if (unreleased.get(key) === nonce) unreleased.delete(key);
        return;
      }
    }
  }

  /** Creates what a 404 said is missing: the container (when allowed), then the lock blob. */
  async function create(
    key: string,
    path: string,
    code: string,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    if (code === "ContainerNotFound") {
      if (!createContainer) {
        throw new BackendError(
          `container ${JSON.stringify(container)} does not exist: create it, or pass createContainer: true`,
          { backend: NAME, status: 404, retryable: false },
        );
      }
      const r = await call("PUT", "?restype=container", {}, signal);
      if (r.status !== 201 && !(r.status === 409 && errorCode(r) === "ContainerAlreadyExists")) {
        throw httpError("create container for", key, r);
      }
    } else if (code !== "BlobNotFound") {
      return;
    }
    const page = createPage;
    const r = await call(
      "PUT",
      path,
      page
        ? { "x-ms-blob-type": "PageBlob", "x-ms-blob-content-length": "0", "if-none-match": "*" }
        : { "x-ms-blob-type": "BlockBlob", "if-none-match": "*" },
      signal,
    );
    const rc = errorCode(r);
    // Only these mean "it is there already" (made by a contender, maybe leased by now). Any
    // other 409 is a failure with its code: an account refusing the type, a policy, ...
    if (
      r.status === 201 ||
      (r.status === 409 && rc === "BlobAlreadyExists") ||
      (r.status === 412 && (rc === "ConditionNotMet" || rc.startsWith("Lease")))
    ) {
      return;
    }
    if (r.status === 404 && rc === "ContainerNotFound") return create(key, path, rc, signal);
    const kind = refusedBy(r, page);
    if (kind === undefined) throw httpError("create blob for", key, r);
    const refusal = `${page ? "page" : "block"} blobs (HTTP ${r.status} ${rc}: ${kind})`;
    if (page && fixedType === undefined) {
      pageRefusal = refusal;
      createPage = false; // this account has no page blobs: block blobs from now on
      return create(key, path, "BlobNotFound", signal);
    }
    throw new BackendError(
      `create blob for ${JSON.stringify(key)}: the storage account refuses ${
        fixedType
          ? `${refusal}; use blobType "${page ? "block" : "page"}", or leave blobType unset to choose automatically`
          : `${pageRefusal} and ${refusal}; use a general-purpose v2 or a premium block blob account`
      }`,
      { backend: NAME, status: r.status, retryable: false },
    );
  }

  /**
   * The fence step under our lease `nonce`, for acquire (`raise` undefined: the token is one more
   * than the blob's) and raiseFence (the token becomes at least `raise`): the token, or null when
   * the lease is not ours any more. `state` comes from the HEAD sent with the lease, or from the
   * last fence step, and may be out of date, so every write that relies on it is conditional on
   * its ETag; 412 ConditionNotMet means another holder wrote in between, and we read again (now
   * under our lease, so nobody else can write) and write again. The fence follows the existing
   * blob's type, whatever `blobType` says.
   */
  async function fence(
    key: string,
    path: string,
    nonce: string,
    owner: string,
    state: BlobState | undefined,
    signal: AbortSignal | undefined,
    raise?: number,
  ): Promise<number | null | AcquireRefused> {
    const op = raise === undefined ? "fence" : "raise fence for";
    // An acquire's token past the safe range: the counter can grant no more (docs/DESIGN.md
    // §5.1). Thrown before a block blob's write, after a page blob's increment; either way
    // acquire gives the lease back.
    const checkExhausted = (token: number) => {
      if (raise === undefined && Number.isInteger(token) && token > Number.MAX_SAFE_INTEGER)
        throw fenceExhausted(NAME, key);
    };
    const write = (query: string, h: Record<string, string>) =>
      call("PUT", `${path}?${query}`, { "x-ms-lease-id": nonce, ...h }, signal);
    for (let attempt = 0; attempt < 3; attempt++) {
      signal?.throwIfAborted(); // (a fetch need not reject at once when given an aborted signal)
      state ??= await read("read", key, path, signal);
      if (state === undefined) return null;
      if (state.done !== undefined) return doneOf(state);
      let token: number;
      let replies: HttpReply[];
      // A fire's blob keeps its token in the metadata (raiseFence only: its acquire is fireFence).
      if (state.page && counterOf(key) === key) {
        // Page blob: the token is the sequence number, set by Set Blob Properties (acquire: + 1;
        // raiseFence: max(itself, raise)), which makes no blob version on an account with
        // versioning. Set Blob Metadata does make one, so acquire writes the owner only when it
        // changed (raiseFence leaves it alone); when it did not, the increment is conditional on
        // the HEAD's ETag, so an owner written by someone else since is caught.
        const same = state.owner === owner && state.etag !== "" && !state.record;
        const increment = write(
          "comp=properties",
          raise !== undefined
            ? { "x-ms-sequence-number-action": "max", "x-ms-blob-sequence-number": String(raise) }
            : same
              ? { "x-ms-sequence-number-action": "increment", "if-match": state.etag }
              : { "x-ms-sequence-number-action": "increment" },
        );
        // Set Blob Metadata replaces all metadata. On a blob whose type the HEAD did not name
        // (maybe a block blob, its counter in the metadata) it waits for the increment, which
        // only a page blob accepts; on a known page blob both go out together.
        const setOwner = () => write("comp=metadata", { "x-ms-meta-owner": owner });
        if (same || raise !== undefined) replies = [await increment];
        else if (state.known) replies = await Promise.all([increment, setOwner()]);
        else {
          const incremented = await increment;
          replies = incremented.status === 200 ? [incremented, await setOwner()] : [incremented];
        }
        token = raise ?? decimal(replies[0]!, "x-ms-blob-sequence-number");
        checkExhausted(token);
      } else {
        // Block blob: the counter (+ 1, or at least `raise`) and the owner in one metadata write,
        // conditional on the ETag the counter was read with, so the counter never goes back nor
        // repeats.
        token = raise === undefined ? state.counter + 1 : Math.max(raise, state.counter);
        checkExhausted(token);
        if (!Number.isSafeInteger(token) || state.etag === "") {
          throw retryable(op, key, "the blob has no usable ETag or fence counter", 200);
        }
        replies = [
          await write("comp=metadata", {
            "if-match": state.etag,
            "x-ms-meta-fence": String(token),
            "x-ms-meta-owner": owner,
          }),
        ];
      }
      // Whichever write failed, the fence step failed: the error names the step and the answer.
      if (replies.some(notOurs)) return null;
      const bad = replies.find((r) => r.status !== 200 && !stale(r));
      if (bad) throw httpError(op, key, bad);
      if (replies.some(stale)) {
        state = undefined;
        continue;
      }
      if (!(Number.isSafeInteger(token) && token > 0)) {
        throw retryable(op, key, "the reply has no sequence number", 200);
      }
      // For raiseFence and complete: the blob's type and, for a block blob, the ETag and counter it has now.
      remember(fenced, key, {
        ...state,
        known: true,
        etag: replies[0]!.header("etag") ?? "",
        owner,
        counter: token,
        record: false,
        nonce,
      });
      return token;
    }
    throw retryable(op, key, "the blob kept changing under our lease");
  }

  /**
   * The next token of mutex name `name`'s counter, for its fire `key` (counterOf, docs/DESIGN.md
   * §17): the name's lock blob's own counter, taken without its lease (a page blob's sequence number
   * incremented by the server; a block blob's `fence` metadata written with `If-Match` on the
   * ETag it was read with, the owner kept), so the fires and plain leases of a name share it.
   * With `raise` (a fire's raiseFence), the counter becomes at least `raise` instead (a page
   * blob's sequence number by `max`; a block blob's written only when below it): the answer is
   * then the counter, at least `raise`. Null when a lease on the name is held (Azure lets only its
   * holder write the blob), or when a block blob holds a live record of a plain `complete` (its
   * metadata would be rewritten: the record's end, or `done` itself).
   */
  async function draw(
    key: string,
    name: string,
    signal: AbortSignal | undefined,
    raise?: number,
  ): Promise<number | null> {
    const path = pathOf(name);
    const op = `${raise === undefined ? "draw a token from" : "raise the counter of"} ${JSON.stringify(name)} for`;
    let page = fenced.get(name)?.page ?? createPage;
    let refused: HttpReply | undefined; // a page increment's 400: the blob may be a block blob
    for (let attempt = 0; attempt < 4; attempt++) {
      signal?.throwIfAborted();
      let r: HttpReply;
      let token: number;
      if (page) {
        r = await call(
          "PUT",
          `${path}?comp=properties`,
          raise === undefined
            ? { "x-ms-sequence-number-action": "increment" }
            : { "x-ms-sequence-number-action": "max", "x-ms-blob-sequence-number": String(raise) },
          signal,
        );
        token = decimal(r, "x-ms-blob-sequence-number");
      } else {
        const state = await read(op, key, path, signal);
        if (state === undefined) {
          await create(name, path, "BlobNotFound", signal);
          continue;
        }
        if (state.page) {
          if (refused) throw httpError(op, key, refused);
          page = true;
          continue;
        }
        if (state.leased || state.done !== undefined) return null;
        if (raise !== undefined && state.counter >= raise) return state.counter;
        token = raise ?? state.counter + 1;
        if (!Number.isSafeInteger(token) || state.etag === "") {
          if (Number.isInteger(token) && token > Number.MAX_SAFE_INTEGER) throw fenceExhausted(NAME, key);
          throw retryable(op, key, "the blob has no usable ETag or fence counter", 200);
        }
        const owner: Record<string, string> = state.owner === null ? {} : { "x-ms-meta-owner": state.owner };
        r = await call(
          "PUT",
          `${path}?comp=metadata`,
          { "if-match": state.etag, "x-ms-meta-fence": String(token), ...owner },
          signal,
        );
      }
      if (r.status === 200) {
        if (raise === undefined && token > Number.MAX_SAFE_INTEGER) throw fenceExhausted(NAME, key);
        if (Number.isSafeInteger(token) && token > 0) return token;
        throw retryable(op, key, "the reply has no sequence number", 200);
      }
      if (r.status === 404) await create(name, path, errorCode(r), signal);
      else if (notOurs(r)) return null;
      else if (page && r.status === 400) {
        refused = r;
        page = false;
      } else if (!stale(r)) throw httpError(op, key, r);
    }
    throw retryable(op, key, "the blob kept changing");
  }

  /**
   * A fire's fence step under our lease `nonce` (its acquire; raiseFence uses {@link fence}): the
   * next token of the mutex name's counter ({@link draw}), then the owner and that token written to
   * the fire's blob's metadata with `If-Match` on the ETag of `state` (the HEAD sent with the lease),
   * so a record written after that HEAD is never overwritten: the blob is read again (under our
   * lease now) and its record answered. The token, a done refusal, or null when the lease is not
   * ours any more or the name's lease is held by someone.
   */
  async function fireFence(
    key: string,
    path: string,
    nonce: string,
    owner: string,
    state: BlobState | undefined,
    signal: AbortSignal | undefined,
  ): Promise<number | null | AcquireRefused> {
    for (let attempt = 0; attempt < 3; attempt++) {
      signal?.throwIfAborted();
      state ??= await read("read", key, path, signal);
      if (state === undefined) return null;
      if (state.done !== undefined) return doneOf(state);
      if (state.etag === "") {
        throw retryable("fence", key, "the blob has no usable ETag", 200);
      }
      const token = await draw(key, counterOf(key), signal);
      if (token === null) return null;
      const r = await call(
        "PUT",
        `${path}?comp=metadata`,
        {
          "x-ms-lease-id": nonce,
          "if-match": state.etag,
          "x-ms-meta-fence": String(token),
          "x-ms-meta-owner": owner,
        },
        signal,
      );
      if (r.status === 200) {
        const etag = r.header("etag") ?? "";
        remember(fenced, key, { ...state, known: true, etag, owner, counter: token, record: false, nonce });
        return token;
      }
      if (notOurs(r)) return null;
      if (!stale(r)) throw httpError("fence", key, r);
      state = undefined;
    }
    throw retryable("fence", key, "the blob kept changing under our lease");
  }

  /**
   * Deletes the fire blobs of mutex name `name` that hold nothing: no lease and no live record
   * (expired, or released without one), each with `If-Match` on the ETag listed, so a blob taken or
   * written since stays. Lists {@link SWEEP} of them per call (List Blobs with the prefix
   * `name:fire` and their metadata), starting where the last listing of the name stopped.
   * Best effort: a failure leaves them for the next sweep.
   */
  async function sweep(name: string, signal: AbortSignal | undefined): Promise<void> {
    const marker = sweepFrom.get(name);
    const r = await call(
      "GET",
      `?restype=container&comp=list&include=metadata&maxresults=${SWEEP}&prefix=${encodeURIComponent(
        `${prefix}${name}:fire`,
      )}${marker === undefined ? "" : `&marker=${encodeURIComponent(marker)}`}`,
      {},
      signal,
    );
    if (r.status !== 200) return;
    const next = /<NextMarker>([^<]+)<\/NextMarker>/.exec(r.body)?.[1];
    if (next === undefined) sweepFrom.delete(name);
    else remember(sweepFrom, name, xmlText(next));
    const gone: Promise<unknown>[] = [];
    for (const [, blob = ""] of r.body.matchAll(/<Blob>([\s\S]*?)<\/Blob>/g)) {
      const field = (tag: string): string | null => {
        const m = new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(blob);
        return m ? xmlText(m[1]!) : null;
      };
      const blobName = field("Name") ?? ""; // (a name Azure had to encode has <Name Encoded="true">: kept)
      const key = blobName.slice(prefix.length);
      const etag = field("Etag");
      if (!blobName.startsWith(prefix) || key === name || counterOf(key) !== name || etag === null) continue;
      if (/^(leased|breaking)$/.test(field("LeaseState") ?? "")) continue;
      const done = /<Metadata>[\s\S]*?<done>([^<]*)<\/done>[\s\S]*?<\/Metadata>/.exec(blob)?.[1] ?? null;
      if (recordLeft(done, field("Last-Modified"), r.header("date")) !== undefined) continue;
      const ifMatch = etag.startsWith('"') ? etag : `"${etag}"`;
      gone.push(call("DELETE", pathOf(key), { "if-match": ifMatch }, signal).catch(() => {}));
    }
    await Promise.all(gone);
  }

  return {
    name: NAME,
    ttlRange: [MIN_TTL, MAX_TTL],

    async acquire({ key, owner, nonce, ttl, signal }): Promise<AcquireResult> {
      checkTtl(ttl);
      checkNonce(nonce);
      const path = pathOf(key);
      const ownerValue = encodeOwner(owner);
      const fire = counterOf(key) !== key;
      if (fire) {
        // A fire's blob is read first: a late instance's "done" (or a running fire's refusal) is
        // then one request; a new fire's blob is made before its lease is asked for.
        const r = await head(path, signal);
        if (r.status === 404) await create(key, path, errorCode(r), signal);
        else if (r.status !== 200) throw httpError("acquire", key, r);
        else {
          const seen = blobState(r, true, true)!;
          if (seen.done !== undefined) return doneOf(seen);
          if (seen.leased) return { ok: false };
        }
      }
      let state: BlobState | undefined;
      for (let attempt = 0; ; attempt++) {
        // The lease and a HEAD go out together. A lease action leaves the ETag alone, so once the
        // lease is ours the HEAD still describes the blob, unless another holder wrote it between
        // the two: the fence step's If-Match catches that. A refused lease waits for the HEAD too,
        // to tell a completed fire's record (its lease held for a moment) from a holder.
        const granted = lease(path, "acquire", nonce, signal, Math.ceil(ttl / 1000));
        const described = head(path, signal);
        described.catch(() => {}); // ignored when the lease failed
        const seen = async () => {
          const h = await described.catch(() => undefined);
          return h?.status === 200 ? blobState(h, false, fire) : undefined;
        };
        const r = await granted;
        if (r.status === 201 || r.status === 200) {
          state = await seen();
          break;
        }
        if (r.status === 409 && errorCode(r).startsWith("Lease")) {
          const held = await seen();
          return held?.done === undefined ? { ok: false } : doneOf(held);
        }
        if (r.status !== 404 || attempt === 2) throw httpError("acquire", key, r);
        await create(key, path, errorCode(r), signal);
      }
      // The lease is ours. When it turns out lost or the blob holds a record, and on any failure,
      // give it back in the background: the caller's time bound must not wait for that.
      let step: number | null | AcquireRefused = null;
      try {
        step =
          state?.done !== undefined
            ? doneOf(state)
            : await (fire ? fireFence : fence)(key, path, nonce, ownerValue, state, signal);
      } finally {
        if (typeof step !== "number") void giveBack(key, path, nonce);
      }
      return typeof step === "number" ? { ok: true, token: step } : (step ?? { ok: false });
    },

    async renew({ key, nonce, ttl, signal }): Promise<boolean> {
      checkTtl(ttl);
      checkNonce(nonce);
      if (unreleased.get(key) === nonce) {
        // Not a lease any more (a completed fire's, or a refused grant's): given back once more.
        void giveBack(key, pathOf(key), nonce);
        return false;
      }
      const r = await lease(pathOf(key), "renew", nonce, signal);
      if (r.status === 200) return true;
      if (notOurs(r)) return false;
      throw httpError("renew", key, r);
    },

    async release({ key, nonce, signal }): Promise<void> {
      checkNonce(nonce);
      const path = pathOf(key);
      // A fire's blob holds no counter (its mutex name's blob does): released, it is deleted under
      // its lease in the same one request, so a fire that keeps failing leaves nothing behind.
      // Credentials without delete permission (a SAS without `d`) get a 403: from then on this
      // backend releases fires' leases as it does plain ones, and complete's sweep cannot delete.
      if (counterOf(key) !== key && mayDelete) {
        fenced.delete(key);
        const r = await call("DELETE", path, { "x-ms-lease-id": nonce }, signal);
        if (r.status === 202 || notOurs(r)) return;
        if (r.status !== 403 || errorCode(r) !== "AuthorizationPermissionMismatch")
          throw httpError("release", key, r);
        mayDelete = false;
      }
      const r = await lease(path, "release", nonce, signal);
      if (r.status === 200 || notOurs(r)) return;
      throw httpError("release", key, r);
    },

    async raiseFence({ key, owner, nonce, token, signal }): Promise<boolean> {
      checkNonce(nonce);
      if (!(Number.isSafeInteger(token) && token > 0)) typeError("token must be a positive integer");
      // A fire's token comes from its mutex name's counter: that is raised first (without the
      // name's lease; refused while someone holds it), so the fire's token is never above it. Only
      // the fire's holder may raise it: a lease change to the same id is answered only to it, and
      // changes nothing (not the lease's end, nor the ETag).
      const name = counterOf(key);
      if (name !== key) {
        const path = pathOf(key);
        const r = await call(
          "PUT",
          `${path}?comp=lease`,
          { "x-ms-lease-action": "change", "x-ms-lease-id": nonce, "x-ms-proposed-lease-id": nonce },
          signal,
        );
        if (notOurs(r)) return false;
        if (r.status !== 200) throw httpError("raise fence for", key, r);
        if ((await draw(key, name, signal, token)) === null) return false;
      }
      // A block blob without a known ETag is read again (a HEAD) before its counter is written.
      const blob = fenced.get(key);
      const known = blob?.page || blob?.etag ? blob : undefined;
      return (
        typeof (await fence(key, pathOf(key), nonce, encodeOwner(owner), known, signal, token)) === "number"
      );
    },

    async inspect({ key, signal }): Promise<HolderInfo | null> {
      const blob = await read("inspect", key, pathOf(key), signal);
      if (blob === undefined || (!blob.leased && blob.done === undefined)) return null;
      const holder = {
        owner: decodeOwner(blob.owner),
        token: Number.isSafeInteger(blob.counter) ? blob.counter : 0,
      };
      return blob.done === undefined ? holder : { ...holder, ttlLeft: blob.done, done: true };
    },

    // The record is the blob's metadata with `done` (the retain) added, written under the lease,
    // so it lasts `retain` from its Last-Modified by the server's clock; then the lease is given
    // back and, for a fire, expired fire blobs of its name are swept (neither can undo the record).
    async complete({ key, nonce, retain, signal }): Promise<boolean> {
      checkNonce(nonce);
      checkRetain(`[${NAME}]`, retain);
      const path = pathOf(key);
      if (unreleased.get(key) === nonce) return false; // completed already, or never a lease
      const last = fenced.get(key);
      const state = last?.nonce === nonce ? last : await read("complete", key, path, signal);
      if (state === undefined) return false;
      const name = counterOf(key);
      const h: Record<string, string> = { "x-ms-lease-id": nonce, "x-ms-meta-done": String(retain) };
      if (state.owner !== null) h["x-ms-meta-owner"] = state.owner;
      if (!state.page || name !== key) h["x-ms-meta-fence"] = String(state.counter);
      const r = await call("PUT", `${path}?comp=metadata`, h, signal);
      if (notOurs(r)) return false;
      if (r.status !== 200) throw httpError("complete", key, r);
      fenced.delete(key);
      // Neither the lease's release nor the sweep can undo the record: their failures are not
      // complete's. A lease not given back is remembered, so renew cannot extend it.
      await Promise.all([
        giveBack(key, path, nonce, signal),
        name !== key && sweep(name, signal).catch(() => {}),
      ]);
      return true;
    },
  };
}
