import { defineConfig } from "tsup";

// One entry per subpath export (the same list as package.json "exports" and jsr.json), plus
// the CLI (package.json "bin"), which needs no declarations.
const library = [
  "src/index.ts",
  "src/testing.ts",
  "src/backends/memory.ts",
  "src/backends/upstash.ts",
  "src/backends/azure-blob.ts",
];

export default defineConfig({
  entry: [...library, "src/cli.ts"],
  format: ["esm"],
  target: "es2022",
  dts: { entry: library },
  clean: true,
  splitting: true,
  treeshake: true,
  sourcemap: false,
  minify: false,
});
