// The command line that runs one of the repository's TypeScript programs (the CLI, a fixture)
// as a Node process: plain JavaScript bundled by the global setup (test/harness/setup/node-scripts.ts).
import { inject } from "vitest";
import type { NodeScript } from "./setup/node-scripts.ts";

/** `[node, bundle, ...args]` for `script`: spawn(first, rest). */
export function nodeScript(script: NodeScript, ...args: string[]): [string, ...string[]] {
  return [process.execPath, inject("nodeScripts")[script], ...args];
}
