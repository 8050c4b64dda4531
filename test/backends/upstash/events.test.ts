// The onEvent observer on the upstash backend, against the real redis-server behind the bridge:
// the events of a free and a contended acquire, a timeout, renewals, a key deleted behind the
// holder's back, renewals that get no answer until the deadline passes (a loopback proxy that
// stops answering), release, and leadership; and no registered secret in any event (the injected
// token, a wrong token, a proxy page that echoes the Authorization header).
import { Redis } from "@upstash/redis";
import { afterEach, describe, expect, inject, it } from "vitest";
import { upstash } from "../../../src/backends/upstash/index.ts";
import { createElection, createMutex, type LockEvent, type MutexOptions } from "../../../src/index.ts";
import { aborted } from "../../../src/signals.ts";
import { sleep } from "../../../src/time.ts";
import { renewalWindow } from "../../../src/timing.ts";
import { checkNoSecrets, registerSecret } from "../../harness/secrets.ts";
import { type FaultServer, startFaultServer } from "../../harness/servers/upstash-faults.ts";
import { lockKey } from "../../harness/upstash.ts";

const ctx = inject("upstash");
const backend = upstash({ url: ctx.url, token: ctx.token });
const sdk = new Redis({ url: ctx.url, token: ctx.token });
const unique = () => `ev-${crypto.randomUUID()}`;

const servers: FaultServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

function observed(options: MutexOptions, b = backend) {
  const events: LockEvent[] = [];
  const mutex = createMutex(b, { ...options, onEvent: (e) => events.push(e) });
  const types = () => events.map((e) => (e.type === "attempt" ? `attempt:${e.outcome}` : e.type));
  return { mutex, events, types };
}

/** A proxy to the bridge that, once frozen, takes every request and never answers. */
async function freezable() {
  let frozen = false;
  const proxy = await startFaultServer((req, res, body) => {
    if (frozen) return;
    void fetch(`${ctx.url}${req.url}`, {
      method: "POST",
      headers: { authorization: String(req.headers.authorization), "content-type": "application/json" },
      body,
    }).then(async (r) => {
      res.writeHead(r.status, { "content-type": "application/json" });
      res.end(await r.text());
    });
  });
  servers.push(proxy);
  return { backend: upstash({ url: proxy.url, token: ctx.token }), freeze: () => (frozen = true) };
}

describe("onEvent on upstash", () => {
  it("a free acquire, background renewals and release, in order, with the lease's token", async () => {
    const name = unique();
    const ttl = 1_500;
    const { mutex, events, types } = observed({ name, ttl, owner: "worker-1" });
    const lease = await mutex.acquire({ timeout: 5_000 });
    await sleep(renewalWindow(ttl).latest + ttl / 12); // one background renewal, at its latest
    await lease.release();
    const t = types();
    expect(t.slice(0, 3)).toEqual(["acquiring", "attempt:granted", "acquired"]);
    expect(t.slice(3, -1).length).toBeGreaterThanOrEqual(1);
    expect(t.slice(3)).toEqual([...Array(t.length - 4).fill("renewed"), "released"]);
    for (const e of events) {
      expect(e).toMatchObject({ name, owner: "worker-1" });
      if ("token" in e) expect(e.token).toBe(lease.token);
    }
    const renewed = events[3] as LockEvent & { type: "renewed" };
    expect(renewed.latency).toBeGreaterThan(0);
    expect(renewed.margin).toBeGreaterThan(ttl / 2);
    expect(renewed.margin).toBeLessThan(ttl);
    expect(events.at(-1)).toMatchObject({ type: "released" });
    checkNoSecrets(events, "events");
  });

  it("a contended acquire: taken attempts with the holder's remaining time, then granted", async () => {
    const name = unique();
    const held = await createMutex(backend, { name, ttl: 3_000 }).acquire({ timeout: 5_000 });
    const { mutex, events, types } = observed({ name, ttl: 3_000, retryDelay: 50 });
    const pending = mutex.acquire({ timeout: 5_000 });
    await sleep(300);
    await held.release();
    const lease = await pending;
    const t = types();
    expect(t[0]).toBe("acquiring");
    expect(t.slice(-2)).toEqual(["attempt:granted", "acquired"]);
    const taken = events.filter((e) => e.type === "attempt" && e.outcome === "taken");
    expect(taken.length).toBe(t.length - 3);
    expect(taken.length).toBeGreaterThanOrEqual(2);
    for (const e of taken) {
      const retryAfter = (e as { retryAfter?: number }).retryAfter;
      expect(retryAfter).toBeGreaterThan(0);
      expect(retryAfter).toBeLessThanOrEqual(3_000);
    }
    expect(events.at(-1)).toMatchObject({ token: lease.token, attempts: taken.length + 1 });
    expect((events.at(-1) as { waited: number }).waited).toBeGreaterThanOrEqual(290);
    await lease.release();
  });

  it("a timeout: acquire-failed with ERR_LOCK_TIMEOUT after the taken attempts", async () => {
    const name = unique();
    const held = await createMutex(backend, { name, ttl: 3_000 }).acquire({ timeout: 5_000 });
    const { events, types, mutex } = observed({ name, retryDelay: 50 });
    await expect(mutex.acquire({ timeout: 300 })).rejects.toMatchObject({ code: "ERR_LOCK_TIMEOUT" });
    const n = types().length - 2;
    expect(n).toBeGreaterThanOrEqual(2);
    // The timeout may cut the last attempt's request short (on a loaded machine, say): then that
    // attempt is an error, retryable or the timeout itself (the reason its request was aborted
    // with), and the acquire still fails with the timeout.
    const last = events.at(-2);
    const cut = last?.type === "attempt" && last.outcome === "error";
    if (cut) expect(last.retryable || last.code === "ERR_LOCK_TIMEOUT", JSON.stringify(last)).toBe(true);
    const attempts = [...Array(cut ? n - 1 : n).fill("attempt:taken"), ...(cut ? ["attempt:error"] : [])];
    expect(types()).toEqual(["acquiring", ...attempts, "acquire-failed"]);
    expect(events.at(-1)).toMatchObject({ code: "ERR_LOCK_TIMEOUT", attempts: n });
    await held.release();
  });

  it("the key deleted behind the holder's back: lost with reason gone at the next renewal", async () => {
    const name = unique();
    const { mutex, events, types } = observed({ name, ttl: 1_500 });
    const lease = await mutex.acquire({ timeout: 5_000 });
    expect(await sdk.del(lockKey(name))).toBe(1);
    await aborted(lease.signal);
    expect(types()).toEqual(["acquiring", "attempt:granted", "acquired", "lost"]);
    expect(events.at(-1)).toMatchObject({ type: "lost", token: lease.token, reason: "gone" });
    await lease.release();
    expect(types().at(-1)).toBe("lost");
  });

  it("renewals that get no answer: renew-failed (retryable, margin shrinking), then lost with reason deadline", async () => {
    const { backend: proxied, freeze } = await freezable();
    const { mutex, events, types } = observed({ name: unique(), ttl: 1_000 }, proxied);
    const lease = await mutex.acquire({ timeout: 5_000 });
    freeze();
    await aborted(lease.signal);
    const failed = events.filter((e) => e.type === "renew-failed");
    expect(failed.length).toBeGreaterThanOrEqual(1);
    expect(types()).toEqual([
      "acquiring",
      "attempt:granted",
      "acquired",
      ...Array(failed.length).fill("renew-failed"),
      "lost",
    ]);
    for (const e of failed) expect(e).toMatchObject({ code: "ERR_BACKEND", retryable: true });
    for (const [i, e] of failed.entries()) if (i > 0) expect(e.margin).toBeLessThan(failed[i - 1]!.margin);
    expect(failed.at(-1)!.margin).toBeLessThan(700); // the deadline is at most ttl − guard away
    expect(events.at(-1)).toMatchObject({ token: lease.token, reason: "deadline" });
  });

  it("leadership: elected after acquired; deposed after lost, and after released on shutdown", async () => {
    const name = unique();
    const { mutex, events, types } = observed({ name, ttl: 1_500, retryDelay: 50 });
    const stop = new AbortController();
    const tokens: number[] = [];
    await createElection(mutex).lead(
      async (signal, lease) => {
        tokens.push(lease.token);
        if (tokens.length === 2) return stop.abort();
        await sdk.del(lockKey(name));
        await aborted(signal);
      },
      { signal: stop.signal, onError: () => {} },
    );
    const t = types();
    expect(t.slice(0, 6)).toEqual(["acquiring", "attempt:granted", "acquired", "elected", "lost", "deposed"]);
    expect(t.slice(6)).toEqual([
      "acquiring",
      "attempt:granted",
      "acquired",
      "elected",
      "released",
      "deposed",
    ]);
    expect(events[3]).toMatchObject({ type: "elected", token: tokens[0] });
    expect(events[4]).toMatchObject({ reason: "gone" });
    expect(events.at(-1)).toMatchObject({ type: "deposed", token: tokens[1] });
  });

  it("no secret in any event: a wrong token, and a proxy page that echoes the Authorization header", async () => {
    const wrong = "wrong-events-TOKEN-0123456789";
    registerSecret(wrong);
    const refused = observed({ name: unique() }, upstash({ url: ctx.url, token: wrong }));
    await expect(refused.mutex.acquire({ timeout: 1_000 })).rejects.toMatchObject({
      code: "ERR_BACKEND_AUTH",
    });
    expect(refused.types()).toEqual(["acquiring", "attempt:error", "acquire-failed"]);
    expect(refused.events[1]).toMatchObject({ code: "ERR_BACKEND_AUTH", retryable: false });

    const echo = await startFaultServer((req, res) => {
      res.writeHead(502, { "content-type": "text/html" });
      res.end(`<p>${req.headers.authorization} ${req.url}</p>`);
    });
    servers.push(echo);
    const echoed = observed({ name: unique(), retryDelay: 20 }, upstash({ url: echo.url, token: ctx.token }));
    await expect(echoed.mutex.acquire({ timeout: 200, onError: () => {} })).rejects.toMatchObject({
      code: "ERR_LOCK_TIMEOUT",
    });
    expect(echoed.events.filter((e) => e.type === "attempt" && e.outcome === "error").length).toBeGreaterThan(
      0,
    );
    expect(echoed.events[1]).toMatchObject({ code: "ERR_BACKEND", retryable: true });
    for (const events of [refused.events, echoed.events]) {
      checkNoSecrets(events, "events");
      checkNoSecrets(JSON.stringify(events), "events as JSON");
      expect(JSON.stringify(events)).not.toContain(ctx.url);
    }
  });
});
