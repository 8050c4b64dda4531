// The backend conformance suite against Azurite, once per way of signing requests (SharedKey, an
// account SAS) and once with block blobs (the fence in metadata instead of the page blob's
// sequence number). The blocks run concurrently (each check uses its own lock name) since Azure's
// minimum ttl makes the expiry checks wait about 15 s each. A connection string is not a form of
// its own here: it is parsed into the SharedKey or SAS options these forms use (each kind of
// connection string runs an acquire → renew → inspect → release cycle in backend.test.ts,
// "credentials"); the whole suite once more for it took a quarter of this file's 136 s.
import {
  AccountSASPermissions,
  AccountSASResourceTypes,
  AccountSASServices,
  generateAccountSASQueryParameters,
  SASProtocol,
  StorageSharedKeyCredential,
} from "@azure/storage-blob";
import { describe, inject, it } from "vitest";
import { type AzureBlobOptions, azureBlob } from "../../../src/backends/azure-blob/index.ts";
import { testBackend } from "../../../src/testing/index.ts";

const az = inject("azurite");
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
        {
          ttl,
          backend: () => azureBlob({ ...resolved, createContainer: true }),
          // 200 cycles and 50 contenders per form, not 500 and 100: the four forms' checks run five
          // at once in this worker, whose CPU those bursts took (60 % of a core alone); beside
          // three other files a request then went unanswered for the 3 s bound (two runs in a row).
          cycles: 200,
          contenders: 50,
        },
      );
    });
  }
});
