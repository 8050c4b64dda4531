// Starts and stops Azurite's blob service (the npm devDependency) on a free loopback port, in memory.
// Node runs the server directly (not npx), so killing the child stops the server.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { FetchLike } from "../../../src/backend.ts";
import { freePort } from "./listen.ts";

export { freePort };

/** Azurite's well-known development account and key (published by Microsoft, not a secret). */
export const AZURITE_ACCOUNT = "devstoreaccount1";
export const AZURITE_KEY =
  "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

export interface AzuriteServer {
  port: number;
  /** `http(s)://127.0.0.1:<port>/devstoreaccount1` (path-style). */
  accountUrl: string;
  /** PEM of the self-signed certificate when started with `https`. */
  ca?: string;
  stop(): Promise<void>;
}

function azuriteBlobMain(): string {
  const require = createRequire(import.meta.url);
  const pkgPath = require.resolve("azurite/package.json");
  const pkg = JSON.parse(readFileSync(pkgPath, "utf8")) as { bin: Record<string, string> };
  return join(dirname(pkgPath), pkg.bin["azurite-blob"]!);
}

/** A self-signed certificate for 127.0.0.1 made with the openssl CLI, or null when there is none. */
export function selfSigned(dir: string): { cert: string; key: string } | null {
  const cert = join(dir, "cert.pem");
  const key = join(dir, "key.pem");
  try {
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        key,
        "-out",
        cert,
        "-days",
        "2",
        "-subj",
        "/CN=127.0.0.1",
        "-addext",
        "subjectAltName=IP:127.0.0.1",
      ],
      { stdio: "ignore" },
    );
    return { cert, key };
  } catch {
    return null;
  }
}

/**
 * Starts Azurite's blob service. With `oauth: true` it serves HTTPS with a fresh self-signed
 * certificate and checks bearer tokens (`--oauth basic`); resolves null when openssl is missing.
 * Rejects loudly when the server does not come up within 30 s.
 */
export async function startAzurite(opts: { oauth?: boolean } = {}): Promise<AzuriteServer> {
  const dir = mkdtempSync(join(tmpdir(), "leasehold-azurite-"));
  const args = [
    "--blobHost",
    "127.0.0.1",
    "--inMemoryPersistence",
    "--silent",
    "--disableTelemetry",
    "--skipApiVersionCheck",
    "--loose",
  ];
  let ca: string | undefined;
  if (opts.oauth) {
    const tls = selfSigned(dir);
    if (!tls) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error("openssl is needed to start Azurite with HTTPS (bearer tests)");
    }
    ca = readFileSync(tls.cert, "utf8");
    args.push("--cert", tls.cert, "--key", tls.key, "--oauth", "basic");
  }
  const main = azuriteBlobMain();
  let lastError = "";
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const child: ChildProcess = spawn(process.execPath, [main, ...args, "--blobPort", String(port)], {
      stdio: ["ignore", "pipe", "pipe"],
      cwd: dir, // in-memory, but anything it might write lands in the temp dir
    });
    let output = "";
    child.stdout?.on("data", (d) => (output += d));
    child.stderr?.on("data", (d) => (output += d));
    let exited = false;
    child.once("exit", () => (exited = true));
    // Ready when Azurite says it listens: a connection alone may reach another process that took
    // the port between freePort() and Azurite's bind (seen: every request of a run "fetch failed").
    const deadline = Date.now() + 30_000;
    while (!exited && Date.now() < deadline && !/successfully listens on/.test(output)) {
      await new Promise((r) => setTimeout(r, 50));
    }
    if (!exited && Date.now() < deadline) {
      const stop = async (): Promise<void> => {
        if (!exited) {
          const gone = new Promise((r) => child.once("exit", r));
          child.kill("SIGTERM");
          const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
          await gone;
          clearTimeout(timer);
        }
        rmSync(dir, { recursive: true, force: true });
      };
      const scheme = opts.oauth ? "https" : "http";
      return {
        port,
        accountUrl: `${scheme}://127.0.0.1:${port}/${AZURITE_ACCOUNT}`,
        ...(ca ? { ca } : {}),
        stop,
      };
    }
    child.kill("SIGKILL");
    lastError = output.slice(-2000);
    if (!/EADDRINUSE/.test(output)) break;
  }
  rmSync(dir, { recursive: true, force: true });
  throw new Error(`Azurite did not start (node ${main}):\n${lastError}`);
}

/**
 * A `FetchLike` over node:http(s), for what the global fetch cannot do in tests: trust a
 * self-signed CA (the HTTPS Azurite) and connect to 127.0.0.1 while the URL and Host header name
 * another host (host-style URLs such as `http://devstoreaccount1.blob.localhost:<port>`).
 */
export function nodeFetch(opts: { ca?: string; connectTo?: { host: string; port: number } } = {}): FetchLike {
  return (url, init) =>
    new Promise((resolve, reject) => {
      const u = new URL(url);
      const body = init.body ?? "";
      const headers: Record<string, string> = { ...init.headers, host: u.host };
      if (init.method !== "GET" && init.method !== "HEAD")
        headers["content-length"] = String(Buffer.byteLength(body));
      const req = (u.protocol === "https:" ? httpsRequest : httpRequest)(
        {
          host: opts.connectTo?.host ?? u.hostname,
          port: opts.connectTo?.port ?? u.port,
          path: `${u.pathname}${u.search}`,
          method: init.method,
          headers,
          ...(opts.ca ? { ca: opts.ca } : {}),
          ...(init.signal ? { signal: init.signal } : {}),
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("error", reject);
          res.on("end", () => {
            const text = Buffer.concat(chunks).toString("utf8");
            resolve({
              status: res.statusCode ?? 0,
              headers: {
                get: (name: string) => {
                  const v = res.headers[name.toLowerCase()];
                  return v === undefined ? null : Array.isArray(v) ? v.join(", ") : String(v);
                },
              },
              text: async () => text,
            });
          });
        },
      );
      req.on("error", reject);
      req.end(body);
    });
}

/**
 * An unsigned JWT shaped like a Microsoft Entra ID token for storage. Azurite's `--oauth basic`
 * checks issuer, audience and lifetime, not the signature.
 */
export function fakeEntraToken(opts: { audience?: string; lifetimeSeconds?: number } = {}): string {
  const now = Math.floor(Date.now() / 1000);
  const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
  const payload = {
    aud: opts.audience ?? "https://storage.azure.com",
    iss: "https://sts.windows.net/72f988bf-86f1-41af-91ab-2d7cd011db47/",
    iat: now - 60,
    nbf: now - 60,
    exp: now + (opts.lifetimeSeconds ?? 3600),
    oid: crypto.randomUUID(),
    tid: "72f988bf-86f1-41af-91ab-2d7cd011db47",
  };
  return `${b64url({ alg: "RS256", typ: "JWT" })}.${b64url(payload)}.${Buffer.from("not-a-signature").toString("base64url")}`;
}
