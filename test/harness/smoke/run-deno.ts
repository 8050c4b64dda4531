// Deno runner: the library imported the way a JSR user writes it, `jsr:@leasehold/leasehold`
// and its subpaths; test/harness/smoke/deno.json maps those specifiers to the TypeScript sources that
// jsr.json publishes (scripts/check-exports.mjs keeps the two in step). Run with --check, so the
// sources and the suite are type-checked by Deno too, and with network access to 127.0.0.1 only.
import * as core from "jsr:@leasehold/leasehold";
import { azureBlob } from "jsr:@leasehold/leasehold/azure-blob";
import { durableObject } from "jsr:@leasehold/leasehold/cloudflare";
import { dynamodb } from "jsr:@leasehold/leasehold/dynamodb";
import { memory } from "jsr:@leasehold/leasehold/memory";
import { quorum } from "jsr:@leasehold/leasehold/quorum";
import { upstash } from "jsr:@leasehold/leasehold/upstash";
import { smoke, smokeEnv } from "./suite.ts";

try {
  const result = await smoke(
    { ...core, memory, upstash, azureBlob, quorum, durableObject, dynamodb },
    smokeEnv((n) => Deno.env.get(n)),
  );
  console.log(`SMOKE_REPORT ${JSON.stringify({ ...result, deno: Deno.version.deno, suite: "native" })}`);
} catch (error) {
  console.error(error);
  Deno.exit(1);
}
