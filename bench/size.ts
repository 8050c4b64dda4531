// Item 3: bundle size, min+gzip. The entries, the esbuild settings and the budgets are defined once,
// in scripts/sizes.mjs, which scripts/check-bundles.mjs also uses to hold the budgets in `npm test`.
import { existsSync } from "node:fs";
import { version as esbuildVersion } from "esbuild";
import { BACKENDS, entryOf } from "../scripts/backends.mjs";
import { BUDGETS, bundle, ENTRIES, gzip, ours, PEERS, SETTINGS } from "../scripts/sizes.mjs";

export { BUDGETS };

export interface SizeRow {
  id: string;
  label: string;
  minified: number;
  gzip: number;
  /** Minified bytes each source file contributes (ours only; esbuild's metafile). */
  inputs?: Record<string, number>;
}
export interface SizeResult {
  esbuild: string;
  settings: string;
  rows: SizeRow[];
  /**
   * min+gzip of the core alone with every string literal longer than 12 characters emptied (its
   * messages): how much of the core is words, for the size budget's reasons. Absent before
   * issue 29's seventh session.
   */
  coreWithoutMessages?: number;
}

/**
 * The budgeted entries (min+gzip: core alone, core + memory, core + upstash, core + azure-blob)
 * built from another copy of src/ (an absolute path), for section 13's size per version.
 */
export async function sizeOfSrc(
  src: string,
): Promise<{ core: number; memory: number; upstash: number; azure: number }> {
  const of = async (adapter: string, make: string) => gzip((await bundle(ours(adapter, make, src))).bytes);
  // Before the backends moved into folders (5f24041), each was one file.
  const at = (backend: string) =>
    existsSync(`${src}/backends/${backend}/index.ts`)
      ? `${src}/backends/${backend}/index.ts`
      : `${src}/backends/${backend}.ts`;
  return {
    core: await of("", "opts.backend"),
    memory: await of(`import { memory } from "${at("memory")}";`, "memory()"),
    upstash: await of(`import { upstash } from "${at("upstash")}";`, "upstash(opts)"),
    azure: await of(`import { azureBlob } from "${at("azure-blob")}";`, "azureBlob(opts)"),
  };
}

export async function runSize(): Promise<SizeResult> {
  // Every backend of the table (scripts/backends.mjs) has its entry here.
  for (const row of BACKENDS) {
    if (!Object.values(ENTRIES).some(({ code }) => code.includes(`"../${entryOf(row)}"`)))
      throw new Error(`bench/size.ts: no entry imports ${entryOf(row)} (the ${row.name} backend)`);
  }
  const rows: SizeRow[] = [];
  for (const [id, { label, code, node }] of Object.entries(ENTRIES)) {
    const out = await bundle(code, node);
    const bytes = out.bytes;
    const row: SizeRow = { id, label, minified: bytes.length, gzip: gzip(bytes) };
    const output = Object.values(out.metafile.outputs)[0];
    if (output && !PEERS.has(id)) {
      row.inputs = Object.fromEntries(
        Object.entries(output.inputs)
          .filter(([file]) => file.startsWith("src/"))
          .map(([file, v]) => [file, v.bytesInOutput]),
      );
    }
    rows.push(row);
  }
  const core = new TextDecoder().decode((await bundle(ENTRIES.core!.code)).bytes);
  const words = core.replace(/(["'`])((?:\\.|(?!\1)[^\\])*)\1/g, (all, quote: string, body: string) =>
    body.length > 12 ? quote + quote : all,
  );
  return {
    esbuild: esbuildVersion,
    settings: SETTINGS,
    rows,
    coreWithoutMessages: gzip(new TextEncoder().encode(words)),
  };
}
