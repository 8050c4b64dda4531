// AWS Signature Version 4 for one POST with a JSON body and no query, signed with WebCrypto
// (HMAC-SHA256, SHA-256). Shared by the backends over AWS-signed APIs (today dynamodb): what the
// DynamoDB JSON API needs, nothing more. Internal: not a package entry.
// test/backends/shared/sigv4.test.ts checks it against the AWS SDK's own signer.

/** AWS credentials: an access key pair, with the session token of temporary credentials. */
export interface AwsCredentials {
  /** The access key id. */
  accessKeyId: string;
  /** The secret access key. */
  secretAccessKey: string;
  /** The session token of temporary credentials. */
  sessionToken?: string | undefined;
}

/** A request to sign: the URL, the headers to send (all signed), and the body. */
export interface Unsigned {
  url: URL;
  headers: Record<string, string>;
  body: string;
}

const enc = new TextEncoder();

function hex(bytes: ArrayBuffer): string {
  let s = "";
  for (const b of new Uint8Array(bytes)) s += b.toString(16).padStart(2, "0");
  return s;
}

async function sha256(text: string): Promise<string> {
  return hex(await crypto.subtle.digest("SHA-256", enc.encode(text)));
}

async function hmac(key: ArrayBuffer | Uint8Array<ArrayBuffer>, text: string): Promise<ArrayBuffer> {
  const k = await crypto.subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return crypto.subtle.sign("HMAC", k, enc.encode(text));
}

/** RFC 3986 encoding, as SigV4 wants it for each path segment. */
function encodeSegment(segment: string): string {
  return encodeURIComponent(segment).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

/** `20260101T120000Z` for a Date. */
export function amzDate(date: Date): string {
  return date
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}/, "");
}

/** Signs one request: the headers to send, and the signature alone (a secret for redaction). */
export type Sign = (
  request: Unsigned,
  credentials: AwsCredentials,
  date?: Date,
) => Promise<{ headers: Record<string, string>; signature: string }>;

/**
 * A signer for one service in one region. The signing key (four HMACs) is derived once per UTC
 * day and secret key; each request then costs two SHA-256 digests and one HMAC.
 */
export function signer(region: string, service: string): Sign {
  let cached: { day: string; secret: string; key: Promise<CryptoKey> } | undefined;

  const signingKey = (day: string, secret: string): Promise<CryptoKey> => {
    if (cached?.day === day && cached.secret === secret) return cached.key;
    const key = (async () => {
      const kDate = await hmac(enc.encode(`AWS4${secret}`), day);
      const kRegion = await hmac(kDate, region);
      const kService = await hmac(kRegion, service);
      const kSigning = await hmac(kService, "aws4_request");
      return crypto.subtle.importKey("raw", kSigning, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    })();
    // A failed derivation is not cached: the next request derives again.
    key.catch(() => {
      if (cached?.key === key) cached = undefined;
    });
    cached = { day, secret, key };
    return key;
  };

  /**
   * The headers to send: `headers` plus `x-amz-date`, `x-amz-security-token` (temporary
   * credentials) and `authorization`, and the signature alone (a secret for redaction).
   */
  return async function sign(
    request: Unsigned,
    credentials: AwsCredentials,
    date = new Date(),
  ): Promise<{ headers: Record<string, string>; signature: string }> {
    const stamp = amzDate(date);
    const day = stamp.slice(0, 8);
    const headers: Record<string, string> = { ...request.headers, "x-amz-date": stamp };
    if (credentials.sessionToken) headers["x-amz-security-token"] = credentials.sessionToken;
    // host is signed but not sent by us: fetch sets it from the URL (and may not be told otherwise).
    const signed: Record<string, string> = { ...headers, host: request.url.host };
    const names = Object.keys(signed)
      .map((n) => n.toLowerCase())
      .sort();
    const lower = Object.fromEntries(Object.entries(signed).map(([n, v]) => [n.toLowerCase(), v]));
    const canonicalHeaders = names.map((n) => `${n}:${lower[n]!.trim().replace(/\s+/g, " ")}\n`).join("");
    const signedHeaders = names.join(";");
    // The URL's path is already percent-encoded; SigV4 (for every service but S3) encodes each
    // segment once more.
    const path = request.url.pathname.split("/").map(encodeSegment).join("/") || "/";
    const canonical = [
      "POST",
      path,
      "", // DynamoDB requests carry no query
      canonicalHeaders,
      signedHeaders,
      await sha256(request.body),
    ].join("\n");
    const scope = `${day}/${region}/${service}/aws4_request`;
    const toSign = ["AWS4-HMAC-SHA256", stamp, scope, await sha256(canonical)].join("\n");
    const key = await signingKey(day, credentials.secretAccessKey);
    const signature = hex(await crypto.subtle.sign("HMAC", key, enc.encode(toSign)));
    headers.authorization = `AWS4-HMAC-SHA256 Credential=${credentials.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
    return { headers, signature };
  };
}
