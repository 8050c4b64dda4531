// The azure-blob backend's REST layer: one signed request to a container, the error it maps to,
// and how to read Azure's answers (error codes, blob state, lease answers).
import { BackendError } from "../../errors.ts";
import { type HttpReply, send } from "../shared/http.ts";
import { authStatus, retryableStatus } from "../shared/options.ts";
import { redact, scrub } from "../shared/redact.ts";
import { NAME, type ResolvedOptions, VERSION } from "./options.ts";

/** Azure's error code, such as `LeaseAlreadyPresent`; anything else (a proxy echoing the request) is dropped. */
export function errorCode(r: HttpReply): string {
  const code = r.header("x-ms-error-code") ?? /<Code>([^<]*)<\/Code>/.exec(r.body)?.[1] ?? "";
  return /^[A-Za-z0-9]{1,64}$/.test(code) ? code : "";
}

/** A decimal header value (a fencing token): digits only, else NaN. */
export function decimal(r: HttpReply, name: string): number {
  const value = r.header(name) ?? "";
  return /^[0-9]{1,16}$/.test(value) ? Number(value) : Number.NaN;
}

/**
 * The ms left of a completed fire's record (runOnce, docs/DESIGN.md §17), by the server's clock
 * alone: the record is the metadata `done` (its `retain`, in ms) written at `lastModified`, and it
 * lasts until `lastModified` + 1 s (HTTP dates count whole seconds) + `retain`, compared with the
 * server's `date` of the answer that read it (this machine's clock when it has none). Undefined
 * when there is no record or it expired. A record whose write time cannot be read counts in full.
 */
export function recordLeft(
  done: string | null,
  lastModified: string | null,
  date: string | null,
): number | undefined {
  if (done === null || !/^[0-9]{1,10}$/.test(done)) return undefined;
  const now = Date.parse(date ?? "");
  const written = Date.parse(lastModified ?? "");
  const left = Number.isNaN(written)
    ? Number(done)
    : written + 1_000 + Number(done) - (Number.isNaN(now) ? Date.now() : now);
  return left > 0 ? left : undefined;
}

/** What a HEAD says about a lock blob: its type, ETag, owner (as stored), fence counter and lease. */
export interface BlobState {
  page: boolean;
  /** The HEAD named the type (else `page` is a guess, see {@link blobState}). */
  known: boolean;
  etag: string;
  owner: string | null;
  /** Page blob: the sequence number. Block blob: the `fence` metadata, 0 when absent. NaN if malformed. */
  counter: number;
  /** Its lease state is `leased` or `breaking`: someone holds it. */
  leased: boolean;
  /** It has a record's `done` metadata, live or expired: an acquire must write the metadata anew. */
  record: boolean;
  /** The ms left of its live record ({@link recordLeft}), or undefined. */
  done: number | undefined;
}

/**
 * Reads a HEAD. Without a known `x-ms-blob-type` (a proxy's page, a truncated answer) it is
 * undefined, or with `orPage` a page blob with no ETag: the fence then goes to the sequence
 * number with the owner written, which only a page blob accepts, so it never yields a wrong token.
 * A fire's blob (`fire`) keeps its token in the `fence` metadata whatever its type: its counter is
 * its mutex name's blob.
 */
export function blobState(r: HttpReply, orPage = false, fire = false): BlobState | undefined {
  const type = r.header("x-ms-blob-type");
  const known = type === "PageBlob" || type === "BlockBlob" || type === "AppendBlob";
  if (!known && !orPage) return undefined;
  const page = !known || type === "PageBlob";
  const sequence = page && !fire;
  const counter =
    sequence || r.header("x-ms-meta-fence") !== null
      ? decimal(r, sequence ? "x-ms-blob-sequence-number" : "x-ms-meta-fence")
      : 0;
  const done = r.header("x-ms-meta-done");
  return {
    page,
    known,
    etag: known ? (r.header("etag") ?? "") : "",
    owner: r.header("x-ms-meta-owner"),
    counter,
    leased: /^(leased|breaking)$/.test(r.header("x-ms-lease-state") ?? ""),
    record: done !== null,
    done: recordLeft(done, r.header("last-modified"), r.header("date")),
  };
}

/** The text of an XML element's content: `&amp;` and the other entities decoded. */
export function xmlText(text: string): string {
  return text.replace(
    /&(?:#x([0-9a-f]+)|#([0-9]+)|(amp|lt|gt|quot|apos));/gi,
    (_, hex, dec, named: string) =>
      hex || dec
        ? String.fromCodePoint(Number.parseInt(hex ?? dec, hex ? 16 : 10))
        : ({ amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" } as Record<string, string>)[
            named.toLowerCase()
          ]!,
  );
}

/**
 * An answer that means the lease is not ours (any more): taken over, broken, expired or never
 * ours. Azure answers 409 to a lease action (LeaseAlreadyPresent, LeaseIdMismatchWithLeaseOperation)
 * and 412 to a write under a lease (LeaseIdMismatchWithBlobOperation, LeaseLost, LeaseNotPresent...),
 * some versions and emulators 409 to both: either means "not ours", never a failure. 404: the blob
 * was deleted meanwhile.
 */
export function notOurs(r: HttpReply): boolean {
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
export function refusedBy(r: HttpReply, page: boolean): string | undefined {
  if (r.status !== 400 && r.status !== 409) return undefined;
  const code = errorCode(r);
  if (page && code === "FeatureNotYetSupportedForHierarchicalNamespaceAccounts") {
    return "a Data Lake Storage Gen2 account (hierarchical namespace)";
  }
  if (code !== "BlobTypeNotSupported") return undefined;
  return page ? "a premium block blob account (BlockBlobStorage)" : "a premium page blob account";
}

/**
 * One request to the container URL + `target`: `/` + a blob path (as {@link blobPath} encodes it),
 * then the query, such as `/locks%2Fa?comp=lease`, or only a query for the container itself.
 */
type Call = (
  method: string,
  target: string,
  headers: Record<string, string>,
  signal: AbortSignal | undefined,
) => Promise<HttpReply>;

/** Requests to one container, signed with its credential. */
export interface Container {
  call: Call;
  /** The BackendError for an unexpected answer `r` to `op` on lock `key`. */
  httpError(op: string, key: string, r: HttpReply): BackendError;
}

/** The requests of one backend instance. */
export function container({ auth, containerUrl, fetchFn }: ResolvedOptions): Container {
  const { secrets } = auth;
  const call: Call = async (method, target, headers, signal) => {
    const url = containerUrl + target;
    let req: { url: string; headers: Record<string, string> };
    try {
      // Every PUT here is body-less. Azure answers 411 to a PUT without Content-Length, and a
      // custom fetch may not add it: set it explicitly (SharedKey signs "0" as an empty line).
      const h: Record<string, string> = {
        ...headers,
        "x-ms-date": new Date().toUTCString(),
        "x-ms-version": VERSION,
      };
      if (method === "PUT") h["content-length"] = "0";
      req = await auth.authorize(method, url, h, signal);
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      const cause = scrub(error, secrets);
      // A credential that timed out may answer next time; any other failure is taken as a refusal.
      const refused = !/Timeout|Abort/.test(cause.name);
      throw new BackendError(`options.credential gave no token: ${cause.message}`, {
        backend: NAME,
        retryable: !refused,
        auth: refused,
        cause,
      });
    }
    return send(NAME, fetchFn, req.url, { method, headers: req.headers, signal }, secrets);
  };

  function httpError(op: string, key: string, r: HttpReply): BackendError {
    const code = redact(errorCode(r), secrets);
    const refused = authStatus(r.status);
    const hint = refused
      ? ": check the account key, the SAS (read, write and create) or the credential's role (Storage Blob Data Contributor)"
      : "";
    return new BackendError(
      `${op} ${JSON.stringify(key)} failed: HTTP ${r.status}${code === "" ? "" : ` ${code}`}${hint}`,
      {
        backend: NAME,
        status: r.status,
        retryable: retryableStatus(r.status),
        auth: refused,
      },
    );
  }

  return { call, httpError };
}
