// The backend conformance suite against the upstash backend, through the Upstash REST bridge
// and the real redis-server that test/harness/setup/upstash.ts starts.
import { describe, inject, it } from "vitest";
import { upstash } from "../../../src/backends/upstash/index.ts";
import { testBackend } from "../../../src/testing/index.ts";

const { url, token } = inject("upstash");

testBackend(
  { describe, it },
  { backend: () => upstash({ url, token }), ttl: 500, prefix: "conformance-upstash" },
);
