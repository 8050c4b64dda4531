// The backend the environment and the flags describe.
import type { Backend } from "../src/backend.ts";
import { parseConnectionString } from "../src/backends/azure-blob/auth.ts";
import { azureBlob } from "../src/backends/azure-blob/index.ts";
import { fromEnv } from "../src/backends/upstash/index.ts";
import type { Options } from "./args.ts";
import { ENV } from "./help.ts";
import { messageOf, secrets, UsageError } from "./output.ts";

/** The backend the environment and flags describe; a UsageError names what is missing. */
export function backendFrom(o: Options, env: Record<string, string | undefined>): Backend {
  const set = (name: string) => (env[name] ?? "") !== "";
  const upstashSet = [ENV.upstashUrl, ENV.upstashToken, "KV_REST_API_URL", "KV_REST_API_TOKEN"].some(set);
  const kind = o.backend ?? (upstashSet ? "upstash" : set(ENV.azure) ? "azure-blob" : undefined);
  if (kind === undefined) {
    throw new UsageError(
      `no backend configured: set ${ENV.upstashUrl} and ${ENV.upstashToken}, or ${ENV.azure} and --container (or ${ENV.container})`,
    );
  }
  if (kind === "upstash") {
    const missing = [ENV.upstashUrl, ENV.upstashToken].filter(
      (v, n) => !set(v) && !set(n === 0 ? "KV_REST_API_URL" : "KV_REST_API_TOKEN"),
    );
    if (missing.length > 0)
      throw new UsageError(`the upstash backend needs ${missing.join(" and ")} (not set)`);
    for (const v of [ENV.upstashToken, "KV_REST_API_TOKEN"]) if (set(v)) secrets.push(env[v]!);
    for (const v of [ENV.upstashUrl, "KV_REST_API_URL"]) {
      try {
        if (set(v)) secrets.push(decodeURIComponent(new URL(env[v]!).password));
      } catch {}
    }
    try {
      return fromEnv(env);
    } catch (error) {
      throw new UsageError(`${ENV.upstashUrl} / ${ENV.upstashToken}: ${messageOf(error)}`);
    }
  }
  if (kind === "azure-blob") {
    const container = o.container ?? env[ENV.container];
    const missing = [
      ...(set(ENV.azure) ? [] : [ENV.azure]),
      ...(container ? [] : [`--container (or ${ENV.container})`]),
    ];
    if (missing.length > 0) throw new UsageError(`the azure-blob backend needs ${missing.join(" and ")}`);
    const connectionString = env[ENV.azure]!;
    secrets.push(connectionString);
    try {
      // The backend's own parser: its key and SAS (and the SAS's signature, in both forms) are secrets.
      const { accountKey, sasToken } = parseConnectionString(connectionString);
      for (const value of [accountKey, sasToken]) if (value) secrets.push(value);
      const sig = sasToken && /(?:^|&)sig=([^&]+)/.exec(sasToken)?.[1];
      if (sig) secrets.push(sig, decodeURIComponent(sig));
      return azureBlob({ connectionString, container: container!, createContainer: o.createContainer });
    } catch (error) {
      throw new UsageError(`${ENV.azure} / --container: ${messageOf(error)}`);
    }
  }
  throw new UsageError(`--backend must be upstash or azure-blob, got ${JSON.stringify(kind)}`);
}
