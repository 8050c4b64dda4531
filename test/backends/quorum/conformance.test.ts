// The backend conformance suite against quorums: of 3 memory stores, and of real backends: 3 and 5 independent databases
// (a redis-server behind an Upstash-REST bridge each), and a mix of two databases with Azurite
// (whose 15 s minimum ttl makes its expiry checks slow, so they run concurrently). That Azurite is
// the file's own, started beside its databases: the shared one serves azure-blob's conformance
// suite, which may run at the same time.
import { afterAll, beforeAll, describe, it } from "vitest";
import { azureBlob } from "../../../src/backends/azure-blob/index.ts";
import { memory } from "../../../src/backends/memory/index.ts";
import { quorum } from "../../../src/backends/quorum/index.ts";
import { upstash } from "../../../src/backends/upstash/index.ts";
import { testBackend } from "../../../src/testing/index.ts";
import {
  AZURITE_ACCOUNT,
  AZURITE_KEY,
  type AzuriteServer,
  startAzurite,
} from "../../harness/servers/azurite.ts";
import { startDatabases, type UpstashDatabase } from "../../harness/upstash.ts";

let azurite: AzuriteServer | undefined;
const dbs: UpstashDatabase[] = [];
const members = (count: number) => dbs.slice(0, count).map((d) => upstash({ url: d.url, token: d.token }));

beforeAll(async () => {
  const [az, started] = await Promise.allSettled([startAzurite(), startDatabases(5)]);
  if (az.status === "fulfilled") azurite = az.value;
  if (started.status === "fulfilled") dbs.push(...started.value);
  for (const r of [az, started]) if (r.status === "rejected") throw r.reason;
});
afterAll(async () => {
  await Promise.all([azurite?.stop(), ...dbs.map((d) => d.stop())]);
});

describe("quorum conformance", () => {
  describe("3 memory stores, amnesia 0 (quorum 2)", () => {
    testBackend(
      { describe, it },
      {
        backend: () => quorum([memory(), memory(), memory()]),
        ttl: 1_000,
        prefix: "quorum-mem",
        splitVotes: true,
      },
    );
  });
  describe("3 databases, amnesia 0 (quorum 2)", () => {
    testBackend(
      { describe, it },
      { backend: () => quorum(members(3)), ttl: 2_000, prefix: "quorum-3", splitVotes: true },
    );
  });
  describe("5 databases, amnesia 1 (quorum 4)", () => {
    testBackend(
      { describe, it },
      { backend: () => quorum(members(5), { amnesia: 1 }), ttl: 2_000, prefix: "quorum-5", splitVotes: true },
    );
  });
  // Azure's 15 s ttl: its checks run concurrently, each on its own lock name. (Those of the other
  // quorums do not: five at once beside other files, the databases' bridges, in this process,
  // answered some requests later than a 2 s ttl's bound.)
  describe.concurrent("2 databases and Azurite, amnesia 0 (quorum 2)", () => {
    testBackend(
      { describe, it },
      {
        backend: () =>
          quorum([
            ...members(2),
            azureBlob({
              accountUrl: azurite!.accountUrl,
              accountName: AZURITE_ACCOUNT,
              accountKey: AZURITE_KEY,
              container: "quorum",
              createContainer: true,
            }),
          ]),
        ttl: 15_000,
        cycles: 100,
        contenders: 30,
        prefix: "quorum-mix",
        splitVotes: true,
      },
    );
  });
});
