// Types of scripts/backends.mjs for TypeScript importers (tests, bench).
export type Runtime = "node" | "bun" | "deno" | "workerd";
export interface BackendRow {
  readonly name: string;
  readonly factory: string;
  readonly server: string | null;
  readonly secrets: readonly string[];
  readonly env: readonly string[];
  readonly runtimes: readonly Runtime[];
  readonly markers: readonly RegExp[];
  readonly description: string;
  readonly summary: string;
  readonly where?: string;
  readonly shared: true | string;
}
export declare const BACKENDS: readonly BackendRow[];
export declare function subpathOf(row: BackendRow): string;
export declare function entryOf(row: BackendRow): string;
export declare function docsOf(row: BackendRow): string;
