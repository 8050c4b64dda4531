// Global setup: starts Azurite (blob, in memory, free loopback port) before all tests and stops it
// after. A second Azurite serves HTTPS with --oauth basic for the bearer-token tests.
import type { TestProject } from "vitest/node";
import { AZURITE_ACCOUNT, AZURITE_KEY, type AzuriteServer, startAzurite } from "../servers/azurite.ts";

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
  const servers: AzuriteServer[] = [];
  const http = await startAzurite();
  servers.push(http);
  let oauth: AzuriteContext["oauth"] = null;
  try {
    // Fails loudly (with the reason, such as a missing openssl) rather than skipping the bearer tests.
    const https = await startAzurite({ oauth: true });
    servers.push(https);
    oauth = { accountUrl: https.accountUrl, port: https.port, ca: https.ca! };
  } catch (error) {
    await http.stop();
    throw error;
  }
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
