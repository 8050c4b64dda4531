#!/usr/bin/env node
// Fails when the places that name the package's entry points disagree:
// - package.json "exports" (npm) and jsr.json "exports" (JSR) list the same subpaths;
// - each subpath's JSR source (mod.ts stands for the file it re-exports) is a tsup build entry,
//   and package.json points that subpath at the entry's output: dist/<same path>.js and .d.ts;
// - "main"/"types" are the "." entry's; every other build entry is a "bin";
// - every build output exists (after `npm run build`);
// - the jsr: import maps of examples/deno and test/harness/smoke map each JSR subpath to its source, and
//   tsconfig.test.json's "paths" resolve each npm subpath to its source;
// - the backends among the subpaths are exactly the rows of scripts/backends.mjs, each at its
//   folder's index.ts, and every other subpath is no backend's.
// Run: node scripts/check-exports.mjs
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { tsImport } from "tsx/esm/api";
import ts from "typescript";
import { BACKENDS, entryOf, subpathOf } from "./backends.mjs";

const root = fileURLToPath(new URL("../", import.meta.url));
const read = (file) => readFileSync(`${root}${file}`, "utf8");
const json = (file) => JSON.parse(read(file));
const problems = [];
const problem = (message) => problems.push(message);
const norm = (p) => p.replace(/^\.\//, "");
const sameSet = (a, b) => a.length === b.length && a.every((x) => b.includes(x));

const pkg = json("package.json");
const jsr = json("jsr.json");
process.chdir(root); // tsup.config.ts lists its entries relative to the working directory
const tsup = (await tsImport(new URL("../tsup.config.ts", import.meta.url).href, import.meta.url)).default;
const config = typeof tsup === "function" ? await tsup({}) : tsup;
const entries = (Array.isArray(config) ? config : [config]).flatMap((c) =>
  Array.isArray(c.entry) ? c.entry : Object.values(c.entry ?? {}),
);
// Entries are named after their source: src/x/y.ts builds to dist/x/y.js, cli/main.ts to dist/cli/main.js.
const entrySet = entries.map(norm);

/** The source file a JSR export stands for: mod.ts counts as the one file it re-exports. */
function sourceOf(file) {
  const path = norm(file);
  if (path !== "mod.ts") return path;
  const reexports = [...read(path).matchAll(/^export \* from "\.\/([^"]+)";$/gm)].map((m) => m[1]);
  if (reexports.length !== 1) problem(`mod.ts must re-export exactly one file, found ${reexports.length}`);
  return reexports[0];
}
const distOf = (source) => `dist/${source.replace(/^src\//, "").replace(/\.ts$/, "")}`;

// 1. The same subpaths on npm and JSR.
const npmSubpaths = Object.keys(pkg.exports).filter((s) => s !== "./package.json");
const jsrSubpaths = Object.keys(jsr.exports);
for (const s of npmSubpaths)
  if (!jsrSubpaths.includes(s)) problem(`${s}: in package.json exports, not in jsr.json`);
for (const s of jsrSubpaths)
  if (!npmSubpaths.includes(s)) problem(`${s}: in jsr.json exports, not in package.json`);

// 2. Each subpath: JSR source = a build entry = the npm target.
const usedEntries = new Set();
for (const s of jsrSubpaths) {
  const source = sourceOf(jsr.exports[s]);
  if (!existsSync(`${root}${source}`)) problem(`${s}: jsr.json points at ${source}, which does not exist`);
  if (!entrySet.includes(source)) problem(`${s}: ${source} is not a tsup entry (tsup.config.ts)`);
  usedEntries.add(source);
  const target = pkg.exports[s];
  if (target === undefined) continue;
  const want = { types: `./${distOf(source)}.d.ts`, default: `./${distOf(source)}.js` };
  if (typeof target !== "object" || target.types !== want.types || target.default !== want.default) {
    problem(
      `${s}: package.json exports ${JSON.stringify(target)}, expected ${JSON.stringify(want)} (built from ${source})`,
    );
  }
  if (typeof target === "object" && Object.keys(target)[0] !== "types")
    problem(`${s}: "types" must come first`);
}
const dot = pkg.exports["."];
if (pkg.main !== undefined && pkg.main !== dot?.default)
  problem(`"main" ${pkg.main} is not the "." export ${dot?.default}`);
if (pkg.types !== undefined && pkg.types !== dot?.types)
  problem(`"types" ${pkg.types} is not the "." export's ${dot?.types}`);

// 3. Every other build entry is a bin.
const bins = typeof pkg.bin === "string" ? [pkg.bin] : Object.values(pkg.bin ?? {});
for (const entry of entrySet) {
  if (usedEntries.has(entry)) continue;
  if (!bins.map(norm).includes(`${distOf(entry)}.js`))
    problem(`tsup entry ${entry} is neither an export nor a bin`);
}
for (const bin of bins) {
  const source = entrySet.find((entry) => `${distOf(entry)}.js` === norm(bin));
  if (source === undefined) problem(`bin ${bin}: ${source} is not a tsup entry (or does not exist yet)`);
}

// 4. The build produced every file the exports and bins name.
if (!existsSync(`${root}dist`)) {
  problem("dist/ is missing: run `npm run build` first");
} else {
  for (const s of npmSubpaths) {
    for (const file of Object.values(pkg.exports[s])) {
      if (!existsSync(`${root}${norm(file)}`)) problem(`${s}: ${file} was not built`);
    }
  }
  for (const bin of bins) if (!existsSync(`${root}${norm(bin)}`)) problem(`bin ${bin} was not built`);
}

// 5. The places that stand in for the published package agree with it.
for (const file of ["examples/deno/deno.json", "test/harness/smoke/deno.json"]) {
  const map = json(file).imports ?? {};
  const up = "../".repeat(file.split("/").length - 1); // from the file's folder to the root
  const want = Object.fromEntries(
    jsrSubpaths.map((s) => [`jsr:${jsr.name}${s.slice(1)}`, `${up}${norm(jsr.exports[s])}`]),
  );
  const keys = Object.keys(map).filter((k) => k.startsWith(`jsr:${jsr.name}`));
  if (!sameSet(keys, Object.keys(want)))
    problem(`${file}: maps ${keys.join(", ")}; jsr.json has ${Object.keys(want).join(", ")}`);
  for (const [k, v] of Object.entries(want))
    if (map[k] !== undefined && map[k] !== v) problem(`${file}: ${k} → ${map[k]}, expected ${v}`);
}
const tsconfig = ts.parseConfigFileTextToJson("tsconfig.test.json", read("tsconfig.test.json"));
const paths = tsconfig.config?.compilerOptions?.paths ?? {};
for (const s of npmSubpaths) {
  if (jsr.exports[s] === undefined) continue; // reported above
  const spec = `${pkg.name}${s.slice(1)}`;
  const source = sourceOf(jsr.exports[s]);
  const exact = paths[spec];
  const wild = Object.entries(paths).find(([k]) => k.endsWith("/*") && spec.startsWith(k.slice(0, -1)));
  const candidates =
    exact ?? (wild ? wild[1].map((p) => p.replace("*", spec.slice(wild[0].length - 1))) : []);
  const resolved = candidates.map(norm).find((p) => existsSync(`${root}${p}`));
  if (resolved !== source)
    problem(`tsconfig.test.json paths: ${spec} resolves to ${resolved ?? "nothing"}, expected ${source}`);
}

// 6. The backends are the table's (scripts/backends.mjs), each entry its folder's index.ts.
const rows = new Map(BACKENDS.map((row) => [subpathOf(row), row]));
for (const [subpath, row] of rows) {
  if (jsr.exports[subpath] === undefined)
    problem(`${subpath}: a backend in scripts/backends.mjs, not in jsr.json`);
  else if (norm(jsr.exports[subpath]) !== entryOf(row))
    problem(
      `${subpath}: jsr.json points at ${jsr.exports[subpath]}, scripts/backends.mjs at ./${entryOf(row)}`,
    );
}
for (const s of jsrSubpaths) {
  if (!rows.has(s) && norm(jsr.exports[s]).startsWith("src/backends/"))
    problem(`${s}: a backend in jsr.json, not in scripts/backends.mjs`);
}

if (problems.length > 0) {
  console.error(`check-exports: ${problems.length} problem(s):\n  - ${problems.join("\n  - ")}`);
  process.exit(1);
}
console.log(
  `check-exports: ok — ${npmSubpaths.length} subpaths (${npmSubpaths.join(" ")}) agree in package.json, jsr.json, tsup.config.ts, the import maps, scripts/backends.mjs and dist/`,
);
