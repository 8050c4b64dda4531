// EVAL vs EVALSHA for the upstash backend's scripts, against a real redis-server behind the
// test bridge on loopback. Run: npx tsx bench/upstash-script.ts [iterations]
//
// Both variants run the real backend; they differ only in a fetch wrapper. "eval" passes each
// request through (after the same JSON parse/stringify the other does); "evalsha" rewrites
// ["EVAL", script, ...] into ["EVALSHA", sha1(script), ...] and falls back to the EVAL on a
// NOSCRIPT reply, as an EVALSHA-first backend would. The variants alternate in random order
// every iteration, so drift in the machine's load hits both alike. Medians are reported.
import { createHash } from "node:crypto";
import type { FetchLike } from "../src/backend.ts";
import { upstash } from "../src/backends/upstash/index.ts";
import { startRedis } from "../test/harness/servers/redis.ts";
import { startBridge } from "../test/harness/servers/upstash-bridge.ts";

const iterations = Number(process.argv[2] ?? 2_000);
const warmup = 200;

type Variant = "eval" | "evalsha";
const shas = new Map<string, string>();
const sha1 = (s: string) => {
  const known = shas.get(s);
  if (known) return known;
  const h = createHash("sha1").update(s).digest("hex");
  shas.set(s, h);
  return h;
};
const bytes: Record<Variant, number[]> = { eval: [], evalsha: [] };

function wrap(variant: Variant): FetchLike {
  return async (url, init) => {
    const command = JSON.parse(init.body ?? "[]") as unknown[];
    if (variant === "eval" || command[0] !== "EVAL") {
      const body = JSON.stringify(command);
      bytes[variant].push(body.length);
      return fetch(url, { ...init, body });
    }
    const body = JSON.stringify(["EVALSHA", sha1(String(command[1])), ...command.slice(2)]);
    bytes[variant].push(body.length);
    const res = await fetch(url, { ...init, body });
    if (res.status !== 400) return res;
    const text = await res.text();
    if (!text.includes("NOSCRIPT")) return new Response(text, { status: res.status, headers: res.headers });
    return fetch(url, init);
  };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
};
const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.9)] ?? Number.NaN;

const redis = await startRedis();
const bridge = await startBridge({ redis: redis.socket });
try {
  const backends = {
    eval: upstash({ url: bridge.url, token: bridge.token, fetch: wrap("eval"), prefix: "bench:" }),
    evalsha: upstash({ url: bridge.url, token: bridge.token, fetch: wrap("evalsha"), prefix: "bench:" }),
  };
  const ops = ["acquire", "renew", "release", "inspect"] as const;
  const times: Record<Variant, Record<(typeof ops)[number], number[]>> = {
    eval: { acquire: [], renew: [], release: [], inspect: [] },
    evalsha: { acquire: [], renew: [], release: [], inspect: [] },
  };
  for (let i = 0; i < warmup + iterations; i++) {
    const order: Variant[] = Math.random() < 0.5 ? ["eval", "evalsha"] : ["evalsha", "eval"];
    for (const variant of order) {
      const b = backends[variant];
      const key = `k${i % 64}`;
      const nonce = crypto.randomUUID();
      const t: number[] = [performance.now()];
      const acquired = await b.acquire({ key, owner: "bench owner", nonce, ttl: 10_000 });
      t.push(performance.now());
      if (!acquired.ok) throw new Error("bench: acquire failed");
      await b.renew({ key, nonce, ttl: 10_000 });
      t.push(performance.now());
      await b.release({ key, nonce });
      t.push(performance.now());
      await b.inspect({ key: key });
      t.push(performance.now());
      if (i >= warmup) for (const [j, op] of ops.entries()) times[variant][op].push(t[j + 1]! - t[j]!);
    }
  }
  const avg = (xs: number[]) => Math.round(xs.reduce((a, b) => a + b, 0) / xs.length);
  console.log(`redis-server ${redis.version}, ${iterations} interleaved iterations after ${warmup} warm-up`);
  console.log("op        variant   median ms  p90 ms   (mean request body bytes)");
  for (const op of ops) {
    for (const variant of ["eval", "evalsha"] as const) {
      const xs = times[variant][op];
      console.log(
        `${op.padEnd(9)} ${variant.padEnd(9)} ${median(xs).toFixed(3).padStart(9)}  ${p90(xs).toFixed(3).padStart(7)}`,
      );
    }
  }
  console.log(`mean body bytes: eval ${avg(bytes.eval)}, evalsha ${avg(bytes.evalsha)}`);
} finally {
  await bridge.stop();
  await redis.stop();
}
