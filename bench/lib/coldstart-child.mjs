// Cold start child (plain JS so that node, bun and deno run it as is): imports leasehold from
// COLD_DIR (built .js, or the .ts sources for Deno), takes a first lease, and prints the times.
// env: COLD_DIR, COLD_EXT (".js" | ".ts"), COLD_BACKEND ("memory" | "upstash" | "fetch": a raw
// fetch to the bridge without leasehold, the baseline), COLD_URL, COLD_TOKEN.
const env = globalThis.Deno ? (k) => globalThis.Deno.env.get(k) : (k) => globalThis.process.env[k];
const dir = env("COLD_DIR");
const ext = env("COLD_EXT");
const kind = env("COLD_BACKEND");
const t0 = performance.now();
let lease;
if (kind === "fetch") {
  // The baseline: no leasehold, one raw request to the bridge, as the first acquire would send.
  const res = await fetch(`${env("COLD_URL")}/`, {
    method: "POST",
    headers: { authorization: `Bearer ${env("COLD_TOKEN")}`, "content-type": "application/json" },
    body: '["PING"]',
  });
  await res.text();
} else {
  const { createMutex } = await import(`${dir}/index${ext}`);
  // Every backend is a folder whose index is its factory (src/backends/upstash/index.ts).
  const adapter = await import(`${dir}/backends/${kind}/index${ext}`);
  const backend =
    kind === "memory"
      ? adapter.memory()
      : adapter.upstash({ url: env("COLD_URL"), token: env("COLD_TOKEN"), prefix: "bench-cold:" });
  lease = await createMutex(backend, { name: `cold-${crypto.randomUUID()}` }).tryAcquire();
  if (!lease) throw new Error("cold start: no lease");
}
const t1 = performance.now();
await lease?.release();
// importToLease: import of the library to the first acquired lease; processToLease: from the
// runtime's time origin (process start) to the same moment.
console.log(JSON.stringify({ importToLease: t1 - t0, processToLease: t1 }));
