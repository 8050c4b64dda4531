// The conformance suite on the memory backend: as it is, and as a store without expiry of its
// own (expiry: "observed"), where the core takes a lock over after seeing its version unchanged.
import { describe, it } from "vitest";
import { memory } from "../../../src/backends/memory/index.ts";
import { testBackend } from "../../../src/testing/index.ts";

describe("memory", () => {
  testBackend({ describe, it }, { backend: () => memory(), ttl: 300 });
});
describe('memory, expiry: "observed"', () => {
  testBackend({ describe, it }, { backend: () => memory({ expiry: "observed" }), ttl: 300 });
});
