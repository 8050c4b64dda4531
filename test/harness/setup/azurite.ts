// Global setup: starts Azurite (blob, in memory, free loopback port) before all tests and stops it
// after. A second Azurite serves HTTPS with --oauth basic for the bearer-token tests.
import type { TestProject } from "vitest/node";
import { AZURITE_ACCOUNT, AZURITE_KEY, type AzuriteServer, startAzurite } from "../servers/azurite.ts";
import { startedAll } from "../servers/children.ts";

export interface AzuriteContext {
  /** `http://127.0.0.1:<port>/devstoreaccount1`. */
  accountUrl: string;
  accountName: string;
  /** The well-known development key. */
  accountKey: string;
  /** `DefaultEndpointsProtocol=http;AccountName=...;AccountKey=...;BlobEndpoint=<accountUrl>;` */
  connectionString: string;
  port: number;
  /** The HTTPS + OAuth instance (its certificate is made with openssl). */
  oauth: { accountUrl: string; port: number; ca: string } | null;
}

declare module "vitest" {
  export interface ProvidedContext {
    azurite: AzuriteContext;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Both at once. Fails loudly (with the reason, such as a missing openssl) rather than skipping
  // the bearer tests; the one that started is stopped.
  const servers = await startedAll([startAzurite(), startAzurite({ oauth: true })]);
  const [http, https] = servers as [AzuriteServer, AzuriteServer];
  const oauth: AzuriteContext["oauth"] = { accountUrl: https.accountUrl, port: https.port, ca: https.ca! };
  project.provide("azurite", {
    accountUrl: http.accountUrl,
    accountName: AZURITE_ACCOUNT,
    accountKey: AZURITE_KEY,
    connectionString: `DefaultEndpointsProtocol=http;AccountName=${AZURITE_ACCOUNT};AccountKey=${AZURITE_KEY};BlobEndpoint=${http.accountUrl};`,
    port: http.port,
    oauth,
  });
  return async () => {
    await Promise.all(servers.map((s) => s.stop()));
  };
}
