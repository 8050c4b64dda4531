// The backend conformance suite (with its observed-expiry checks) against the dynamodb backend
// and dynalite, which test/harness/setup/dynamodb.ts starts.
import { describe, inject, it } from "vitest";
import { dynamodb } from "../../../src/backends/dynamodb/index.ts";
import { testBackend } from "../../../src/testing/index.ts";

const { endpoint, region, credentials, table } = inject("dynamodb");

testBackend(
  { describe, it },
  {
    backend: () => dynamodb({ table, region, credentials, endpoint }),
    // 2 s: in full runs, dynalite's answers to 100 concurrent writes came later than a 1 s ttl's
    // attempt bound (788 ms) for some of them.
    ttl: 2_000,
    prefix: "conformance-dynamodb",
  },
);
