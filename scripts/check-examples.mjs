#!/usr/bin/env node
// Type-checks every TypeScript example a reader can copy: each ```ts / ```typescript block of
// the top-level *.md files (README.md, CONTRIBUTING.md, ...) and docs/*.md, and each `@example`
// block of the TSDoc in src/**/*.ts and cli/**/*.ts.
//
// Every example is its own module (an `export {}` is added to one without imports or exports),
// compiled in memory with tsconfig.test.json's options, so `leasehold` and `leasehold/*` resolve
// to the sources through its "paths". Two options are relaxed: noUnusedLocals and
// noUnusedParameters (an example may build a value and stop there).
//
// The convention (CONTRIBUTING.md, "Examples"): an example declares, visibly, every name the
// reader supplies, with `declare` lines at its top:
//
//   declare function writeReport(options: { signal: AbortSignal; fence: number }): Promise<void>;
//
// The only names given without a declaration are the runtimes' own globals: Node's (`process`,
// from @types/node), `Deno` (a minimal declaration below) and the Cloudflare Workers types
// `ExecutionContext` and `ScheduledController` (minimal declarations below, for handlers written
// as `scheduled(controller: ScheduledController, env: Env, ctx: ExecutionContext)`).
//
// Usage: node scripts/check-examples.mjs [--list]. Exits 1, printing file:line and the
// compiler's message for each failing example.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

// TSDoc examples known to fail, by title (the text after `@example`), each with the reason. Keep
// it empty: fix the example instead. An entry that passes or matches no example is an error.
/** @type {Map<string, string>} */
const KNOWN_FAILING = new Map([]);

/** Globals of the runtimes the examples run on, beyond @types/node. Kept minimal on purpose. */
const PRELUDE = `
declare namespace Deno {
  const env: { get(name: string): string | undefined };
  function exit(code?: number): never;
  function cron(name: string, schedule: string, handler: () => Promise<void> | void): Promise<void>;
  function cron(
    name: string,
    schedule: string,
    options: { backoffSchedule?: number[]; signal?: AbortSignal },
    handler: () => Promise<void> | void,
  ): Promise<void>;
}
/** Cloudflare Workers: the third argument of a handler. */
interface ExecutionContext {
  waitUntil(promise: Promise<unknown>): void;
  passThroughOnException(): void;
}
/** Cloudflare Workers: the first argument of a scheduled handler. */
interface ScheduledController {
  readonly scheduledTime: number;
  readonly cron: string;
  noRetry(): void;
}
`;

/** Files under `dir` (relative to the root) whose names end with `ext`, recursively. */
function files(dir, ext) {
  const full = join(root, dir);
  let entries;
  try {
    entries = readdirSync(full);
  } catch {
    return [];
  }
  return entries.flatMap((name) => {
    const path = join(dir, name);
    if (name === "node_modules") return [];
    if (statSync(join(root, path)).isDirectory()) return files(path, ext);
    return name.endsWith(ext) ? [path] : [];
  });
}

/**
 * The fenced ```ts / ```typescript blocks of `lines`: `{ line, code }`, `line` being the 1-based
 * line of the block's first code line. `strip` removes a prefix from each line first (` * ` in TSDoc).
 */
function fencedBlocks(lines, first, last, strip = (l) => l) {
  const blocks = [];
  for (let i = first; i < last; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*(ts|typescript|js|mjs|javascript)\s*$/.exec(strip(lines[i]));
    if (!open) continue;
    const [, indent, fence, info] = open;
    const lang = /^(ts|typescript)$/.test(info) ? "ts" : "js";
    const code = [];
    let j = i + 1;
    for (; j < last; j++) {
      const text = strip(lines[j]);
      if (text.trimStart().startsWith(fence) && text.trim() === fence) break;
      code.push(text.startsWith(indent) ? text.slice(indent.length) : text.trimStart());
    }
    if (j === last) throw new Error(`unclosed code fence at line ${i + 1}`);
    blocks.push({ line: i + 2, code: code.join("\n"), lang });
    i = j;
  }
  return blocks;
}

function markdownExamples(path) {
  const lines = readFileSync(join(root, path), "utf8").split("\n");
  return fencedBlocks(lines, 0, lines.length).map((b) => ({ ...b, file: path, title: undefined }));
}

/** The `@example` blocks of every `/** … *\/` comment in a TypeScript file. */
function tsdocExamples(path) {
  const lines = readFileSync(join(root, path), "utf8").split("\n");
  const examples = [];
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i].trimStart().startsWith("/**")) continue;
    let end = i;
    while (end < lines.length && !lines[end].includes("*/")) end++;
    const strip = (l) => l.replace(/^\s*\/?\*+\/?\s?/, "").replace(/\s*\*\/\s*$/, "");
    for (let k = i; k <= end && k < lines.length; k++) {
      const tag = /@example\b\s*(.*)$/.exec(strip(lines[k]));
      if (!tag) continue;
      let next = k + 1;
      while (next <= end && !/^\s*@\w/.test(strip(lines[next]))) next++;
      const [block] = fencedBlocks(lines, k + 1, next, strip);
      if (block) examples.push({ ...block, file: path, title: tag[1].trim() });
      else examples.push({ line: k + 1, code: "", file: path, title: tag[1].trim(), unfenced: true });
    }
    i = end;
  }
  return examples;
}

const examples = [
  ...[...readdirSync(root).filter((f) => f.endsWith(".md")), ...files("docs", ".md")].flatMap(
    markdownExamples,
  ),
  ...[...files("src", ".ts"), ...files("cli", ".ts")].flatMap(tsdocExamples),
];

if (process.argv.includes("--list")) {
  for (const e of examples) console.log(`${e.file}:${e.line}${e.title ? ` @example ${e.title}` : ""}`);
  process.exit(0);
}

// Compiler options: tsconfig.test.json's ("paths" included), minus what does not fit fragments.
const configPath = join(root, "tsconfig.test.json");
const config = ts.readConfigFile(configPath, ts.sys.readFile);
if (config.error) throw new Error(ts.flattenDiagnosticMessageText(config.error.messageText, "\n"));
const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root, undefined, configPath);
const base = {
  ...parsed.options,
  noEmit: true,
  noUnusedLocals: false,
  noUnusedParameters: false,
  allowImportingTsExtensions: true,
  allowJs: true,
  checkJs: true,
};

// The two module resolutions a user's project has: a bundler's (Vite, esbuild, Bun, tsx) and
// Node's own (`"module": "NodeNext"`, where a CommonJS package's default import is its
// module.exports: `import Redis from "ioredis"` is no constructor there).
const RESOLUTIONS = {
  Bundler: { module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler },
  NodeNext: { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext },
};
// The Redis clients' majors the tests run (test/backends/redis/clients.ts): an example that imports
// "ioredis" or "redis" is checked against each. Major 6 is installed as the npm aliases "ioredis6"
// and "redis6" and put in their place through "paths" (to their "types" file: NodeNext's ESM
// resolution does not look into a directory).
const CLIENTS = {
  "clients of major 5": { imports: null, paths: {} },
  "clients of major 6": {
    imports: /from\s+["'](ioredis|redis)["']/,
    paths: {
      ioredis: ["./node_modules/ioredis6/built/index.d.ts"],
      redis: ["./node_modules/redis6/dist/index.d.ts"],
    },
  },
};

// Each example is a virtual file beside the sources, so bare imports find node_modules; a JS
// example is an .mjs file (checkJs), as it runs.
const virtualDir = join(root, ".examples");
const sources = new Map();
examples.forEach((e, index) => {
  if (e.unfenced) return;
  const module = /^\s*(import|export)\b/m.test(e.code) ? e.code : `${e.code}\nexport {};`;
  const ext = e.lang === "js" ? "mjs" : "ts";
  e.virtual = join(virtualDir, `${index}-${e.file.replace(/[^A-Za-z0-9]+/g, "-")}.${ext}`);
  sources.set(e.virtual, module);
});
const preludePath = join(virtualDir, "prelude.d.ts");
sources.set(preludePath, PRELUDE);

// Parsed files, shared by the programs: a file parses the same way in each whose language
// version and module format (the key) are the same, so the lib files and the sources parse once.
const parsedFiles = new Map();

/** Compiles `files` (with the prelude) under `options`: the program's diagnostics. */
function diagnostics(options, files) {
  const host = ts.createCompilerHost(options, true);
  const { getSourceFile, fileExists, readFile } = host;
  host.fileExists = (name) => sources.has(name) || fileExists.call(host, name);
  host.readFile = (name) => sources.get(name) ?? readFile.call(host, name);
  host.getSourceFile = (name, language, ...rest) => {
    const key = `${name}\0${JSON.stringify(language)}`;
    let file = parsedFiles.get(key);
    if (!file) {
      file = sources.has(name)
        ? ts.createSourceFile(name, sources.get(name), language, true)
        : getSourceFile.call(host, name, language, ...rest);
      parsedFiles.set(key, file);
    }
    return file;
  };
  return ts.getPreEmitDiagnostics(ts.createProgram([...files, preludePath], options, host));
}

const failures = new Map(); // example → messages
const byVirtual = new Map(examples.filter((e) => e.virtual).map((e) => [e.virtual, e]));
const global = new Set();
for (const [resolution, resolutionOptions] of Object.entries(RESOLUTIONS)) {
  for (const [clients, { imports, paths }] of Object.entries(CLIENTS)) {
    const files = [...byVirtual.values()]
      .filter((e) => !imports || imports.test(e.code))
      .map((e) => e.virtual);
    const options = { ...base, ...resolutionOptions, paths: { ...base.paths, ...paths } };
    const under = `under ${resolution}, ${clients}`;
    for (const d of diagnostics(options, files)) {
      const text = ts.flattenDiagnosticMessageText(d.messageText, "\n  ");
      const example = d.file && byVirtual.get(d.file.fileName);
      if (!example) {
        const where = d.file
          ? `${relative(root, d.file.fileName)}:${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}`
          : "";
        global.add(`${where} TS${d.code} (${under}): ${text}`);
        continue;
      }
      const { line, character } = d.file.getLineAndCharacterOfPosition(d.start ?? 0);
      const list = failures.get(example) ?? [];
      list.push(`${example.file}:${example.line + line}:${character + 1} TS${d.code} (${under}): ${text}`);
      failures.set(example, list);
    }
  }
}
for (const e of examples) {
  if (e.unfenced)
    failures.set(e, [`${e.file}:${e.line} @example ${e.title}: no \`\`\`ts block follows the tag`]);
}

let failed = global.size > 0;
for (const message of global) console.error(message);
const seenKnown = new Set();
for (const e of examples) {
  const messages = failures.get(e);
  const known = e.title !== undefined && KNOWN_FAILING.has(e.title) && !e.file.endsWith(".md");
  if (known) seenKnown.add(e.title);
  if (messages && known) {
    console.error(`known failing (allow-listed): ${e.file}:${e.line} @example ${e.title}`);
    for (const m of messages) console.error(`  ${m}`);
    continue;
  }
  if (known) {
    failed = true;
    console.error(
      `${e.file}:${e.line} @example ${e.title} passes now: delete it from KNOWN_FAILING in scripts/check-examples.mjs`,
    );
    continue;
  }
  if (!messages) continue;
  failed = true;
  console.error(`\n${e.file}:${e.line}${e.title ? ` @example ${e.title}` : ""} does not type-check:`);
  for (const m of messages) console.error(`  ${m}`);
}
for (const title of KNOWN_FAILING.keys()) {
  if (seenKnown.has(title)) continue;
  failed = true;
  console.error(
    `KNOWN_FAILING lists "${title}", which no @example has: delete it from scripts/check-examples.mjs`,
  );
}

const checked = examples.filter((e) => e.virtual).length;
if (failed) {
  console.error(
    `\ncheck-examples: FAILED (${checked} examples checked). Examples must compile: see CONTRIBUTING.md, "Examples".`,
  );
  process.exit(1);
}
console.log(
  `check-examples: ${checked - seenKnown.size} examples type-check; ${seenKnown.size} allow-listed as known failing`,
);
