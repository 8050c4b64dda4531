// A minimal RESP2 client for the tests' Upstash bridge: one socket, pipelined commands, replies
// matched to commands in order. Bulk strings stay Buffers so the bridge can base64 them exactly.
// The encoder and parser are the CLI's (cli/resp.ts).
import { connect, type Socket } from "node:net";
import { encodeCommand, type Reply, replyReader } from "../../../cli/resp.ts";

export { encodeCommand, RedisReplyError, type Reply, Status } from "../../../cli/resp.ts";

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
    let broken = false;
    const fail = (error: Error) => {
      broken = true;
      for (const p of pending.splice(0)) p.reject(error);
    };
    socket.setNoDelay(true);
    socket.on(
      "data",
      replyReader(
        (r) => pending.shift()?.resolve(r),
        (error) => {
          fail(error);
          socket.destroy();
        },
      ),
    );
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
