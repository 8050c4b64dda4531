// The test bridge speaks the real Upstash REST protocol: the official @upstash/redis client with
// its default settings (base64 replies, auto-pipelining, read-your-writes) works against it.
// This file runs its own redis-server, because it flushes the script cache.
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type RedisServer, startRedis } from "./servers/redis.ts";
import { startBridge, type UpstashBridge } from "./servers/upstash-bridge.ts";

let server: RedisServer;
let bridge: UpstashBridge;
let redis: Redis;

beforeAll(async () => {
  server = await startRedis();
  bridge = await startBridge({ redis: server.socket });
  redis = new Redis({ url: bridge.url, token: bridge.token });
});
afterAll(async () => {
  await bridge?.stop();
  await server?.stop();
});
beforeEach(() => bridge.resetStats());

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${bridge.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${bridge.token}`, ...headers },
    body: JSON.stringify(body),
  });

describe("@upstash/redis with default settings against the bridge", () => {
  it("sets and gets strings, numbers, JSON and non-ASCII values", async () => {
    expect(await redis.set("b:str", 'hello | "world" 🔒\n')).toBe("OK");
    expect(await redis.get("b:str")).toBe('hello | "world" 🔒\n');
    await redis.set("b:json", { a: 1, b: ["x"] });
    expect(await redis.get("b:json")).toEqual({ a: 1, b: ["x"] });
    expect(await redis.incr("b:n")).toBe(1);
    expect(await redis.get("b:missing")).toBeNull();
    expect(await redis.set("b:nx", "1", { nx: true, px: 5_000 })).toBe("OK");
    expect(await redis.set("b:nx", "2", { nx: true, px: 5_000 })).toBeNull();
    const pttl = await redis.pttl("b:nx");
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(5_000);
    expect(await redis.ping()).toBe("PONG");
    // Auto-pipelining sends single commands to /pipeline.
    expect(bridge.stats().paths["/pipeline"]).toBeGreaterThan(0);
  });

  it("runs a script through createScript: EVALSHA, and EVAL after NOSCRIPT", async () => {
    const script = redis.createScript<string>('return ARGV[1] .. "|" .. redis.call("INCR", KEYS[1])');
    await redis.scriptFlush();
    bridge.resetStats();
    expect(await script.exec(["b:script"], ["émoji 🔒"])).toBe("émoji 🔒|1");
    // The first EVALSHA failed with NOSCRIPT, the client fell back to EVAL: two commands.
    expect(bridge.stats().commands).toBe(2);
    bridge.resetStats();
    expect(await script.exec(["b:script"], ["again"])).toBe("again|2");
    expect(bridge.stats().commands).toBe(1);
    expect(await script.evalsha(["b:script"], ["sha"])).toBe("sha|3");
    expect(await redis.scriptExists(script.sha1)).toEqual([1]);
  });

  it("runs a pipeline with per-command errors", async () => {
    const p = redis.pipeline();
    p.set("b:p1", "one");
    p.get("b:p1");
    p.incr("b:p1");
    p.del("b:p1");
    const results = await p.exec({ keepErrors: true });
    expect(results.map((r) => r.result)).toEqual(["OK", "one", undefined, 1]);
    expect(results[2]?.error).toMatch(/not an integer/);
  });

  it("runs a multi-exec transaction", async () => {
    const tx = redis.multi();
    tx.set("b:m", "1");
    tx.incr("b:m");
    tx.get("b:m");
    expect(await tx.exec()).toEqual(["OK", 2, 2]);
    expect(bridge.stats().paths["/multi-exec"]).toBe(1);
  });

  it("rejects a wrong token with 401 Unauthorized", async () => {
    const wrong = new Redis({ url: bridge.url, token: "wrong-token", enableAutoPipelining: false });
    await expect(wrong.get("b:str")).rejects.toThrow(/Unauthorized/);
    const res = await fetch(`${bridge.url}/`, {
      method: "POST",
      headers: { authorization: "Bearer nope" },
      body: '["PING"]',
    });
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ error: "Unauthorized" });
  });
});

describe("the bridge's raw protocol", () => {
  it("answers single commands with 200 {result} or 400 {error}, numbers and booleans as strings", async () => {
    let res = await post("/", ["SET", "b:raw", 42]);
    expect([res.status, await res.json()]).toEqual([200, { result: "OK" }]);
    res = await post("/", ["GET", "b:raw"]);
    expect(await res.json()).toEqual({ result: "42" });
    res = await post("/", ["SET", "b:bool", true]);
    res = await post("/", ["GET", "b:bool"]);
    expect(await res.json()).toEqual({ result: "true" });
    res = await post("/", ["INCR", "b:bool"]);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: "ERR value is not an integer or out of range" });
    res = await post("/", ["EVAL", "return {1, false, 'x', {2, nil}}", 0]);
    expect(await res.json()).toEqual({ result: [1, null, "x", [2]] });
  });

  it("encodes every string but OK as base64 on request", async () => {
    const b64 = { "upstash-encoding": "base64" };
    expect(await (await post("/", ["SET", "b:enc", "é🔒"], b64)).json()).toEqual({ result: "OK" });
    expect(await (await post("/", ["GET", "b:enc"], b64)).json()).toEqual({
      result: Buffer.from("é🔒").toString("base64"),
    });
    expect(await (await post("/", ["PING"], b64)).json()).toEqual({
      result: Buffer.from("PONG").toString("base64"),
    });
    expect(await (await post("/", ["EVAL", "return {'a', 7}", 0], b64)).json()).toEqual({
      result: ["YQ==", 7],
    });
  });

  it("discards a transaction whose command fails to queue and answers 400", async () => {
    await post("/", ["SET", "b:tx", "before"]);
    const res = await post("/multi-exec", [
      ["SET", "b:tx", "after"],
      ["NOSUCHCOMMAND", "x"],
    ]);
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatch(/unknown command/);
    expect(await (await post("/", ["GET", "b:tx"])).json()).toEqual({ result: "before" });
    // Runtime errors inside EXEC are per-command entries.
    const ok = await post("/multi-exec", [
      ["SET", "b:tx", "x"],
      ["INCR", "b:tx"],
    ]);
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual([
      { result: "OK" },
      { error: "ERR value is not an integer or out of range" },
    ]);
  });

  it("rejects bodies that are not commands", async () => {
    for (const body of [[], {}, [null], [["GET"]], "GET"]) {
      const res = await post("/", body);
      expect(res.status).toBe(400);
      expect(typeof (await res.json()).error).toBe("string");
    }
    const res = await fetch(`${bridge.url}/`, {
      method: "POST",
      headers: { authorization: `Bearer ${bridge.token}` },
      body: "[not json",
    });
    expect(res.status).toBe(400);
  });

  it("counts every request by path", async () => {
    await post("/", ["PING"]);
    await post("/pipeline", [["PING"], ["PING"]]);
    await post("/multi-exec", [["PING"]]);
    expect(bridge.stats()).toEqual({
      total: 3,
      paths: { "/": 1, "/pipeline": 1, "/multi-exec": 1 },
      commands: 4,
    });
  });
});
