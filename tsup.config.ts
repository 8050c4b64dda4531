import { defineConfig } from "tsup";
import jsr from "./jsr.json" with { type: "json" };

// jsr.json "exports" is the one list of entry points: each subpath's source is built to
// dist/<source path without src/ and .ts>.js with its declarations. package.json "exports", the
// Deno import maps and tsconfig.test.json "paths" must agree with it: scripts/check-exports.mjs
// checks them. The CLI (package.json "bin") is built beside them and needs no declarations.
const sources = Object.values(jsr.exports).map((file) =>
  file === "./mod.ts" ? "src/index.ts" : file.slice(2),
);
const name = (source: string) => source.replace(/^src\//, "").replace(/\.ts$/, "");
const library = Object.fromEntries(sources.map((source) => [name(source), source]));

export default defineConfig({
  entry: { ...library, "cli/main": "cli/main.ts" },
  format: ["esm"],
  target: "es2022",
  dts: { entry: library },
  clean: true,
  splitting: true,
  treeshake: true,
  sourcemap: false,
  minify: false,
});
