// Types of scripts/sizes.mjs for TypeScript importers (bench).
import type { Metafile } from "esbuild";
export declare const SETTINGS: string;
export declare const BUDGETS: Readonly<Record<"core" | "upstash" | "azure" | "memory", number>>;
export declare const CEILINGS: Readonly<Record<"core" | "upstash" | "azure" | "memory", number>>;
export declare function ours(adapter: string, make: string, src?: string): string;
export declare const PEERS: ReadonlySet<string>;
export interface Entry {
  readonly label: string;
  readonly code: string;
  readonly node?: { readonly external: string[] };
}
export declare const ENTRIES: Readonly<Record<string, Entry>>;
export declare function gzip(bytes: Uint8Array): number;
export declare function bundle(
  code: string,
  node?: { readonly external: string[] },
): Promise<{ bytes: Uint8Array; metafile: Metafile }>;
export interface BudgetRow {
  id: string;
  label: string;
  minified: number;
  gzip: number;
  budget: number;
  over: number;
}
export declare function checkBudgets(budgets?: Readonly<Record<string, number>>): Promise<BudgetRow[]>;
