// Bun runner: the built package imported by its name (package.json "exports" → dist/), as a
// Bun user installing from npm gets it; the suite's TypeScript and `await using` run natively.
import * as core from "leasehold";
import { azureBlob } from "leasehold/azure-blob";
import { durableObject } from "leasehold/cloudflare";
import { dynamodb } from "leasehold/dynamodb";
import { memory } from "leasehold/memory";
import { quorum } from "leasehold/quorum";
import { upstash } from "leasehold/upstash";
import { smoke, smokeEnv } from "./suite.ts";

const bun = (globalThis as { Bun?: { version: string } }).Bun;
try {
  if (!bun) throw new Error("run-bun.ts must run on Bun");
  const result = await smoke(
    { ...core, memory, upstash, azureBlob, quorum, durableObject, dynamodb },
    smokeEnv((n) => process.env[n]),
  );
  console.log(`SMOKE_REPORT ${JSON.stringify({ ...result, bun: bun.version, suite: "native" })}`);
} catch (error) {
  console.error(error);
  process.exit(1);
}
