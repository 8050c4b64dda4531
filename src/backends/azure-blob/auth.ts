// Azure Storage credentials for the azure-blob backend: connection strings, SharedKey signing with
// WebCrypto, SAS tokens and bearer tokens from a TokenCredential. Internal: not a package entry.
import { fail } from "../../options.ts";
import { abortable } from "../../signals.ts";

/**
 * A credential shaped like `@azure/identity`'s `TokenCredential`, such as
 * `new DefaultAzureCredential()`. leasehold asks it for the scope
 * `https://storage.azure.com/.default` and reuses the token until 2 minutes before
 * `expiresOnTimestamp` (epoch ms).
 */
export interface TokenCredentialLike {
  /** A bearer token for `scopes` and its expiry, or null. */
  getToken(
    scopes: string | string[],
    options?: { abortSignal?: AbortSignal },
  ): Promise<{ token: string; expiresOnTimestamp: number } | null>;
}

/** A request after authorization: the URL to send (a SAS adds its query) and the headers. */
export interface Authorized {
  url: string;
  headers: Record<string, string>;
}

/** How requests to one storage account are authorized, and what must never appear in an error. */
export interface Auth {
  /**
   * Adds the credential (Authorization header or SAS query) to a request whose `headers`, a
   * fresh object it may change, already carry `x-ms-date` and `x-ms-version`.
   */
  authorize(
    method: string,
    url: string,
    headers: Record<string, string>,
    signal?: AbortSignal,
  ): Promise<Authorized>;
  /** Strings to redact from every message and cause (key, SAS, signature, tokens seen so far). */
  readonly secrets: string[];
}

/** Azurite's well-known development account and its published key (not a secret). */
export const DEV_ACCOUNT = "devstoreaccount1";
/** Azurite's published development key. */
export const DEV_KEY =
  "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const SCOPE = "https://storage.azure.com/.default";
const REFRESH_MARGIN = 120_000;
const enc = new TextEncoder();

/** A TypeError from this backend: `[leasehold] [azure-blob] <message>`. */
export function typeError(message: string): never {
  return fail("[azure-blob]", message);
}

/** The TypeError for a connection string that cannot be read; it never quotes the string. */
function malformed(what: string): never {
  return typeError(`options.connectionString is malformed: ${what}`);
}

/** The pieces of a storage connection string that leasehold uses. */
export interface ConnectionInfo {
  accountUrl: string;
  accountName?: string;
  accountKey?: string;
  sasToken?: string;
}

/**
 * Parses a storage connection string: `AccountName`, `AccountKey`, `BlobEndpoint`,
 * `DefaultEndpointsProtocol`, `EndpointSuffix`, `SharedAccessSignature`, or
 * `UseDevelopmentStorage=true` (Azurite at `http://127.0.0.1:10000/devstoreaccount1`). Other
 * keys (`QueueEndpoint`, ...) are ignored. Errors never quote the string.
 */
export function parseConnectionString(text: string): ConnectionInfo {
  const fields = new Map<string, string>();
  for (const part of text.split(";")) {
    if (part.trim() === "") continue;
    const eq = part.indexOf("=");
    if (eq <= 0) malformed("expected Key=Value pairs separated by ';'");
    fields.set(part.slice(0, eq).trim().toLowerCase(), part.slice(eq + 1).trim());
  }
  if (fields.get("usedevelopmentstorage")?.toLowerCase() === "true") {
    return {
      accountUrl: `http://127.0.0.1:10000/${DEV_ACCOUNT}`,
      accountName: DEV_ACCOUNT,
      accountKey: DEV_KEY,
    };
  }
  const accountName = fields.get("accountname");
  const accountKey = fields.get("accountkey");
  const sasToken = fields.get("sharedaccesssignature");
  let accountUrl = fields.get("blobendpoint");
  if (accountUrl === undefined) {
    if (!accountName) {
      malformed("it needs AccountName or BlobEndpoint");
    }
    const protocol = (fields.get("defaultendpointsprotocol") ?? "https").toLowerCase();
    if (protocol !== "https" && protocol !== "http") {
      malformed("DefaultEndpointsProtocol must be https or http");
    }
    accountUrl = `${protocol}://${accountName}.blob.${fields.get("endpointsuffix") ?? "core.windows.net"}`;
  }
  if (accountKey !== undefined) {
    if (!accountName) malformed("AccountKey needs AccountName");
    return { accountUrl, accountName, accountKey };
  }
  if (sasToken !== undefined) return { accountUrl, sasToken };
  return malformed("it needs AccountKey or SharedAccessSignature");
}

/**
 * SharedKey: `Authorization: SharedKey <account>:<base64 HMAC-SHA256(key, StringToSign)>`. The
 * canonical resource is `/` + account + the URL path as sent, so path-style URLs (Azurite:
 * `/devstoreaccount1/devstoreaccount1/container/blob`) and host-style URLs both sign right.
 */
export function sharedKeyAuth(accountName: string, accountKey: string, option = "options.accountKey"): Auth {
  // Standard base64 of at least one byte.
  if (accountKey.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(accountKey)) {
    typeError(`${option} is not a base64 storage account key`);
  }
  if (!/^[a-z0-9]{3,24}$/.test(accountName)) {
    typeError("options.accountName must be 3-24 lowercase letters and digits");
  }
  let key: Promise<CryptoKey> | undefined;
  return {
    secrets: [accountKey],
    async authorize(method, url, headers) {
      key ??= crypto.subtle.importKey(
        "raw",
        Uint8Array.from(atob(accountKey), (c) => c.charCodeAt(0)),
        { name: "HMAC", hash: "SHA-256" },
        false,
        ["sign"],
      );
      const signature = await crypto.subtle.sign(
        "HMAC",
        await key,
        enc.encode(stringToSign(accountName, method, url, headers)),
      );
      headers.authorization = `SharedKey ${accountName}:${btoa(String.fromCharCode(...new Uint8Array(signature)))}`;
      return { url, headers };
    },
  };
}

/** The standard headers of a SharedKey StringToSign, in order: one line each, empty when absent. */
const SIGNED = [
  "content-encoding",
  "content-language",
  "content-length",
  "content-md5",
  "content-type",
  "date",
  "if-modified-since",
  "if-match",
  "if-none-match",
  "if-unmodified-since",
  "range",
];

/**
 * The SharedKey StringToSign for a request whose header names are all lower-case and whose query
 * has lower-case names, none of them repeated or a prefix of another, as leasehold's (`comp=lease`,
 * `restype=container`).
 */
export function stringToSign(
  accountName: string,
  method: string,
  url: string,
  headers: Record<string, string>,
): string {
  const u = new URL(url);
  // A Content-Length of 0 signs as an empty line (API version 2015-02-21 and later).
  const standard = SIGNED.map((n) =>
    n === "content-length" && headers[n] === "0" ? "" : (headers[n] ?? ""),
  );
  const msHeaders = Object.keys(headers)
    .filter((n) => n.startsWith("x-ms-"))
    .sort()
    .map((n) => `${n}:${headers[n]!.replace(/\s+/g, " ").trim()}\n`)
    .join("");
  const params: string[] = [];
  u.searchParams.forEach((value, name) => {
    params.push(`\n${name}:${value}`);
  });
  return `${method.toUpperCase()}\n${standard.join("\n")}\n${msHeaders}/${accountName}${u.pathname}${params.sort().join("")}`;
}

/** SAS: the token is appended to the query; no Authorization header. */
export function sasAuth(sasToken: string, option = "options.sasToken"): Auth {
  const token = sasToken.startsWith("?") ? sasToken.slice(1) : sasToken;
  const sig = new URLSearchParams(token).get("sig");
  if (!sig || !/^[^?#\s]+$/.test(token)) {
    typeError(`${option} must be a SAS query string such as "sv=...&sig=..." (with a sig parameter)`);
  }
  return {
    // The token covers `sasToken` (it is that, less a leading "?"), and redaction covers each
    // secret's URL-encoded form; the sig parameter as sent may be encoded otherwise.
    secrets: [token, sig, ...token.split("&").filter((p) => p.startsWith("sig="))],
    async authorize(_method, url, headers) {
      return { url: `${url}${url.includes("?") ? "&" : "?"}${token}`, headers };
    },
  };
}

/**
 * Bearer (Microsoft Entra ID): `Authorization: Bearer <token>` from `credential.getToken`, cached
 * until 2 minutes before it expires; concurrent requests share one refresh. A token with
 * characters a header cannot carry is refused (a TypeError that does not quote it).
 */
export function bearerAuth(credential: TokenCredentialLike): Auth {
  if (typeof credential?.getToken !== "function") {
    typeError("options.credential must have a getToken(scopes) method, like @azure/identity's credentials");
  }
  const secrets: string[] = [];
  let cached: { token: string; expiresOnTimestamp: number } | undefined;
  let pending: Promise<{ token: string; expiresOnTimestamp: number } | null> | undefined;
  return {
    secrets,
    async authorize(_method, url, headers, signal) {
      if (cached === undefined || Date.now() >= cached.expiresOnTimestamp - REFRESH_MARGIN) {
        // One refresh shared by concurrent requests: it must not carry any one caller's signal,
        // or that caller's timeout would fail all the others. Each caller waits with its own.
        pending ??= credential.getToken(SCOPE, {}).finally(() => {
          pending = undefined;
        });
        const got = await (signal ? abortable(pending, signal) : pending);
        if (!got || typeof got.token !== "string" || got.token === "") {
          typeError("options.credential.getToken returned no token");
        }
        // A token that cannot be a header value (CR/LF, control or non-ASCII characters) would
        // make fetch throw "invalid header value", which may quote it: refuse it here, unquoted.
        if (!/^[\x20-\x7e]+$/.test(got.token)) {
          typeError(
            "options.credential.getToken returned a token that cannot be sent as a header value (characters outside visible ASCII and space)",
          );
        }
        cached = got;
        if (!secrets.includes(got.token)) secrets.splice(0, secrets.length, ...secrets.slice(-3), got.token);
      }
      headers.authorization = `Bearer ${cached.token}`;
      return { url, headers };
    },
  };
}
