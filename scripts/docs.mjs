// The API reference from the TSDoc of every entry jsr.json exports (what JSR reads):
//   node scripts/docs.mjs          writes the HTML reference to docs/api (gitignored)
//   node scripts/docs.mjs --lint   fails on what JSR's documentation score counts against us
// `deno` is a devDependency; npm scripts find it in node_modules/.bin.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";

const entries = Object.values(
  JSON.parse(readFileSync(new URL("../jsr.json", import.meta.url), "utf8")).exports,
);
const args = process.argv.includes("--lint")
  ? ["doc", "--lint", ...entries]
  : ["doc", "--html", "--name=leasehold", "--output=docs/api", ...entries];
const { status, error } = spawnSync("deno", args, { stdio: "inherit" });
if (error) throw error;
process.exit(status ?? 1);
