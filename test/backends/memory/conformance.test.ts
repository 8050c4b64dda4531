import { describe, it } from "vitest";
import { memory } from "../../../src/backends/memory.ts";
import { testBackend } from "../../../src/testing.ts";

testBackend({ describe, it }, { backend: () => memory(), ttl: 300 });
