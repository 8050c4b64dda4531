#!/usr/bin/env node
// The npm registry reachable from this project's machines serves only the Linux builds of
// platform-specific packages (@esbuild/*, @biomejs/cli-*, @rollup/rollup-*, deno, workerd…), so
// `npm install` leaves the other platforms' optional dependencies out of package-lock.json, and
// `npm ci` then refuses the lockfile as "out of sync". This script adds the missing optional
// entries, marked with the os/cpu their names say, so that `npm ci` skips them without fetching.
// Run it after every `npm install` that changes the lockfile: `node scripts/lockfile-platforms.mjs`.
import { readFileSync, writeFileSync } from "node:fs";

const file = new URL("../package-lock.json", import.meta.url);
const lock = JSON.parse(readFileSync(file, "utf8"));
const pkgs = lock.packages;

const OS = [
  "darwin",
  "linux",
  "win32",
  "android",
  "freebsd",
  "openbsd",
  "netbsd",
  "sunos",
  "aix",
  "openharmony",
  "cygwin",
];
const CPU = ["arm64", "x64", "ia32", "arm", "loong64", "mips64el", "ppc64", "riscv64", "s390x", "wasm32"];
const platformOf = (name) => {
  const parts = name.toLowerCase().split(/[-/@]/);
  const os = parts.find((p) => OS.includes(p) || p === "windows" || p === "macos" || p === "win") ?? null;
  const cpu =
    parts.find((p) => CPU.includes(p) || p === "aarch64" || p === "x86_64" || p === "riscv64") ?? null;
  const norm = { windows: "win32", win: "win32", macos: "darwin", aarch64: "arm64", x86_64: "x64" };
  return { os: os && (norm[os] ?? os), cpu: cpu && (norm[cpu] ?? cpu) };
};

/** Where node would resolve `dep` from the package at `path`, among existing entries. */
const resolve = (path, dep) => {
  let dir = path;
  for (;;) {
    const candidate = `${dir ? `${dir}/` : ""}node_modules/${dep}`;
    if (pkgs[candidate]) return candidate;
    if (!dir) return null;
    const i = dir.lastIndexOf("/node_modules/");
    dir = i < 0 ? "" : dir.slice(0, i);
  }
};

let added = 0;
for (const [path, meta] of Object.entries(pkgs)) {
  for (const [dep, spec] of Object.entries(meta.optionalDependencies ?? {})) {
    if (resolve(path, dep)) continue;
    const { os, cpu } = platformOf(dep);
    if (!os && !cpu) continue; // not a platform package: leave it to npm
    // Place it beside a sibling platform package of the same parent, else under the parent.
    const sibling = Object.keys(meta.optionalDependencies)
      .map((d) => resolve(path, d))
      .find(Boolean);
    const base = sibling ? sibling.slice(0, sibling.lastIndexOf("node_modules/")) : path ? `${path}/` : "";
    const at = `${base}node_modules/${dep}`;
    if (pkgs[at]) continue;
    const entry = { version: spec.replace(/^[\^~=]/, ""), optional: true };
    if (meta.dev) entry.dev = true;
    if (os) entry.os = [os];
    if (cpu) entry.cpu = [cpu];
    pkgs[at] = entry;
    added++;
  }
}
lock.packages = Object.fromEntries(
  Object.entries(pkgs).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a < b ? -1 : 1)),
);
writeFileSync(file, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`package-lock.json: added ${added} optional platform entries`);
