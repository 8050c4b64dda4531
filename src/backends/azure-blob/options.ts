// The azure-blob backend's options: their types, their checks, and the credential they resolve to.
import type { FetchLike } from "../../backend.ts";
import { check } from "../../options.ts";
import { fetchOption, httpUrl } from "../shared/options.ts";
import {
  type Auth,
  bearerAuth,
  parseConnectionString,
  sasAuth,
  sharedKeyAuth,
  type TokenCredentialLike,
  typeError,
} from "./auth.ts";

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

export const NAME = "azure-blob";
const WHERE = `[${NAME}]`;
export const VERSION = "2024-11-04";
export const MIN_TTL = 15_000;
export const MAX_TTL = 60_000;
const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const CONTAINER = /^(?=.{3,63}$)[a-z0-9]+(?:-[a-z0-9]+)*$/;

/** An account or container URL: http(s), no credentials, no query or fragment; without a trailing `/`. */
function baseUrl(value: unknown, option: string): string {
  const u = httpUrl(WHERE, option, value);
  if (u.search !== "" || u.hash !== "") {
    typeError(`${option} must not have a query or fragment; pass a SAS as options.sasToken`);
  }
  return u.href.replace(/\/+$/, "");
}

/** Checks a blob name for what Azure and URLs can hold, and encodes it per path segment. */
export function blobPath(name: string): string {
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

export function checkTtl(ttl: number): void {
  check(
    Number.isFinite(ttl) && ttl >= MIN_TTL && ttl <= MAX_TTL,
    WHERE,
    `ttl must be between ${MIN_TTL} and ${MAX_TTL} ms (Azure leases last 15-60 s), got ${ttl}`,
    RangeError,
  );
}

export function checkNonce(nonce: string): void {
  // A non-GUID lease id is a 400 on Azure and corrupts the blob on Azurite: never send one.
  if (typeof nonce !== "string" || !GUID.test(nonce)) typeError("nonce must be a GUID (crypto.randomUUID())");
}

/** The owner as stored in the metadata: percent-encoded, at most 4 096 characters. */
export function encodeOwner(owner: string): string {
  let value = "";
  try {
    value = encodeURIComponent(owner);
  } catch {
    typeError("owner is not well-formed Unicode");
  }
  check(value.length <= 4096, WHERE, "owner is too long for blob metadata", RangeError);
  return value;
}

/** The options, checked and resolved: the credential, where the blobs live, and how to reach them. */
export interface ResolvedOptions {
  auth: Auth;
  container: string;
  containerUrl: string;
  prefix: string;
  createContainer: boolean;
  /** The blob type asked for; undefined: page blobs, switching to block blobs when refused. */
  blobType: "page" | "block" | undefined;
  fetchFn: FetchLike;
}

/** The credential forms, for messages. */
const FORMS =
  "connectionString, accountUrl + accountName + accountKey, accountUrl or containerUrl + sasToken, or accountUrl + credential";

/** Each credential option, and the options that may come with it (those of no other form). */
const COMPANIONS: Record<string, string[]> = {
  connectionString: [],
  accountKey: ["accountUrl", "accountName"],
  sasToken: ["accountUrl", "containerUrl"],
  credential: ["accountUrl"],
};

/** Checks {@link AzureBlobOptions}: exactly one credential form, the container, prefix, blobType, fetch. */
export function resolveOptions(options: AzureBlobOptions): ResolvedOptions {
  if (typeof options !== "object" || options === null) typeError("options must be an object");
  const o = options as unknown as Partial<Record<string, unknown>>;
  const forms = Object.keys(COMPANIONS).filter((k) => o[k] !== undefined);
  if (forms.length !== 1) {
    typeError(
      forms.length === 0
        ? `options need one credential: ${FORMS}`
        : `options have several credentials (${forms.join(", ")}); pass exactly one`,
    );
  }
  const form = forms[0]!;
  for (const k of ["connectionString", "accountName", "accountKey", "sasToken", "prefix"]) {
    if (o[k] !== undefined && typeof o[k] !== "string") typeError(`options.${k} must be a string`);
  }
  for (const k of ["accountUrl", "containerUrl", "accountName"]) {
    if (o[k] !== undefined && !COMPANIONS[form]!.includes(k))
      typeError(`options.${k} does not go with options.${form} (one of: ${FORMS})`);
  }
  let auth: Auth;
  let account: string;
  let container = o.container;
  if (form === "connectionString") {
    const info = parseConnectionString(o.connectionString as string);
    account = baseUrl(info.accountUrl, "the connection string's BlobEndpoint");
    auth =
      info.accountKey !== undefined
        ? sharedKeyAuth(info.accountName!, info.accountKey, "the connection string's AccountKey")
        : sasAuth(info.sasToken!, "the connection string's SharedAccessSignature");
    auth.secrets.push(o.connectionString as string);
  } else {
    if (o.containerUrl !== undefined) {
      if (o.accountUrl !== undefined)
        typeError(`options.accountUrl does not go with options.containerUrl (one of: ${FORMS})`);
      const url = baseUrl(o.containerUrl, "options.containerUrl");
      const cut = url.lastIndexOf("/");
      const fromUrl = decodeURIComponent(url.slice(cut + 1));
      if (container !== undefined && container !== fromUrl) {
        typeError("options.container differs from the container in options.containerUrl");
      }
      container = fromUrl;
      account = url.slice(0, cut);
    } else {
      account = baseUrl(o.accountUrl, "options.accountUrl");
    }
    if (form === "accountKey") {
      if (o.accountName === undefined) typeError("options.accountKey needs options.accountName");
      auth = sharedKeyAuth(o.accountName as string, o.accountKey as string);
    } else {
      auth =
        form === "sasToken" ? sasAuth(o.sasToken as string) : bearerAuth(o.credential as TokenCredentialLike);
    }
  }
  if (container === undefined) typeError("options.container is required");
  if (typeof container !== "string" || !CONTAINER.test(container)) {
    typeError(
      "options.container must be 3-63 characters: lowercase letters, digits and single hyphens, starting and ending with a letter or digit",
    );
  }
  const prefix = (o.prefix ?? "") as string;
  if (prefix !== "") blobPath(`${prefix}x`);
  const createContainer = o.createContainer === true;
  if (o.blobType !== undefined && o.blobType !== "page" && o.blobType !== "block") {
    typeError('options.blobType must be "page" or "block", or left unset to choose automatically');
  }
  return {
    auth,
    container,
    containerUrl: `${account}/${container}`,
    prefix,
    createContainer,
    blobType: o.blobType as "page" | "block" | undefined,
    fetchFn: fetchOption(WHERE, o.fetch),
  };
}
