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
import { describe, inject, it } from "vitest";
import { azureBlob } from "../../../src/backends/azure-blob/index.ts";
import { testBackend } from "../../../src/testing.ts";

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

describe.concurrent("azure-blob conformance", () => {
  describe("SharedKey (accountUrl + accountName + accountKey)", () => {
    testBackend(
      { describe, it },
      {
        ttl,
        backend: () =>
          azureBlob({
            accountUrl: az.accountUrl,
            accountName: az.accountName,
            accountKey: az.accountKey,
            container: "conformance-sharedkey",
            createContainer: true,
          }),
      },
    );
  });

  describe('block blobs (blobType: "block", for accounts without page blobs)', () => {
    testBackend(
      { describe, it },
      {
        ttl,
        backend: () =>
          azureBlob({
            accountUrl: az.accountUrl,
            accountName: az.accountName,
            accountKey: az.accountKey,
            container: "conformance-block",
            createContainer: true,
            blobType: "block",
          }),
      },
    );
  });

  describe("connection string", () => {
    testBackend(
      { describe, it },
      {
        ttl,
        backend: () =>
          azureBlob({
            connectionString: az.connectionString,
            container: "conformance-connstr",
            createContainer: true,
          }),
      },
    );
  });

  describe("account SAS", () => {
    const sasToken = accountSas();
    testBackend(
      { describe, it },
      {
        ttl,
        backend: () =>
          azureBlob({
            accountUrl: az.accountUrl,
            sasToken,
            container: "conformance-sas",
            prefix: "locks/",
            createContainer: true,
          }),
      },
    );
  });
});
