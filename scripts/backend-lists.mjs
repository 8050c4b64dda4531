#!/usr/bin/env node
// The lists of backends in README.md and docs/**/*.md, generated from the table of backends
// (scripts/backends.mjs), never typed by hand. Each region between
//   <!-- generated:backends:NAME -->  and  <!-- /generated:backends:NAME -->
// is rewritten with list NAME:
//   install  a table of every entry (the core, the backends, the suite): import path | what it is |
//            runtimes | docs page
//   list     a bullet list of the backends, each linked to its docs page, with its summary
//   modes    a table: each backend, and whether it takes mode "shared" (readers and writers)
// Run: node scripts/backend-lists.mjs           rewrites the regions
//      node scripts/backend-lists.mjs --check   fails when one is not what it would write
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { BACKENDS, docsOf } from "./backends.mjs";

const root = fileURLToPath(new URL("../", import.meta.url));
const check = process.argv.includes("--check");

/** A link from the Markdown file `from` (relative to the root) to `target` (relative to the root). */
const link = (from, text, target) => `[${text}](${relative(dirname(from), target).replaceAll("\\", "/")})`;

const RUNTIMES = { node: "Node", bun: "Bun", deno: "Deno", workerd: "Workers" };
/** Where a backend runs, in words. */
const where = (row) => row.where ?? row.runtimes.map((r) => RUNTIMES[r]).join(", ");

/** The entries that are no backend, for the install table: the core first, then the node-cron adapter and the suite. */
const CORE = {
  spec: "leasehold",
  description:
    "the core: `createMutex`, `createSemaphore`, `createElection`, `runOnce`, `createLockManager`, errors, types",
  where: "Node, Bun, Deno, Workers",
  docs: ["API", "docs/api.md"],
};
const NODE_CRON = {
  spec: "leasehold/node-cron",
  description: "node-cron 4.6's run coordinator on `runOnce`: each fire once across processes",
  where: "where node-cron runs (tested: Node)",
  docs: ["recipes", "docs/recipes-once.md"],
};
const TESTING = {
  spec: "leasehold/testing",
  description: "the conformance suite for a backend of your own",
  where: "your test runner (vitest, `node:test`, …)",
  docs: ["your own backend", "docs/backends/your-own.md"],
};

/** @type {Record<string, (from: string) => string>} */
const LISTS = {
  install: (from) => {
    const entries = [
      CORE,
      ...BACKENDS.map((row) => ({
        spec: `leasehold/${row.name}`,
        description: row.description,
        where: where(row),
        docs: [row.name, docsOf(row)],
      })),
      NODE_CRON,
      TESTING,
    ];
    const rows = entries.map((e) => [`\`${e.spec}\``, e.description, e.where, link(from, ...e.docs)]);
    return table(["import path", "what it is", "runtimes", "docs"], rows);
  },
  modes: (from) =>
    table(
      ["backend", 'readers and writers (`mode: "shared"`)'],
      BACKENDS.map((row) => [
        link(from, `\`leasehold/${row.name}\``, docsOf(row)),
        row.shared === true ? "yes" : `no: ${row.shared}`,
      ]),
    ),
  list: (from) =>
    BACKENDS.map((row) => `- ${link(from, `\`leasehold/${row.name}\``, docsOf(row))}: ${row.summary}.`).join(
      "\n",
    ),
};

/** A Markdown table with aligned columns, as the formatter leaves it. */
function table(head, rows) {
  const width = head.map((h, i) => Math.max(h.length, ...rows.map((r) => [...r[i]].length)));
  const line = (cells) => `| ${cells.map((c, i) => c + " ".repeat(width[i] - [...c].length)).join(" | ")} |`;
  return [line(head), line(width.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

/** README.md and every Markdown file under docs/, relative to the root. */
function files() {
  const found = existsSync(join(root, "README.md")) ? ["README.md"] : [];
  const walk = (dir) => {
    if (!existsSync(join(root, dir))) return;
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith(".md")) found.push(path);
    }
  };
  walk("docs");
  return found;
}

const REGION = /(<!-- generated:backends:([a-z-]+) -->\n)([\s\S]*?)(<!-- \/generated:backends:\2 -->)/g;
const problems = [];
let regions = 0;
for (const file of files()) {
  const text = readFileSync(join(root, file), "utf8");
  const next = text.replace(REGION, (whole, open, name, body, close) => {
    const list = LISTS[name];
    if (!list) {
      problems.push(`${file}: no list named "${name}" (known: ${Object.keys(LISTS).join(", ")})`);
      return whole;
    }
    regions++;
    const want = `\n${list(file)}\n\n`;
    if (check && body !== want) problems.push(`${file}: the "${name}" list is not the table's`);
    return `${open}${want}${close}`;
  });
  const opened = (text.match(/<!-- generated:backends:/g) ?? []).length;
  const closed = (text.match(/<!-- \/generated:backends:/g) ?? []).length;
  if (opened !== closed) problems.push(`${file}: ${opened} region(s) opened, ${closed} closed`);
  if (!check && next !== text) writeFileSync(join(root, file), next);
}

if (problems.length > 0) {
  console.error(`backend-lists: ${problems.length} problem(s):\n  - ${problems.join("\n  - ")}`);
  if (check) console.error("  run `node scripts/backend-lists.mjs` to rewrite them");
  process.exit(1);
}
console.log(`backend-lists: ${regions} region(s) ${check ? "up to date" : "written"}`);
