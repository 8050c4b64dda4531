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
 * @module
 */
import type { AcquireResult, Backend, HolderInfo } from "../../backend.ts";
import { BackendError, fenceExhausted } from "../../errors.ts";
import type { HttpReply } from "../shared/http.ts";
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
  refusedBy,
} from "./rest.ts";

export type { TokenCredentialLike } from "./auth.ts";
export type { AzureBlobCommonOptions, AzureBlobCredentials, AzureBlobOptions } from "./options.ts";

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
 * A contended acquire does not report the holder or a `retryAfter`.
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
  const fenced = new Map<string, BlobState>();

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
    return blobState(r, true)!;
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
  ): Promise<number | null> {
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
      let token: number;
      let replies: HttpReply[];
      if (state.page) {
        // Page blob: the token is the sequence number, set by Set Blob Properties (acquire: + 1;
        // raiseFence: max(itself, raise)), which makes no blob version on an account with
        // versioning. Set Blob Metadata does make one, so acquire writes the owner only when it
        // changed (raiseFence leaves it alone); when it did not, the increment is conditional on
        // the HEAD's ETag, so an owner written by someone else since is caught.
        const same = state.owner === owner && state.etag !== "";
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
          throw new BackendError(
            `${op} ${JSON.stringify(key)}: the blob has no usable ETag or fence counter`,
            {
              backend: NAME,
              status: 200,
              retryable: true,
            },
          );
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
      const stale = (r: HttpReply) => r.status === 412 && errorCode(r) === "ConditionNotMet";
      const bad = replies.find((r) => r.status !== 200 && !stale(r));
      if (bad) throw httpError(op, key, bad);
      if (replies.some(stale)) {
        state = undefined;
        continue;
      }
      if (!(Number.isSafeInteger(token) && token > 0)) {
        throw new BackendError(`${op} ${JSON.stringify(key)}: the reply has no sequence number`, {
          backend: NAME,
          status: 200,
          retryable: true,
        });
      }
      // For raiseFence: the blob's type and, for a block blob, the ETag and counter it has now.
      fenced.delete(key);
      fenced.set(key, {
        ...state,
        known: true,
        etag: replies[0]!.header("etag") ?? "",
        owner,
        counter: token,
      });
      if (fenced.size > 4_096) fenced.delete(fenced.keys().next().value as string);
      return token;
    }
    throw new BackendError(`${op} ${JSON.stringify(key)}: the blob kept changing under our lease`, {
      backend: NAME,
      retryable: true,
    });
  }

  return {
    name: NAME,
    ttlRange: [MIN_TTL, MAX_TTL],

    async acquire({ key, owner, nonce, ttl, signal }): Promise<AcquireResult> {
      checkTtl(ttl);
      checkNonce(nonce);
      const path = pathOf(key);
      const ownerValue = encodeOwner(owner);
      let state: BlobState | undefined;
      for (let attempt = 0; ; attempt++) {
        // The lease and a HEAD go out together. A lease action leaves the ETag alone, so once the
        // lease is ours the HEAD still describes the blob, unless another holder wrote it between
        // the two: the fence step's If-Match catches that. Only a granted lease waits for the HEAD.
        const granted = lease(path, "acquire", nonce, signal, Math.ceil(ttl / 1000));
        const described = head(path, signal);
        described.catch(() => {}); // ignored unless the lease is granted
        const r = await granted;
        if (r.status === 201 || r.status === 200) {
          const h = await described.catch(() => undefined);
          if (h?.status === 200) state = blobState(h);
          break;
        }
        if (r.status === 409 && errorCode(r).startsWith("Lease")) return { ok: false };
        if (r.status !== 404 || attempt === 2) throw httpError("acquire", key, r);
        await create(key, path, errorCode(r), signal);
      }
      // The lease is ours. When it turns out lost, and on any failure, give it back in the
      // background: the caller's time bound must not wait for that.
      let token: number | null = null;
      try {
        token = await fence(key, path, nonce, ownerValue, state, signal);
      } finally {
        if (token === null) lease(path, "release", nonce, AbortSignal.timeout(5_000)).catch(() => {});
      }
      return token === null ? { ok: false } : { ok: true, token };
    },

    async renew({ key, nonce, ttl, signal }): Promise<boolean> {
      checkTtl(ttl);
      checkNonce(nonce);
      const r = await lease(pathOf(key), "renew", nonce, signal);
      if (r.status === 200) return true;
      if (notOurs(r)) return false;
      throw httpError("renew", key, r);
    },

    async release({ key, nonce, signal }): Promise<void> {
      checkNonce(nonce);
      const r = await lease(pathOf(key), "release", nonce, signal);
      if (r.status === 200 || notOurs(r)) return;
      throw httpError("release", key, r);
    },

    async raiseFence({ key, owner, nonce, token, signal }): Promise<boolean> {
      checkNonce(nonce);
      if (!(Number.isSafeInteger(token) && token > 0)) typeError("token must be a positive integer");
      // A block blob without a known ETag is read again (a HEAD) before its counter is written.
      const blob = fenced.get(key);
      const known = blob?.page || blob?.etag ? blob : undefined;
      return (await fence(key, pathOf(key), nonce, encodeOwner(owner), known, signal, token)) !== null;
    },

    async inspect(key, signal): Promise<HolderInfo | null> {
      const blob = await read("inspect", key, pathOf(key), signal);
      if (!blob?.leased) return null;
      let owner = blob.owner ?? "";
      try {
        owner = decodeURIComponent(owner);
      } catch {}
      return { owner, token: Number.isSafeInteger(blob.counter) ? blob.counter : 0 };
    },
  };
}
