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
import type { AcquireResult, Backend, FetchLike, HolderInfo } from "../backend.ts";
import { BackendError } from "../errors.ts";
import { type HttpReply, redact, scrub, send } from "../http.ts";
import {
  type Auth,
  bearerAuth,
  parseConnectionString,
  sasAuth,
  sharedKeyAuth,
  type TokenCredentialLike,
} from "./azure-auth.ts";

export type { TokenCredentialLike } from "./azure-auth.ts";

/** Options every credential form shares. */
export interface AzureBlobCommonOptions {
  /**
   * The container that holds the lock blobs: 3–63 characters, lowercase letters, digits and
   * single hyphens, starting and ending with a letter or digit. Required, except with
   * `containerUrl`, where it is the URL's last path segment.
   */
  container?: string;
  /** Prepended to every lock name to form the blob name, such as `"locks/"`. Default `""`. */
  prefix?: string;
  /**
   * Create the container on first use when it is missing (needs account-level permission).
   * Default `false`: a missing container is a non-retryable {@link BackendError}.
   */
  createContainer?: boolean;
  /**
   * The type of blob a new lock is created as. `"page"`: the fencing token is the page blob's
   * sequence number. `"block"`: a counter in the blob's metadata, for accounts without page
   * blobs (Data Lake Storage Gen2 with hierarchical namespace, premium block blob accounts).
   * Default (unset): page blobs, switching this backend to block blobs as soon as the account
   * refuses a page blob. A lock blob that already exists is used as the type it is, whatever
   * this says, so backends with different settings agree on one fence per name.
   */
  blobType?: "page" | "block";
  /** The `fetch` to send requests with. Default: the global `fetch`. */
  fetch?: FetchLike;
}

/** The credential forms: exactly one of them. */
export type AzureBlobCredentials =
  | {
      /**
       * A storage connection string: `AccountName` + `AccountKey` (with `BlobEndpoint` or
       * `DefaultEndpointsProtocol`/`EndpointSuffix`), `BlobEndpoint` + `SharedAccessSignature`,
       * or `UseDevelopmentStorage=true` for Azurite on `127.0.0.1:10000`.
       */
      connectionString: string;
    }
  | {
      /** `https://<account>.blob.core.windows.net`, or `http://127.0.0.1:10000/devstoreaccount1` for Azurite. */
      accountUrl: string;
      /** The storage account name. */
      accountName: string;
      /** The base64 account key; requests are signed with SharedKey (HMAC-SHA256). */
      accountKey: string;
    }
  | {
      /** The account URL the SAS was issued for. */
      accountUrl: string;
      /** A SAS query string (`sv=...&sig=...`, a leading `?` is fine) with read and write permission. */
      sasToken: string;
    }
  | {
      /** A container URL, such as `https://<account>.blob.core.windows.net/locks`; the container is taken from it. */
      containerUrl: string;
      /** A container SAS query string with read, write and create permission. */
      sasToken: string;
    }
  | {
      /** `https://<account>.blob.core.windows.net`. */
      accountUrl: string;
      /** A `TokenCredential` such as `new DefaultAzureCredential()`; needs "Storage Blob Data Contributor". */
      credential: TokenCredentialLike;
    };

/** Options of {@link azureBlob}: the common options plus exactly one credential form. */
export type AzureBlobOptions = AzureBlobCommonOptions & AzureBlobCredentials;

const NAME = "azure-blob";
const VERSION = "2024-11-04";
const MIN_TTL = 15_000;
const MAX_TTL = 60_000;
const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const CONTAINER = /^(?=.{3,63}$)[a-z0-9]+(?:-[a-z0-9]+)*$/;

function typeError(message: string): never {
  throw new TypeError(`[leasehold] [${NAME}] ${message}`);
}

function baseUrl(value: unknown, option: string): string {
  if (typeof value !== "string") typeError(`${option} must be a URL string`);
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    return typeError(`${option} is not a valid URL`);
  }
  if (u.protocol !== "https:" && u.protocol !== "http:") typeError(`${option} must be an http(s) URL`);
  // fetch would quote such a URL, password included, in its errors.
  if (u.username !== "" || u.password !== "") typeError(`${option} must not contain a user name or password`);
  if (u.search !== "" || u.hash !== "") {
    typeError(`${option} must not have a query or fragment; pass a SAS as options.sasToken`);
  }
  return u.href.replace(/\/+$/, "");
}

/** Checks a blob name for what Azure and URLs can hold, and encodes it per path segment. */
function blobPath(name: string): string {
  const segments = name.split("/");
  if (
    name.length === 0 ||
    name.length > 1024 ||
    // biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters
    /[\u0000-\u001f\u007f\\]/.test(name) ||
    /[./]$/.test(name) ||
    segments.some((s) => s === "." || s === ".." || s === "")
  ) {
    typeError(
      `blob name ${JSON.stringify(name)} cannot be an Azure blob: it must be 1-1024 characters, without control characters, backslashes, empty, "." or ".." path segments, and not end with "." or "/"`,
    );
  }
  try {
    return segments.map(encodeURIComponent).join("/");
  } catch {
    return typeError(`blob name ${JSON.stringify(name)} is not well-formed Unicode`);
  }
}

function checkTtl(ttl: number): void {
  if (!Number.isFinite(ttl) || ttl < MIN_TTL || ttl > MAX_TTL) {
    throw new RangeError(
      `[leasehold] [${NAME}] ttl must be between ${MIN_TTL} and ${MAX_TTL} ms (Azure leases last 15-60 s), got ${ttl}`,
    );
  }
}

function checkNonce(nonce: string): void {
  // A non-GUID lease id is a 400 on Azure and corrupts the blob on Azurite: never send one.
  if (typeof nonce !== "string" || !GUID.test(nonce)) typeError("nonce must be a GUID (crypto.randomUUID())");
}

/** Azure's error code, such as `LeaseAlreadyPresent`; anything else (a proxy echoing the request) is dropped. */
function errorCode(r: HttpReply): string {
  const code = r.header("x-ms-error-code") ?? /<Code>([^<]*)<\/Code>/.exec(r.body)?.[1] ?? "";
  return /^[A-Za-z0-9]{1,64}$/.test(code) ? code : "";
}

/** A decimal header value (a fencing token): digits only, else NaN. */
function decimal(r: HttpReply, name: string): number {
  const value = r.header(name) ?? "";
  return /^[0-9]{1,16}$/.test(value) ? Number(value) : Number.NaN;
}

/** What a HEAD says about a lock blob: its type, ETag, owner (as stored) and fencing counter. */
interface BlobState {
  page: boolean;
  /** The HEAD named the type (else `page` is a guess, see {@link blobState}). */
  known: boolean;
  etag: string;
  owner: string | null;
  /** Page blob: the sequence number. Block blob: the `fence` metadata, 0 when absent. NaN if malformed. */
  counter: number;
}

/**
 * Reads a HEAD. Without a known `x-ms-blob-type` (a proxy's page, a truncated answer) it is
 * undefined, or with `orPage` a page blob with no ETag: the fence then goes to the sequence
 * number with the owner written, which only a page blob accepts, so it never yields a wrong token.
 */
function blobState(r: HttpReply, orPage = false): BlobState | undefined {
  const type = r.header("x-ms-blob-type");
  const known = type === "PageBlob" || type === "BlockBlob" || type === "AppendBlob";
  if (!known && !orPage) return undefined;
  const page = !known || type === "PageBlob";
  const counter =
    page || r.header("x-ms-meta-fence") !== null
      ? decimal(r, page ? "x-ms-blob-sequence-number" : "x-ms-meta-fence")
      : 0;
  return {
    page,
    known,
    etag: known ? (r.header("etag") ?? "") : "",
    owner: r.header("x-ms-meta-owner"),
    counter,
  };
}

/** A lease answer that means "someone else's lease, or none of ours". */
function notOurs(r: HttpReply): boolean {
  return r.status === 404 || (r.status === 409 && errorCode(r).startsWith("Lease"));
}

/**
 * A write under our lease refused because the lease is no longer ours: taken over, broken or
 * expired. Azure answers 412 (LeaseIdMismatchWithBlobOperation, LeaseLost, LeaseNotPresent...),
 * some versions and emulators 409; both mean "not ours", never a failure. 404: deleted meanwhile.
 */
function leaseGone(r: HttpReply): boolean {
  return r.status === 404 || ((r.status === 409 || r.status === 412) && errorCode(r).startsWith("Lease"));
}

/**
 * Put Blob's answers when the account does not take that blob type, with the account kind
 * that gives them. Data Lake Storage Gen2 (hierarchical namespace) refuses page blobs with 409
 * FeatureNotYetSupportedForHierarchicalNamespaceAccounts; a premium block blob account
 * (BlockBlobStorage) refuses them with 400 BlobTypeNotSupported ("Page blob is not supported for
 * this account type"); a premium page blob account refuses block blobs with 400
 * BlobTypeNotSupported.
 */
function refusedBy(r: HttpReply, page: boolean): string | undefined {
  if (r.status !== 400 && r.status !== 409) return undefined;
  const code = errorCode(r);
  if (page && code === "FeatureNotYetSupportedForHierarchicalNamespaceAccounts") {
    return "a Data Lake Storage Gen2 account (hierarchical namespace)";
  }
  if (code !== "BlobTypeNotSupported") return undefined;
  return page ? "a premium block blob account (BlockBlobStorage)" : "a premium page blob account";
}

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
 * credential forms, a malformed connection string, key or SAS throw a `TypeError` that names
 * the option and never quotes the secret. An account that refuses the blob type asked for is a
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
 * const backend = azureBlob({ containerUrl: "http://127.0.0.1:10000/devstoreaccount1/locks", sasToken });
 * ```
 */
export function azureBlob(options: AzureBlobOptions): Backend {
  if (typeof options !== "object" || options === null) typeError("options must be an object");
  const o = options as unknown as Partial<Record<string, unknown>>;
  const forms = ["connectionString", "accountKey", "sasToken", "credential"].filter(
    (k) => o[k] !== undefined,
  );
  if (forms.length !== 1) {
    typeError(
      forms.length === 0
        ? "options need one credential: connectionString, accountUrl + accountName + accountKey, accountUrl or containerUrl + sasToken, or accountUrl + credential"
        : `options have several credentials (${forms.join(", ")}); pass exactly one`,
    );
  }
  let auth: Auth;
  let account: string;
  let container = o.container;
  if (o.connectionString !== undefined) {
    if (typeof o.connectionString !== "string") typeError("options.connectionString must be a string");
    if (o.accountUrl !== undefined || o.containerUrl !== undefined || o.accountName !== undefined) {
      typeError("options.connectionString cannot be combined with accountUrl, containerUrl or accountName");
    }
    const info = parseConnectionString(o.connectionString);
    account = baseUrl(info.accountUrl, "the connection string's BlobEndpoint");
    auth =
      info.accountKey !== undefined
        ? sharedKeyAuth(info.accountName!, info.accountKey, "the connection string's AccountKey")
        : sasAuth(info.sasToken!, "the connection string's SharedAccessSignature");
    auth.secrets.push(o.connectionString);
  } else if (o.containerUrl !== undefined) {
    if (o.sasToken === undefined || o.accountUrl !== undefined) {
      typeError(
        "options.containerUrl goes with options.sasToken only (use accountUrl for other credentials)",
      );
    }
    const url = baseUrl(o.containerUrl, "options.containerUrl");
    const cut = url.lastIndexOf("/");
    const fromUrl = decodeURIComponent(url.slice(cut + 1));
    if (container !== undefined && container !== fromUrl) {
      typeError("options.container differs from the container in options.containerUrl");
    }
    container = fromUrl;
    account = url.slice(0, cut);
    auth = sasAuth(String(o.sasToken));
  } else {
    account = baseUrl(o.accountUrl, "options.accountUrl");
    if (o.accountKey !== undefined) {
      if (typeof o.accountKey !== "string") typeError("options.accountKey must be a string");
      if (typeof o.accountName !== "string") typeError("options.accountKey needs options.accountName");
      auth = sharedKeyAuth(o.accountName, o.accountKey);
    } else if (o.sasToken !== undefined) {
      if (typeof o.sasToken !== "string") typeError("options.sasToken must be a string");
      auth = sasAuth(o.sasToken);
    } else {
      auth = bearerAuth(o.credential as TokenCredentialLike);
    }
    if (o.accountName !== undefined && o.accountKey === undefined) {
      typeError("options.accountName goes with options.accountKey only");
    }
  }
  if (container === undefined) typeError("options.container is required");
  if (typeof container !== "string" || !CONTAINER.test(container)) {
    typeError(
      "options.container must be 3-63 characters: lowercase letters, digits and single hyphens, starting and ending with a letter or digit",
    );
  }
  const prefix = o.prefix ?? "";
  if (typeof prefix !== "string") typeError("options.prefix must be a string");
  if (prefix !== "") blobPath(`${prefix}x`);
  const createContainer = o.createContainer === true;
  if (o.blobType !== undefined && o.blobType !== "page" && o.blobType !== "block") {
    typeError('options.blobType must be "page" or "block", or left unset to choose automatically');
  }
  const fixedType = o.blobType as "page" | "block" | undefined;
  // The type new lock blobs are created as; unset blobType starts with page and switches once.
  let createPage = fixedType !== "block";
  let pageRefusal: string | undefined; // why, when unset blobType switched to block blobs
  const fetchFn = (o.fetch as FetchLike | undefined) ?? ((url, init) => fetch(url, init));
  const containerUrl = `${account}/${container}`;
  const { secrets } = auth;

  async function call(
    op: string,
    method: string,
    path: string,
    query: string,
    headers: Record<string, string>,
    signal: AbortSignal | undefined,
  ): Promise<HttpReply> {
    const url = `${containerUrl}${path === "" ? "" : `/${path}`}${query === "" ? "" : `?${query}`}`;
    let req: { url: string; headers: Record<string, string> };
    try {
      // Every PUT here is body-less. Azure answers 411 to a PUT without Content-Length, and a
      // custom fetch may not add it: set it explicitly (SharedKey signs "0" as an empty line).
      const length: Record<string, string> = method === "PUT" ? { "content-length": "0" } : {};
      req = await auth.authorize(method, url, { ...headers, ...length, "x-ms-version": VERSION }, signal);
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      const cause = scrub(error, secrets);
      // A credential that timed out may answer next time; any other failure is taken as a refusal.
      const refused = !/Timeout|Abort/.test(cause.name);
      throw new BackendError(`${op}: options.credential gave no token: ${cause.message}`, {
        backend: NAME,
        retryable: !refused,
        auth: refused,
        cause,
      });
    }
    return send(NAME, fetchFn, req.url, { method, headers: req.headers, signal }, secrets);
  }

  function failure(op: string, key: string, r: HttpReply): BackendError {
    const code = redact(errorCode(r), secrets);
    const auth = r.status === 401 || r.status === 403;
    const hint = auth
      ? ": check the account key, the SAS (it needs read, write and create) or the credential's role (Storage Blob Data Contributor)"
      : "";
    return new BackendError(
      `${op} ${JSON.stringify(key)} failed: HTTP ${r.status}${code === "" ? "" : ` ${code}`}${hint}`,
      {
        backend: NAME,
        status: r.status,
        retryable: r.status >= 500 || r.status === 408 || r.status === 429,
        auth,
      },
    );
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
      const r = await call("create container", "PUT", "", "restype=container", {}, signal);
      if (r.status !== 201 && !(r.status === 409 && errorCode(r) === "ContainerAlreadyExists")) {
        throw failure("create container for", key, r);
      }
    } else if (code !== "BlobNotFound") {
      return;
    }
    const page = createPage;
    const r = await call(
      "create blob",
      "PUT",
      path,
      "",
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
    if (r.status === 404 && rc === "ContainerNotFound") return create(key, path, "ContainerNotFound", signal);
    const kind = refusedBy(r, page);
    if (kind === undefined) throw failure("create blob for", key, r);
    const refusal = `HTTP ${r.status} ${rc}: ${kind}`;
    if (page && fixedType === undefined) {
      pageRefusal = refusal;
      createPage = false; // this account has no page blobs: block blobs from now on
      return create(key, path, "BlobNotFound", signal);
    }
    throw new BackendError(
      `create blob for ${JSON.stringify(key)}: ${
        fixedType === "page"
          ? `the storage account refuses page blobs (${refusal}); use blobType "block", or leave blobType unset to switch automatically`
          : fixedType === "block"
            ? `the storage account refuses block blobs (${refusal}); use blobType "page", or leave blobType unset`
            : `the storage account refuses page blobs (${pageRefusal}) and block blobs (${refusal}); use a general-purpose v2 account (with or without hierarchical namespace) or a premium block blob account`
      }`,
      { backend: NAME, status: r.status, retryable: false },
    );
  }

  function lease(path: string, headers: Record<string, string>, signal?: AbortSignal): Promise<HttpReply> {
    return call("lease", "PUT", path, "comp=lease", headers, signal);
  }

  function read(path: string, signal: AbortSignal | undefined): Promise<HttpReply> {
    return call("read", "HEAD", path, "", {}, signal);
  }

  /** Gives a lease back in the background: the caller's time bound must not wait for it. */
  function giveBack(path: string, nonce: string): void {
    lease(path, { "x-ms-lease-action": "release", "x-ms-lease-id": nonce }, AbortSignal.timeout(5_000)).catch(
      () => {},
    );
  }

  /**
   * The fence step of acquire, under our lease `nonce`: the token, or null when the lease is not
   * ours any more. `state` comes from the HEAD sent with the lease and may predate the lease, so
   * every write that relies on it is conditional on its ETag; 412 ConditionNotMet means another
   * holder wrote in between, and we read again (now under our lease, so nobody else can write)
   * and write again. The fence follows the existing blob's type, whatever `blobType` says.
   */
  async function fence(
    key: string,
    path: string,
    nonce: string,
    owner: string,
    state: BlobState | undefined,
    signal: AbortSignal | undefined,
  ): Promise<number | null> {
    const write = (op: string, query: string, h: Record<string, string>) =>
      call(op, "PUT", path, query, { "x-ms-lease-id": nonce, ...h }, signal).then((r) => [op, r] as const);
    for (let attempt = 0; attempt < 3; attempt++) {
      signal?.throwIfAborted(); // (a fetch need not reject at once when given an aborted signal)
      if (state === undefined) {
        const h = await read(path, signal);
        if (h.status === 404) return null;
        if (h.status !== 200) throw failure("read", key, h);
        state = blobState(h, true)!;
      }
      let token: number;
      let replies: (readonly [string, HttpReply])[];
      if (state.page) {
        // Page blob: the token is the sequence number, incremented by Set Blob Properties, which
        // makes no blob version on an account with versioning. Set Blob Metadata does make one,
        // so the owner is written only when it changed; when it did not, the increment is
        // conditional on the HEAD's ETag, so an owner written by someone else since is caught.
        const same = state.owner === owner && state.etag !== "";
        const increment = write("fence", "comp=properties", {
          "x-ms-sequence-number-action": "increment",
          ...(same ? { "if-match": state.etag } : {}),
        });
        // Set Blob Metadata replaces all metadata. On a blob whose type the HEAD did not name
        // (maybe a block blob, its counter in the metadata) it waits for the increment, which
        // only a page blob accepts; on a known page blob both go out together.
        const setOwner = () => write("set owner of", "comp=metadata", { "x-ms-meta-owner": owner });
        if (same) replies = [await increment];
        else if (state.known) replies = await Promise.all([increment, setOwner()]);
        else {
          const fenced = await increment;
          replies = fenced[1].status === 200 ? [fenced, await setOwner()] : [fenced];
        }
        token = decimal(replies[0]![1], "x-ms-blob-sequence-number");
      } else {
        // Block blob: counter + 1 and the owner in one metadata write, conditional on the ETag
        // the counter was read with, so the counter never goes back nor repeats.
        token = state.counter + 1;
        if (!Number.isSafeInteger(token) || state.etag === "") {
          throw new BackendError(
            `fence ${JSON.stringify(key)}: the blob has no usable ETag or fence counter`,
            {
              backend: NAME,
              status: 200,
              retryable: true,
            },
          );
        }
        replies = [
          await write("fence", "comp=metadata", {
            "if-match": state.etag,
            "x-ms-meta-fence": String(token),
            "x-ms-meta-owner": owner,
          }),
        ];
      }
      if (replies.some(([, r]) => leaseGone(r))) return null;
      const stale = (r: HttpReply) => r.status === 412 && errorCode(r) === "ConditionNotMet";
      const bad = replies.find(([, r]) => r.status !== 200 && !stale(r));
      if (bad) throw failure(bad[0], key, bad[1]);
      if (replies.some(([, r]) => stale(r))) {
        state = undefined;
        continue;
      }
      if (!(Number.isSafeInteger(token) && token > 0)) {
        throw new BackendError(`fence ${JSON.stringify(key)}: the reply has no sequence number`, {
          backend: NAME,
          status: 200,
          retryable: true,
        });
      }
      return token;
    }
    throw new BackendError(`fence ${JSON.stringify(key)}: the blob kept changing under our lease`, {
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
      const path = blobPath(prefix + key);
      let ownerValue: string;
      try {
        ownerValue = encodeURIComponent(owner);
      } catch {
        return typeError("owner is not well-formed Unicode");
      }
      if (ownerValue.length > 4096)
        throw new RangeError(`[leasehold] [${NAME}] owner is too long for blob metadata`);
      const headers = {
        "x-ms-lease-action": "acquire",
        "x-ms-lease-duration": String(Math.ceil(ttl / 1000)),
        "x-ms-proposed-lease-id": nonce,
      };
      let state: BlobState | undefined;
      for (let attempt = 0; ; attempt++) {
        // The lease and a HEAD go out together. A lease action leaves the ETag alone, so once the
        // lease is ours the HEAD still describes the blob, unless another holder wrote it between
        // the two: the fence step's If-Match catches that. Only a granted lease waits for the HEAD.
        const granted = lease(path, headers, signal);
        const head = read(path, signal);
        head.catch(() => {}); // ignored unless the lease is granted
        const r = await granted;
        if (r.status === 201 || r.status === 200) {
          const h = await head.catch(() => undefined);
          if (h?.status === 200) state = blobState(h);
          break;
        }
        if (r.status === 409 && errorCode(r).startsWith("Lease")) return { ok: false };
        if (r.status !== 404 || attempt === 2) throw failure("acquire", key, r);
        await create(key, path, errorCode(r), signal);
      }
      // The lease is ours. On any failure, and when it turns out lost, give it back.
      let token: number | null;
      try {
        token = await fence(key, path, nonce, ownerValue, state, signal);
      } catch (error) {
        giveBack(path, nonce);
        throw error;
      }
      if (token !== null) return { ok: true, token };
      giveBack(path, nonce);
      return { ok: false };
    },

    async renew({ key, nonce, ttl, signal }): Promise<boolean> {
      checkTtl(ttl);
      checkNonce(nonce);
      const r = await lease(
        blobPath(prefix + key),
        { "x-ms-lease-action": "renew", "x-ms-lease-id": nonce },
        signal,
      );
      if (r.status === 200) return true;
      if (notOurs(r)) return false;
      throw failure("renew", key, r);
    },

    async release({ key, nonce, signal }): Promise<void> {
      checkNonce(nonce);
      const r = await lease(
        blobPath(prefix + key),
        { "x-ms-lease-action": "release", "x-ms-lease-id": nonce },
        signal,
      );
      if (r.status === 200 || notOurs(r)) return;
      throw failure("release", key, r);
    },

    async inspect(key, signal): Promise<HolderInfo | null> {
      const r = await call("inspect", "HEAD", blobPath(prefix + key), "", {}, signal);
      if (r.status === 404) return null;
      if (r.status !== 200) throw failure("inspect", key, r);
      const state = r.header("x-ms-lease-state");
      if (state !== "leased" && state !== "breaking") return null;
      const raw = r.header("x-ms-meta-owner") ?? "";
      let owner = raw;
      try {
        owner = decodeURIComponent(raw);
      } catch {}
      const { counter } = blobState(r, true)!;
      return { owner, token: Number.isSafeInteger(counter) ? counter : 0 };
    },
  };
}
