// ListedLock, which the test worker (worker.ts) exports and binds as LISTED: LeaseholdLock whose
// storage a test can read (a GET answers every entry), to see what the object keeps (a fire's
// record, and nothing once it expired). The storage is workerd's own.
import type { DurableObjectStateLike } from "../../../src/backends/cloudflare/index.ts";
import { LeaseholdLock } from "../../../src/backends/cloudflare/index.ts";

export class ListedLock extends LeaseholdLock {
  readonly #state: DurableObjectStateLike;
  constructor(state: DurableObjectStateLike, env: unknown) {
    super(state, env);
    this.#state = state;
  }

  /** GET: the stored entries, `{ [key]: value }`; anything else: LeaseholdLock's. */
  override async fetch(request: Request): Promise<Response> {
    if (request.method !== "GET") return super.fetch(request);
    return Response.json(Object.fromEntries(await this.#state.storage.list({ prefix: "" })));
  }
}
