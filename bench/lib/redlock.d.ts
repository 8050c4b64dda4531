// redlock 5.0.0-beta.2 ships its types at dist/index.d.ts but its package.json "exports" does
// not point at them, so TypeScript cannot find them: the part bench/clients.ts uses.
declare module "redlock" {
  interface Lock {
    extend(duration: number): Promise<Lock>;
    release(): Promise<unknown>;
  }
  export default class Redlock {
    constructor(clients: Iterable<unknown>, settings?: { retryCount?: number });
    acquire(resources: string[], duration: number): Promise<Lock>;
  }
}
