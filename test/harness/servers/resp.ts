// A minimal RESP2 client for the tests' Upstash bridge: one socket, pipelined commands, replies
// matched to commands in order. Bulk strings stay Buffers so the bridge can base64 them exactly.
import { connect, type Socket } from "node:net";

/** An error reply from Redis (`-ERR ...`), kept as a value so it can sit inside an EXEC array. */
export class RedisReplyError extends Error {
  override name = "RedisReplyError";
}

/** A status reply (`+OK`), distinct from a bulk string because base64 encoding treats OK specially. */
export class Status {
  constructor(readonly text: string) {}
}

export type Reply = Status | RedisReplyError | number | Buffer | null | Reply[];

/** Encodes one command as a RESP array of bulk strings. */
export function encodeCommand(args: readonly (string | Buffer)[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const a of args) {
    const b = typeof a === "string" ? Buffer.from(a, "utf8") : a;
    parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from("\r\n"));
  }
  return Buffer.concat(parts);
}

const incomplete = Symbol("incomplete");

/** Parses one reply at `pos`; returns the reply and the next position, or `incomplete`. */
function parse(buf: Buffer, pos: number): { value: Reply; end: number } | typeof incomplete {
  const eol = buf.indexOf("\r\n", pos);
  if (eol < 0) return incomplete;
  const type = String.fromCharCode(buf[pos]!);
  const line = buf.toString("utf8", pos + 1, eol);
  const next = eol + 2;
  switch (type) {
    case "+":
      return { value: new Status(line), end: next };
    case "-":
      return { value: new RedisReplyError(line), end: next };
    case ":":
      return { value: Number(line), end: next };
    case "$": {
      const len = Number(line);
      if (len < 0) return { value: null, end: next };
      if (buf.length < next + len + 2) return incomplete;
      return { value: buf.subarray(next, next + len), end: next + len + 2 };
    }
    case "*": {
      const count = Number(line);
      if (count < 0) return { value: null, end: next };
      const items: Reply[] = [];
      let at = next;
      for (let i = 0; i < count; i++) {
        const item = parse(buf, at);
        if (item === incomplete) return incomplete;
        items.push(item.value);
        at = item.end;
      }
      return { value: items, end: at };
    }
    default:
      throw new Error(`RESP: unexpected reply type ${JSON.stringify(type)}`);
  }
}

/** One Redis connection. `send` pipelines: call it many times without awaiting in between. */
export interface RespConnection {
  send(args: readonly (string | Buffer)[]): Promise<Reply>;
  /** Whether the socket failed or closed; a broken connection must not be reused. */
  readonly broken: boolean;
  close(): void;
}

/** Connects to Redis over a unix socket path or a TCP port on 127.0.0.1. */
export function connectResp(target: string | number): Promise<RespConnection> {
  return new Promise((resolve, reject) => {
    const socket: Socket =
      typeof target === "number" ? connect({ host: "127.0.0.1", port: target }) : connect({ path: target });
    const pending: { resolve: (r: Reply) => void; reject: (e: Error) => void }[] = [];
    let buffer: Buffer = Buffer.alloc(0);
    let broken = false;
    const fail = (error: Error) => {
      broken = true;
      for (const p of pending.splice(0)) p.reject(error);
    };
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => {
      buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
      let pos = 0;
      try {
        while (pos < buffer.length) {
          const r = parse(buffer, pos);
          if (r === incomplete) break;
          pos = r.end;
          pending.shift()?.resolve(r.value);
        }
      } catch (error) {
        fail(error as Error);
        socket.destroy();
        return;
      }
      buffer = buffer.subarray(pos);
    });
    socket.once("connect", () => {
      resolve({
        send(args) {
          if (broken) return Promise.reject(new Error("RESP: connection is closed"));
          return new Promise<Reply>((res, rej) => {
            pending.push({ resolve: res, reject: rej });
            socket.write(encodeCommand(args));
          });
        },
        get broken() {
          return broken;
        },
        close() {
          broken = true;
          socket.destroy();
        },
      });
    });
    socket.on("error", (error) => {
      fail(error);
      reject(error);
    });
    socket.on("close", () => fail(new Error("RESP: connection closed")));
  });
}
