// src/ bundled as an app ships it (esbuild, ESM, one copy of the core shared by the entries), for
// the items that set the core's own cost beside a peer's: run through tsx, every function of src/
// would carry the name esbuild's keepNames gives it (a call per closure made, and a property of
// its own, 256 bytes, on each), which no built app has and the peers, plain JavaScript from
// node_modules, do not pay (issue 29 measured ×1.15–1.24 per operation on redis()).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

/** A bundle in a temporary directory: `load(entry)` imports one entry, `remove()` deletes it. */
export interface Bundle {
  dir: string;
  load<T>(entry: string): Promise<T>;
  remove(): void;
}

/** Bundles `entries` (name → path from the repository's root) into a temporary directory. */
export async function bundleSrc(entries: Record<string, string>): Promise<Bundle> {
  const dir = mkdtempSync(join(tmpdir(), "leasehold-bench-"));
  const root = fileURLToPath(new URL("../../", import.meta.url));
  await build({
    entryPoints: Object.fromEntries(Object.entries(entries).map(([name, path]) => [name, join(root, path)])),
    outdir: dir,
    // .mjs: tsx, which runs the bench, leaves it as it is (a .js file it transforms, names kept).
    outExtension: { ".js": ".mjs" },
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "neutral",
    // The peers' own packages and the drivers stay where they are (imported by the bench itself).
    packages: "external",
    target: "es2022",
    logLevel: "warning",
  });
  return {
    dir,
    load: <T>(entry: string) => import(join(dir, `${entry}.mjs`)) as Promise<T>,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
