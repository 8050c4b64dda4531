// Node 20 runner: the built package imported by its name (package.json "exports" → dist/), as an
// npm user on Node 20 gets it. Node 20 cannot parse `await using`, so the suite is transpiled
// first by esbuild (target es2022 lowers it) and imported from memory.

import { readFile } from "node:fs/promises";
import { transform } from "esbuild";
import * as core from "leasehold";
import { azureBlob } from "leasehold/azure-blob";
import { durableObject } from "leasehold/cloudflare";
import { dynamodb } from "leasehold/dynamodb";
import { memory } from "leasehold/memory";
import { quorum } from "leasehold/quorum";
import { upstash } from "leasehold/upstash";
import { nativeAwaitUsing, report } from "./runner-node.mjs";

const source = await readFile(new URL("./suite.ts", import.meta.url), "utf8");
const { code } = await transform(source, {
  loader: "ts",
  format: "esm",
  target: "es2022",
  sourcefile: "test/harness/smoke/suite.ts",
});
if (/\bawait\s+using\s+[\w$]+\s*=/.test(code)) throw new Error("esbuild left `await using` in the suite");
const suite = await import(`data:text/javascript;base64,${Buffer.from(code).toString("base64")}`);

await report(
  suite,
  { ...core, memory, upstash, azureBlob, quorum, durableObject, dynamodb },
  {
    node: process.versions.node,
    nativeAwaitUsing: nativeAwaitUsing(),
    suite: "lowered by esbuild",
  },
);
