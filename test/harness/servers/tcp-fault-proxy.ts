// A fault-injecting TCP proxy for tests of the backends over a client's own connection (redis,
// postgres): it sits between the client and the server and, per chunk of data, delays it, resets
// both connections (TCP RST), or partitions the connection (nothing passes either way for a
// while, then everything queued passes in order). Faults are seeded-random; each one injected is
// counted by kind. `partition()` and `heal()` do the same to every connection by hand.
// `stop()` closes the listener and destroys every socket.
import { createServer, type Socket, connect as tcpConnect } from "node:net";
import { seededRandom } from "./fault-proxy.ts";
import { listenLoopback } from "./listen.ts";

export type TcpFaultKind = "delay" | "reset" | "partition";

/**
 * Per-chunk probabilities of each fault, and their ranges in ms. Every kind with a probability
 * above 0 comes at least once early: each 16th chunk that draws no fault gets a kind not drawn yet.
 */
export interface TcpFaults {
  seed: number;
  delay: number;
  reset: number;
  partition: number;
  delayMs: [number, number];
  partitionMs: [number, number];
}

export interface TcpFaultProxy {
  /** The proxy's port on 127.0.0.1. */
  readonly port: number;
  /** Turns the faults on (or off with `undefined`); connections pass untouched by default. */
  setFaults(faults: TcpFaults | undefined): void;
  /** Holds every byte either way, on every connection, until `heal()`. */
  partition(): void;
  /** Lets everything held by `partition()` pass, in order. */
  heal(): void;
  /** Faults injected so far, by kind. */
  counts(): Record<TcpFaultKind, number>;
  stop(): Promise<void>;
}

/** Starts a proxy on a free loopback port to `127.0.0.1:targetPort`. */
export async function startTcpFaultProxy(targetPort: number): Promise<TcpFaultProxy> {
  const sockets = new Set<Socket>();
  const counts: Record<TcpFaultKind, number> = { delay: 0, reset: 0, partition: 0 };
  let faults: TcpFaults | undefined;
  let rnd = Math.random;
  // The kinds of the current faults not injected yet, and the chunks passed without a fault.
  let unmet: TcpFaultKind[] = [];
  let quiet = 0;
  let gate: { promise: Promise<void>; open: () => void } | undefined;
  const server = createServer((client) => {
    const upstream = tcpConnect({ host: "127.0.0.1", port: targetPort });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.setNoDelay(true);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {});
    }
    let pausedUntil = 0;
    const kill = () => {
      client.resetAndDestroy();
      upstream.resetAndDestroy();
    };
    // A side's close reaches the other after the data it sent before (held by a delay or a
    // partition), as a FIN follows the data on a network: a server's answer to QUIT arrives.
    const pipe = (from: Socket, to: Socket) => {
      let chain = Promise.resolve();
      from.on("close", () => {
        chain = chain.then(() => {
          to.destroy();
        });
      });
      from.on("data", (chunk: Buffer) => {
        let delay = 0;
        const f = faults;
        if (f) {
          const r = rnd();
          let kind: TcpFaultKind | undefined =
            r < f.reset
              ? "reset"
              : r < f.reset + f.partition
                ? "partition"
                : r < f.reset + f.partition + f.delay
                  ? "delay"
                  : undefined;
          // Every kind comes at least once early, however few chunks a loaded machine sends.
          if (kind === undefined && unmet.length > 0 && ++quiet % 16 === 0) kind = unmet[0];
          if (kind !== undefined) {
            counts[kind]++;
            if (unmet.includes(kind)) unmet.splice(unmet.indexOf(kind), 1);
          }
          if (kind === "reset") return kill();
          if (kind === "partition")
            pausedUntil = Date.now() + f.partitionMs[0] + rnd() * (f.partitionMs[1] - f.partitionMs[0]);
          else if (kind === "delay") delay = f.delayMs[0] + rnd() * (f.delayMs[1] - f.delayMs[0]);
        }
        chain = chain.then(async () => {
          const wait = Math.max(delay, pausedUntil - Date.now());
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
          if (gate) await gate.promise;
          if (!to.destroyed) to.write(chunk);
        });
      });
    };
    pipe(client, upstream);
    pipe(upstream, client);
  });
  const url = await listenLoopback(server);
  return {
    port: Number(new URL(url).port),
    setFaults(next) {
      faults = next;
      if (next) {
        rnd = seededRandom(next.seed);
        unmet = (["reset", "partition", "delay"] as const).filter((k) => next[k] > 0);
        quiet = 0;
      }
    },
    partition() {
      if (gate) return;
      let open = () => {};
      const promise = new Promise<void>((r) => {
        open = r;
      });
      gate = { promise, open };
    },
    heal() {
      gate?.open();
      gate = undefined;
    },
    counts: () => ({ ...counts }),
    async stop() {
      gate?.open();
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}
