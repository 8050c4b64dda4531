#!/usr/bin/env node
// The packaging checks `npm test` runs after the build, each in its own process; fails if any fails:
//   exports   scripts/check-exports.mjs: package.json, jsr.json, tsup entries and dist/ agree
//   publint   publint --strict: package.json fields and the files npm would pack
//   attw      are-the-types-wrong on the packed tarball (npm pack), profile esm-only
//   jsr       deno publish --dry-run --allow-dirty: JSR's checks, slow types included
//   bundles   scripts/check-bundles.mjs: no adapter code in the core or another adapter; the size
//             budgets (scripts/sizes.mjs)
//
// Why "esm-only" for attw: leasehold ships ESM only ("type": "module", "default" conditions) and
// needs Node ≥ 20, so the two resolutions that profile skips are not supported setups: `node10`
// (TypeScript's legacy resolution, which ignores "exports": subpaths cannot resolve) and
// `node16-cjs` (a CommonJS `require`, which gets ESM; Node 20.19+ and 22.12+ can require(esm),
// older ones use `await import()`). Every ESM and bundler resolution must be clean.
//
// Run: node scripts/check-package.mjs [step…]   (default: every step)
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../", import.meta.url));
const bin = (name) => join(root, "node_modules", ".bin", name);
const env = { ...process.env, NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1", DENO_NO_PROMPT: "1" };

function exec(command, args, options = {}) {
  const r = spawnSync(command, args, { cwd: root, env, stdio: "inherit", ...options });
  if (r.error) throw r.error;
  return r.status ?? 1;
}

const steps = {
  exports: () => exec(process.execPath, ["scripts/check-exports.mjs"]),
  publint: () => exec(bin("publint"), ["--strict"]),
  attw: () => {
    // The tarball exactly as npm would publish it (no lifecycle scripts).
    const dir = mkdtempSync(join(tmpdir(), "leasehold-pack-"));
    try {
      const packed = exec("npm", ["pack", "--ignore-scripts", "--silent", "--pack-destination", dir], {
        stdio: ["ignore", "ignore", "inherit"],
      });
      if (packed !== 0) return packed;
      const tgz = readdirSync(dir).find((f) => f.endsWith(".tgz"));
      if (!tgz) throw new Error("npm pack made no tarball");
      return exec(bin("attw"), [join(dir, tgz), "--profile", "esm-only", "--format", "table-flipped"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
  jsr: () => exec(bin("deno"), ["publish", "--dry-run", "--allow-dirty", "--quiet"]),
  bundles: () => exec(process.execPath, ["scripts/check-bundles.mjs"]),
};

const chosen = process.argv.length > 2 ? process.argv.slice(2) : Object.keys(steps);
const failed = [];
for (const name of chosen) {
  const step = steps[name];
  if (!step) {
    console.error(`check-package: no step "${name}"; steps: ${Object.keys(steps).join(", ")}`);
    process.exit(2);
  }
  console.log(`\n── check-package: ${name} ──`);
  const t0 = performance.now();
  const status = step();
  const ms = Math.round(performance.now() - t0);
  if (status !== 0) failed.push(name);
  console.log(`── ${name}: ${status === 0 ? "ok" : `FAILED (exit ${status})`} in ${ms} ms`);
}
if (failed.length > 0) {
  console.error(`\ncheck-package: failed: ${failed.join(", ")}`);
  process.exit(1);
}
console.log(`\ncheck-package: all ${chosen.length} checks passed`);
