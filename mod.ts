/**
 * leasehold: a distributed mutex and leader election for every runtime with `fetch`.
 *
 * @module
 */
export * from "./src/index.ts";
