// The backend conformance suite against Azurite, once per credential form and once with block
// blobs (the fence in metadata instead of the page blob's sequence number). The blocks run
// concurrently (each check uses its own lock name) since Azure's minimum ttl makes the expiry checks
// wait about 15 s each.
import {
  AccountSASPermissions,
  AccountSASResourceTypes,
  AccountSASServices,
  generateAccountSASQueryParameters,
  SASProtocol,
  StorageSharedKeyCredential,
} from "@azure/storage-blob";
import { afterAll, describe, it } from "vitest";
import { type AzureBlobOptions, azureBlob } from "../../../src/backends/azure-blob/index.ts";
import { testBackend } from "../../../src/testing/index.ts";
import {
  AZURITE_ACCOUNT,
  AZURITE_KEY,
  connectionStringOf,
  startAzurite,
} from "../../harness/servers/azurite.ts";

// An Azurite of the file's own (the suite is the heaviest user of one; the shared Azurite serves
// the other files): with one for everything, a loaded run saw it answer a release no sooner than 3 s.
const server = await startAzurite();
afterAll(() => server.stop());
const az = {
  accountUrl: server.accountUrl,
  accountName: AZURITE_ACCOUNT,
  accountKey: AZURITE_KEY,
  connectionString: connectionStringOf(server.accountUrl),
};
const ttl = 15_000;

function accountSas(): string {
  return generateAccountSASQueryParameters(
    {
      permissions: AccountSASPermissions.parse("rwc"),
      services: AccountSASServices.parse("b").toString(),
      resourceTypes: AccountSASResourceTypes.parse("sco").toString(),
      protocol: SASProtocol.HttpsAndHttp,
      expiresOn: new Date(Date.now() + 3_600_000),
    },
    new StorageSharedKeyCredential(az.accountName, az.accountKey),
  ).toString();
}

const sharedKey = { accountUrl: az.accountUrl, accountName: az.accountName, accountKey: az.accountKey };

/** Each credential form (and block blobs): its title and its options, each with a container of its own. */
const forms: [string, () => AzureBlobOptions][] = [
  [
    "SharedKey (accountUrl + accountName + accountKey)",
    () => ({ ...sharedKey, container: "conformance-sharedkey" }),
  ],
  [
    'block blobs (blobType: "block", for accounts without page blobs)',
    () => ({ ...sharedKey, container: "conformance-block", blobType: "block" }),
  ],
  ["connection string", () => ({ connectionString: az.connectionString, container: "conformance-connstr" })],
  [
    "account SAS",
    () => ({
      accountUrl: az.accountUrl,
      sasToken: accountSas(),
      container: "conformance-sas",
      prefix: "locks/",
    }),
  ],
];

describe.concurrent("azure-blob conformance", () => {
  for (const [title, options] of forms) {
    describe(title, () => {
      const resolved = options(); // once per form: the SAS is signed here
      testBackend(
        { describe, it },
        { ttl, backend: () => azureBlob({ ...resolved, createContainer: true }) },
      );
    });
  }
});
