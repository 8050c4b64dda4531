// Which fence for the azure-blob backend? Measures, against a local Azurite, the requests and
// sequential round trips of one uncontended acquire (lease + fencing token + owner) for:
//   metadata   HEAD (token, ETag) -> lease acquire (If-Match) -> Set Metadata (token+1, owner; If-Match, lease id)
//   page-seq   lease acquire -> Set Properties (sequence number increment) -> Set Metadata (owner)
//   page-par   lease acquire -> [Set Properties (increment) | Set Metadata (owner)] in parallel   <- chosen
//   page-only  lease acquire -> Set Properties (increment)   (floor: no owner stored)
// Each cycle releases the lease afterwards (not timed). Run: npx tsx bench/azure-fence.ts [cycles]
import { sharedKeyAuth } from "../src/backends/azure-blob/auth.ts";
import { AZURITE_ACCOUNT, AZURITE_KEY, startAzurite } from "../test/harness/servers/azurite.ts";

const cycles = Number(process.argv[2] ?? 300);
const server = await startAzurite();
const auth = sharedKeyAuth(AZURITE_ACCOUNT, AZURITE_KEY);
const container = `${server.accountUrl}/bench`;
let requests = 0;

async function req(method: string, url: string, headers: Record<string, string>): Promise<Response> {
  requests++;
  const a = await auth.authorize(method, url, {
    ...headers,
    "x-ms-date": new Date().toUTCString(),
    "x-ms-version": "2024-11-04",
  });
  const res = await fetch(a.url, { method, headers: a.headers });
  await res.arrayBuffer();
  if (res.status >= 300)
    throw new Error(`${method} ${url}: ${res.status} ${res.headers.get("x-ms-error-code")}`);
  return res;
}

const lease = (blob: string, id: string, extra: Record<string, string> = {}) =>
  req("PUT", `${container}/${blob}?comp=lease`, {
    "x-ms-lease-action": "acquire",
    "x-ms-lease-duration": "15",
    "x-ms-proposed-lease-id": id,
    ...extra,
  });
const increment = (blob: string, id: string) =>
  req("PUT", `${container}/${blob}?comp=properties`, {
    "x-ms-lease-id": id,
    "x-ms-sequence-number-action": "increment",
  });
const owner = (blob: string, id: string, extra: Record<string, string> = {}) =>
  req("PUT", `${container}/${blob}?comp=metadata`, {
    "x-ms-lease-id": id,
    "x-ms-meta-owner": "bench%20owner",
    ...extra,
  });

const variants: Record<
  string,
  { type: "BlockBlob" | "PageBlob"; acquire(blob: string, id: string): Promise<number> }
> = {
  metadata: {
    type: "BlockBlob",
    async acquire(blob, id) {
      const head = await req("HEAD", `${container}/${blob}`, {});
      const etag = head.headers.get("etag")!;
      const token = Number(head.headers.get("x-ms-meta-token") ?? 0) + 1;
      await lease(blob, id, { "if-match": etag });
      await owner(blob, id, { "if-match": etag, "x-ms-meta-token": String(token) });
      return token;
    },
  },
  "page-seq": {
    type: "PageBlob",
    async acquire(blob, id) {
      await lease(blob, id);
      const token = Number((await increment(blob, id)).headers.get("x-ms-blob-sequence-number"));
      await owner(blob, id);
      return token;
    },
  },
  "page-par": {
    type: "PageBlob",
    async acquire(blob, id) {
      await lease(blob, id);
      const [seq] = await Promise.all([increment(blob, id), owner(blob, id)]);
      return Number(seq.headers.get("x-ms-blob-sequence-number"));
    },
  },
  "page-only": {
    type: "PageBlob",
    async acquire(blob, id) {
      await lease(blob, id);
      return Number((await increment(blob, id)).headers.get("x-ms-blob-sequence-number"));
    },
  },
};

const pct = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor(p * xs.length))]!.toFixed(2);
try {
  await req("PUT", `${container}?restype=container`, {});
  const rows: string[] = [];
  for (const [name, v] of Object.entries(variants)) {
    const blob = `fence-${name}`;
    const typeHeaders: Record<string, string> =
      v.type === "PageBlob"
        ? { "x-ms-blob-type": "PageBlob", "x-ms-blob-content-length": "0" }
        : { "x-ms-blob-type": "BlockBlob" };
    await req("PUT", `${container}/${blob}`, typeHeaders);
    const times: number[] = [];
    let last = 0;
    let perAcquire = 0;
    for (let i = 0; i < cycles + 20; i++) {
      const id = crypto.randomUUID();
      const before = requests;
      const t0 = performance.now();
      const token = await v.acquire(blob, id);
      const dt = performance.now() - t0;
      perAcquire = requests - before;
      if (token <= last) throw new Error(`${name}: token ${token} after ${last}`);
      last = token;
      if (i >= 20) times.push(dt); // first 20 are warm-up
      await req("PUT", `${container}/${blob}?comp=lease`, {
        "x-ms-lease-action": "release",
        "x-ms-lease-id": id,
      });
    }
    times.sort((a, b) => a - b);
    const sequential = { metadata: 3, "page-seq": 3, "page-par": 2, "page-only": 2 }[name];
    rows.push(
      `| ${name} | ${perAcquire} | ${sequential} | ${pct(times, 0.5)} | ${pct(times, 0.95)} | ${v.type === "PageBlob" ? "server-side increment" : "read + If-Match"} |`,
    );
  }
  console.log(`Azurite ${server.accountUrl}, ${cycles} uncontended acquires each, node ${process.version}\n`);
  console.log("| variant | requests | sequential round trips | median ms | p95 ms | token |");
  console.log("|---|---|---|---|---|---|");
  for (const r of rows) console.log(r);
} finally {
  await server.stop();
}
