// One DynamoDB JSON 1.0 API call, signed and mapped to BackendError with every secret removed;
// and the table creation behind the `createTable` option. Internal: not a package entry.
import { BackendError } from "../../errors.ts";
import { abortable } from "../../signals.ts";
import { sleep } from "../../time.ts";
import { send } from "../shared/http.ts";
import { authStatus, retryableStatus } from "../shared/options.ts";
import { redact } from "../shared/redact.ts";
import { signer } from "../shared/sigv4.ts";
import type { Config } from "./options.ts";

export const NAME = "dynamodb";

/** An item as the JSON API writes it: attribute name → `{ S: "..." }`, `{ N: "..." }`, ... */
export type Item = Record<string, Record<string, unknown>>;

/** A call's outcome: the reply's JSON, or a failed condition (with the old item when the server sent it). */
export type Reply = { ok: true; json: Record<string, unknown> } | { ok: false; item: Item | undefined };

// Errors worth another try: throttling, capacity, a conflicting transaction, the server's own.
const RETRYABLE = new Set([
  "ProvisionedThroughputExceededException",
  "ThrottlingException",
  "RequestLimitExceeded",
  "TransactionConflictException",
  "InternalServerError",
  "InternalFailure",
  "ServiceUnavailable",
  "LimitExceededException",
]);

// The credentials were refused, or lack the permission.
const AUTH = new Set([
  "UnrecognizedClientException",
  "InvalidSignatureException",
  "IncompleteSignatureException",
  "MissingAuthenticationTokenException",
  "AccessDeniedException",
  "ExpiredTokenException",
  "InvalidClientTokenId",
  "SignatureDoesNotMatch",
]);

const AUTH_HINT =
  ": check the access key, the secret key, the session token (temporary credentials expire) and this machine's clock (a signature is valid for 5 minutes); the IAM policy needs dynamodb:UpdateItem and dynamodb:GetItem on the table";

/** The client of one table. */
export interface Client {
  /**
   * Sends `operation` with `body` (one request). When the table is missing and `createTable` is
   * on, creates it, waits until it is active, and sends the operation again.
   */
  call(operation: string, body: Record<string, unknown>, signal: AbortSignal | undefined): Promise<Reply>;
}

/** The client of one table: `call` sends one operation; the table is created on demand when asked to. */
export function client(cfg: Config): Client {
  const sign = signer(cfg.region, "dynamodb");
  const tableHint =
    `table ${JSON.stringify(cfg.table)} does not exist in ${cfg.region}: create it with partition key pk (String) ` +
    "and no sort key (on-demand capacity suits a lock table), or pass createTable: true to let leasehold create it";

  async function once(
    operation: string,
    body: Record<string, unknown>,
    signal: AbortSignal | undefined,
  ): Promise<Reply> {
    const credentials = await cfg.credentials();
    const text = JSON.stringify(body);
    const { headers, signature } = await sign(
      {
        url: cfg.url,
        headers: {
          "content-type": "application/x-amz-json-1.0",
          "x-amz-target": `DynamoDB_20120810.${operation}`,
        },
        body: text,
      },
      credentials,
    );
    const secrets = [credentials.secretAccessKey, signature];
    if (credentials.sessionToken) secrets.push(credentials.sessionToken);
    const reply = await send(
      NAME,
      cfg.fetch,
      cfg.url.href,
      { method: "POST", headers, body: text, signal },
      secrets,
    );
    const { status } = reply;
    let json: Record<string, unknown> | undefined;
    try {
      const parsed: unknown = JSON.parse(reply.body);
      if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) {
        json = parsed as Record<string, unknown>;
      }
    } catch {
      // Not JSON: a proxy's error page, or a body cut short.
    }
    if (status === 200 && json) return { ok: true, json };
    const type = typeof json?.__type === "string" ? json.__type.slice(json.__type.indexOf("#") + 1) : "";
    if (type === "ConditionalCheckFailedException") {
      const item = json?.Item;
      return { ok: false, item: typeof item === "object" && item !== null ? (item as Item) : undefined };
    }
    const raw = json?.message ?? json?.Message;
    const message = typeof raw === "string" ? redact(raw, secrets).slice(0, 300) : "";
    const what = type ? `${type}${message ? `: ${message}` : ""}` : `HTTP ${status}`;
    if (type === "ResourceNotFoundException") {
      throw new BackendError(`${what} (${tableHint})`, { backend: NAME, status, retryable: false });
    }
    if (AUTH.has(type) || (!type && authStatus(status))) {
      throw new BackendError(`${what} (HTTP ${status})${AUTH_HINT}`, {
        backend: NAME,
        status,
        retryable: false,
        auth: true,
      });
    }
    if (!json) {
      const snippet = redact(reply.body, secrets).slice(0, 80).replace(/\s+/g, " ");
      throw new BackendError(`HTTP ${status} with a body that is not JSON: ${JSON.stringify(snippet)}`, {
        backend: NAME,
        status,
        retryable: true,
      });
    }
    throw new BackendError(`${what} (HTTP ${status})`, {
      backend: NAME,
      status,
      retryable: RETRYABLE.has(type) || retryableStatus(status),
    });
  }

  // The table creation in progress or done, shared by every call of this backend.
  let creating: Promise<void> | undefined;

  /** Creates the table (on-demand, key pk) unless it exists, and waits until it is ACTIVE. */
  async function createTable(): Promise<void> {
    const created = await once(
      "CreateTable",
      {
        TableName: cfg.table,
        AttributeDefinitions: [{ AttributeName: "pk", AttributeType: "S" }],
        KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }],
        BillingMode: "PAY_PER_REQUEST",
      },
      undefined,
    ).catch((error: unknown) => {
      // Someone else created it meanwhile, or is creating it: wait for it below.
      if (error instanceof BackendError && /\] ResourceInUseException/.test(error.message)) return undefined;
      throw error;
    });
    if (created && !created.ok)
      throw new BackendError("CreateTable failed a condition", { backend: NAME, retryable: true });
    const deadline = Date.now() + 300_000;
    for (;;) {
      const described = await once("DescribeTable", { TableName: cfg.table }, undefined);
      const table = described.ok
        ? (described.json.Table as { TableStatus?: unknown } | undefined)
        : undefined;
      if (table?.TableStatus === "ACTIVE") return;
      if (Date.now() > deadline) {
        throw new BackendError(
          `table ${JSON.stringify(cfg.table)} was not ACTIVE 5 minutes after CreateTable`,
          {
            backend: NAME,
            retryable: true,
          },
        );
      }
      await sleep(250);
    }
  }

  async function call(
    operation: string,
    body: Record<string, unknown>,
    signal: AbortSignal | undefined,
  ): Promise<Reply> {
    const request = { TableName: cfg.table, ...body };
    try {
      return await once(operation, request, signal);
    } catch (error) {
      const missing = error instanceof BackendError && /\] ResourceNotFoundException/.test(error.message);
      if (!missing || !cfg.createTable) throw error;
      creating ??= createTable().catch((e: unknown) => {
        creating = undefined;
        throw e;
      });
      await (signal ? abortable(creating, signal) : creating);
      return once(operation, request, signal);
    }
  }

  return { call };
}
