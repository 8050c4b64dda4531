// Global setup: the TypeScript programs that tests run as Node processes (the CLI and the
// fixtures), bundled once per run by esbuild, so that each of the 400-odd processes a run starts
// loads plain JavaScript. Through `node --import tsx`, each took about 0.45 s more CPU and 0.3 s
// more time to start (0.6 s of CPU instead of 0.17 for `leasehold --help` here), which a run
// spent on loading tsx and checking its cache. Tests get a program's command line from
// `nodeScript()` (test/harness/node-script.ts).
//
// A bundle behaves as its source would: the same code, `await using` lowered for Node 20 as tsx
// lowers it, names kept, `import.meta.url` the source file's (the CLI finds package.json from it),
// and packages (ioredis, pg, …) imported from node_modules, not copied in: the bundles are
// written under node_modules/.cache, from where Node finds them. Removed after the run.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "esbuild";
import type { TestProject } from "vitest/node";

/** Every program a test runs with `nodeScript()`: its path from the repository's root. */
export const NODE_SCRIPTS = [
  "cli/main.ts",
  "test/harness/fixtures/invariant-worker.ts",
  "test/harness/fixtures/campaign.ts",
  "test/harness/fixtures/node-cron.ts",
  "test/harness/fixtures/fleet-child.ts",
] as const;
export type NodeScript = (typeof NODE_SCRIPTS)[number];

declare module "vitest" {
  export interface ProvidedContext {
    /** Each program of NODE_SCRIPTS → the absolute path of its bundle. */
    nodeScripts: Record<NodeScript, string>;
  }
}

const root = fileURLToPath(new URL("../../../", import.meta.url));

export default async function setup(project: TestProject): Promise<() => void> {
  const cache = join(root, "node_modules/.cache");
  mkdirSync(cache, { recursive: true });
  const dir = mkdtempSync(join(cache, "leasehold-test-"));
  const remove = () => rmSync(dir, { recursive: true, force: true });
  try {
    // One build per program: `import.meta.url` is each one's own.
    const bundles = await Promise.all(
      NODE_SCRIPTS.map(async (script) => {
        const outfile = join(dir, script.replace(/\.ts$/, ".mjs"));
        await build({
          entryPoints: [join(root, script)],
          outfile,
          bundle: true,
          format: "esm",
          platform: "node",
          packages: "external",
          target: "node20",
          keepNames: true,
          define: { "import.meta.url": JSON.stringify(pathToFileURL(join(root, script)).href) },
          logLevel: "warning",
        });
        return [script, outfile] as const;
      }),
    );
    project.provide("nodeScripts", Object.fromEntries(bundles) as Record<NodeScript, string>);
  } catch (error) {
    remove();
    throw error;
  }
  return remove;
}
