import { existsSync } from "node:fs";
import { defineConfig } from "tsup";

// One entry per subpath export, plus the CLI (package.json "bin").
const entry = [
  "src/index.ts",
  "src/testing.ts",
  "src/cli.ts",
  ...["memory", "upstash", "azure-blob"].map((b) => `src/backends/${b}.ts`),
].filter((f) => existsSync(f));

export default defineConfig({
  entry,
  format: ["esm"],
  target: "es2022",
  dts: true,
  clean: true,
  splitting: true,
  treeshake: true,
  sourcemap: false,
  minify: false,
});
