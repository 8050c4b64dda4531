#!/usr/bin/env node
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
// Bundle isolation and size, on the built package (run `npm run build` first).
//
// Isolation: each subpath of package.json "exports" is bundled from dist/ by esbuild, as a user's
// bundler would, and
// - the core entry (".") must contain no adapter's marker strings,
// - each adapter entry must contain its own marker and no other adapter's,
// - "./testing" must contain no adapter;
// and, precisely, the same entries bundled from src/ (esbuild's metafile lists the files pulled
// in) must pull no src/backends/ file but their own and the helpers every backend shares
// (src/backends/shared/).
//
// Size: min+gzip bytes per subpath (all its exports), and of `createMutex` + one backend factory
// (what an app ships, tree-shaken), reported; and the budgets (docs/DESIGN.md §7): each lock-only
// entry of scripts/sizes.mjs, built from src/ exactly as bench/size.ts builds it, must be within
// its budget there, or the check fails.
// Run: node scripts/check-bundles.mjs
import { gzipSync } from "node:zlib";
import { build } from "esbuild";
import { BACKENDS, subpathOf } from "./backends.mjs";
import { BUDGETS, checkBudgets, SETTINGS } from "./sizes.mjs";

const root = fileURLToPath(new URL("../", import.meta.url));
const pkg = JSON.parse(readFileSync(`${root}package.json`, "utf8"));
const jsr = JSON.parse(readFileSync(`${root}jsr.json`, "utf8"));

// Strings only an adapter's code contains (they survive minification: protocol text), and its
// factory: the table of backends.
const ADAPTERS = Object.fromEntries(
  BACKENDS.map((row) => [subpathOf(row), { markers: row.markers, factory: row.factory }]),
);

const subpaths = Object.keys(pkg.exports).filter((s) => s !== "./package.json");
const problems = [];

async function bundle(options) {
  const out = await build({
    bundle: true,
    write: false,
    minify: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    metafile: true,
    absWorkingDir: root,
    logLevel: "error",
    // tsup's split chunks are imported for effect by the dist/ entries; "sideEffects": false drops them.
    logOverride: { "ignored-bare-import": "silent" },
    ...options,
  });
  const code = out.outputFiles[0].text;
  return { code, inputs: Object.keys(out.metafile.inputs), gzip: gzipSync(code, { level: 9 }).length };
}

/** A module that imports everything a subpath exports, through the package's own name. */
const entryFor = (...specs) => ({
  stdin: {
    contents: specs.map((s, i) => `export * as m${i} from ${JSON.stringify(s)};`).join("\n"),
    resolveDir: root,
    loader: "js",
  },
});
const spec = (subpath) => `${pkg.name}${subpath.slice(1)}`;

const sizes = [];
for (const subpath of subpaths) {
  const { code, gzip } = await bundle(entryFor(spec(subpath)));
  sizes.push({ what: spec(subpath), min: code.length, gzip });
  const own = ADAPTERS[subpath];
  for (const [other, { markers }] of Object.entries(ADAPTERS)) {
    if (other === subpath) continue;
    const hit = markers.find((m) => m.test(code));
    if (hit) problems.push(`${spec(subpath)} (dist) pulls in ${spec(other)} code: it contains ${hit}`);
  }
  if (own && !own.markers.every((m) => m.test(code))) {
    problems.push(
      `${spec(subpath)}: its markers ${own.markers.join(" ")} are missing; update its markers in scripts/backends.mjs`,
    );
  }

  // The same from the sources, by file.
  const source = jsr.exports[subpath];
  const { inputs } = await bundle({ entryPoints: [source] });
  // A backend is a folder, src/backends/<name>/, whose index.ts is the entry.
  const folder = /^\.\/(src\/backends\/[^/]+\/)index\.ts$/.exec(source)?.[1];
  const foreign = inputs.filter(
    (f) =>
      f.startsWith("src/backends/") &&
      !f.startsWith("src/backends/shared/") &&
      !(folder && f.startsWith(folder)),
  );
  if (foreign.length > 0) problems.push(`${source} (${subpath}) pulls in ${foreign.join(", ")}`);
}
// What an app ships: createMutex and one backend factory, tree-shaken.
for (const adapter of Object.keys(ADAPTERS).filter((a) => subpaths.includes(a))) {
  const contents = `export { createMutex } from "${pkg.name}";\nexport { ${ADAPTERS[adapter].factory} } from "${spec(adapter)}";`;
  const { code, gzip } = await bundle({ stdin: { contents, resolveDir: root, loader: "js" } });
  sizes.push({ what: `createMutex + ${ADAPTERS[adapter].factory}()`, min: code.length, gzip });
}

const width = Math.max(...sizes.map((s) => s.what.length));
console.log(
  "size report (esbuild --minify --bundle of dist/; gzip -9). Subpaths: every export; apps: what they import",
);
console.log(`  ${"entry".padEnd(width)}  ${"min".padStart(7)}  ${"min+gzip".padStart(8)}`);
for (const s of sizes) {
  console.log(`  ${s.what.padEnd(width)}  ${String(s.min).padStart(7)}  ${String(s.gzip).padStart(8)}`);
}

// The line held: the lock-only entries, from src/, against their ceilings (scripts/sizes.mjs);
// issue 29's budgets beside them, reported (bench/RESULTS.md judges them).
console.log(`size ceilings (lock-only entries of scripts/sizes.mjs, from src/: ${SETTINGS})`);
for (const b of await checkBudgets()) {
  const verdict = b.over ? `OVER by ${b.over} B` : `within, ${b.budget - b.gzip} B to spare`;
  const target = BUDGETS[b.id];
  const budget =
    b.gzip <= target
      ? `within the budget of ${target} B`
      : `the budget ${target} B: over by ${b.gzip - target} B`;
  console.log(
    `  ${b.label.padEnd(36)}  ${String(b.gzip).padStart(6)} B  ≤ ${b.budget} B: ${verdict} (${budget})`,
  );
  if (b.over)
    problems.push(
      `${b.label}: ${b.gzip} B min+gzip, over its ceiling of ${b.budget} B by ${b.over} B (scripts/sizes.mjs; bench/size.ts shows each file's bytes)`,
    );
}

if (problems.length > 0) {
  console.error(`check-bundles: ${problems.length} problem(s):\n  - ${problems.join("\n  - ")}`);
  process.exit(1);
}
console.log(
  "check-bundles: ok — the core pulls no adapter, no adapter pulls another, and every size ceiling holds",
);
