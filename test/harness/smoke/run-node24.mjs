// Node 24 runner: the built package imported by its name (dist/), and the suite's TypeScript
// loaded as is: Node 24 strips the types itself and runs `await using` natively.
import * as core from "leasehold";
import { azureBlob } from "leasehold/azure-blob";
import { durableObject } from "leasehold/cloudflare";
import { dynamodb } from "leasehold/dynamodb";
import { memory } from "leasehold/memory";
import { quorum } from "leasehold/quorum";
import { upstash } from "leasehold/upstash";
import { nativeAwaitUsing, report } from "./runner-node.mjs";
import * as suite from "./suite.ts";

if (!nativeAwaitUsing()) throw new Error(`Node ${process.versions.node} cannot parse \`await using\``);

await report(
  suite,
  { ...core, memory, upstash, azureBlob, quorum, durableObject, dynamodb },
  {
    node: process.versions.node,
    nativeAwaitUsing: true,
    suite: "native (type stripping only)",
  },
);
