// Global setup: one workerd (Miniflare) running the LeaseholdLock Durable Object and its
// lockHandler route on a free loopback port, shared by every test file and stopped after the
// run. Tests read it with `inject("cloudflare")`.
import type { TestProject } from "vitest/node";
import { startLockWorker } from "../servers/workerd-locks.ts";

/** What `inject("cloudflare")` returns. */
export interface CloudflareContext {
  /** The lockHandler route, `http://127.0.0.1:<port>/leasehold`. */
  url: string;
  /** The bearer token it accepts. */
  token: string;
  /** The worker's origin: `/conformance/<i>` runs a conformance check through the binding. */
  origin: string;
}

declare module "vitest" {
  export interface ProvidedContext {
    cloudflare: CloudflareContext;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const worker = await startLockWorker();
  project.provide("cloudflare", { url: worker.url, token: worker.token, origin: worker.origin });
  return () => worker.stop();
}
