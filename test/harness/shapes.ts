// Clients of several shapes (ioredis, node-redis, pg, postgres.js, …) opened once per test file
// and shared by its tests: test/backends/redis/clients.ts and test/backends/postgres/clients.ts.

/** A connected client and how to close it. */
export type Made<C> = { client: C; close: () => Promise<unknown> };

/** `client(label)` connects the shape `label` on first use; `closeClients()` closes every one. */
export function sharedClients<C>(shapes: Record<string, () => Promise<Made<C>>>) {
  const open = new Map<string, Promise<Made<C>>>();
  return {
    /** The shared client of shape `label`, connected on first use. */
    async client(label: string): Promise<C> {
      let made = open.get(label);
      if (!made) {
        made = shapes[label]!();
        open.set(label, made);
      }
      return (await made).client;
    },
    /** Closes every client opened by `client()`. */
    async closeClients(): Promise<void> {
      const all = [...open.values()];
      open.clear();
      await Promise.all(all.map(async (m) => (await m).close()));
    },
  };
}
