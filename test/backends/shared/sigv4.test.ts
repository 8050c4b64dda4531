// leasehold's SigV4 (WebCrypto) against the AWS SDK's own signer (@smithy/signature-v4, what
// @aws-sdk/client-dynamodb signs with): the same request, date and credentials must give the same
// Authorization header. dynalite checks the header's shape but not the signature, so this is
// where a signing mistake shows.
import { createHash, createHmac } from "node:crypto";
import { SignatureV4 } from "@smithy/signature-v4";
import { describe, expect, it } from "vitest";
import { type AwsCredentials, signer } from "../../../src/backends/shared/sigv4.ts";
import { registerSecret } from "../../harness/secrets.ts";

type Data = string | ArrayBuffer | ArrayBufferView;
const bytes = (d: Data): Buffer =>
  typeof d === "string"
    ? Buffer.from(d)
    : d instanceof ArrayBuffer
      ? Buffer.from(d)
      : Buffer.from(d.buffer, d.byteOffset, d.byteLength);

/** The SDK's hash interface over node:crypto. */
class Sha256 {
  private readonly h;
  constructor(secret?: Data) {
    this.h = secret === undefined ? createHash("sha256") : createHmac("sha256", bytes(secret));
  }
  update(data: Data): void {
    this.h.update(bytes(data));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.h.digest());
  }
}

const body = JSON.stringify({
  TableName: "locks",
  Key: { pk: { S: "leasehold:job ü" } },
  ConditionExpression: "attribute_not_exists(#h)",
});

async function both(endpoint: string, credentials: AwsCredentials, date: Date, region = "eu-west-1") {
  const url = new URL(endpoint);
  const headers = {
    "content-type": "application/x-amz-json-1.0",
    "x-amz-target": "DynamoDB_20120810.UpdateItem",
  };
  const ours = await signer(region, "dynamodb")({ url, headers, body }, credentials, date);
  const sdk = await new SignatureV4({
    credentials,
    region,
    service: "dynamodb",
    sha256: Sha256,
    applyChecksum: false,
  }).sign(
    {
      method: "POST",
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port ? { port: Number(url.port) } : {}),
      path: url.pathname,
      query: {},
      headers: { ...headers, host: url.host },
      body,
    },
    { signingDate: date },
  );
  return { ours, sdk: sdk.headers as Record<string, string> };
}

describe("SigV4", () => {
  const keys: AwsCredentials = {
    accessKeyId: "AKIAIOSFODNN7EXAMPLE",
    secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
  };
  registerSecret(keys.secretAccessKey);

  it("signs a request exactly as the AWS SDK does", async () => {
    const date = new Date("2026-03-04T05:06:07.890Z");
    const { ours, sdk } = await both("https://dynamodb.eu-west-1.amazonaws.com", keys, date);
    expect(ours.headers.authorization).toBe(sdk.authorization);
    expect(ours.headers["x-amz-date"]).toBe("20260304T050607Z");
    expect(ours.headers.authorization).toContain(`Signature=${ours.signature}`);
  });

  it("signs the session token, a port and a path as the SDK does", async () => {
    const session = { ...keys, sessionToken: "IQoJb3JpZ2luX2VjEXAMPLE/session+token=" };
    registerSecret(session.sessionToken);
    const date = new Date("2026-12-31T23:59:59Z");
    const { ours, sdk } = await both("http://127.0.0.1:8000/proxy/a%20b", session, date, "us-east-1");
    expect(ours.headers["x-amz-security-token"]).toBe(session.sessionToken);
    expect(sdk["x-amz-security-token"]).toBe(session.sessionToken);
    expect(ours.headers.authorization).toBe(sdk.authorization);
    expect(ours.headers.authorization).toContain("x-amz-security-token");
  });

  it("derives the signing key again when the day or the secret changes", async () => {
    const sign = signer("eu-west-1", "dynamodb");
    const url = new URL("https://dynamodb.eu-west-1.amazonaws.com");
    const headers = {
      "content-type": "application/x-amz-json-1.0",
      "x-amz-target": "DynamoDB_20120810.GetItem",
    };
    const rotated = { ...keys, secretAccessKey: "another/secret/key/for/the/same/id0000" };
    registerSecret(rotated.secretAccessKey);
    for (const [credentials, iso] of [
      [keys, "2026-01-01T10:00:00Z"],
      [keys, "2026-01-02T00:00:01Z"],
      [rotated, "2026-01-02T00:00:02Z"],
    ] as const) {
      const date = new Date(iso);
      const ours = await sign({ url, headers, body }, credentials, date);
      const { sdk } = await both(url.href, credentials, date);
      // `both` signs an UpdateItem; sign that one with the cached signer too.
      const again = await sign(
        { url, headers: { ...headers, "x-amz-target": "DynamoDB_20120810.UpdateItem" }, body },
        credentials,
        date,
      );
      expect(again.headers.authorization).toBe(sdk.authorization);
      expect(ours.signature).not.toBe(again.signature);
    }
  });
});
