// dynalite ships no types: the one function the tests use.
declare module "dynalite" {
  import type { Server } from "node:http";
  export default function dynalite(options?: {
    createTableMs?: number;
    deleteTableMs?: number;
    updateTableMs?: number;
    maxItemSizeKb?: number;
    path?: string;
  }): Server;
}
