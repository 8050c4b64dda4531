// Wake on release for the redis backend (docs/DESIGN.md §19, §5.9): the scripts publish each
// release of a lock on `leasehold:` and its lock key (redis-lua.ts); a waiter subscribes to that
// channel on a second connection made from the user's client, one per backend object, opened at
// the first watch and closed when the last one ends.

import { wakes } from "../shared/wakes.ts";

/** A subscriber connection, as {@link listener} uses it. */
export interface Subscriber {
  /** Resolves once the server confirmed the subscription. */
  subscribe(channel: string): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  /** Closes the connection at once (the server drops its subscriptions); never throws. */
  close(): void;
}

/**
 * Opens a subscriber connection from the user's client: `message(channel)` for each message,
 * `lost()` when the connection dropped or failed, after closing it at once (before the client's
 * own reconnect starts: it is never reconnected).
 */
export type Open = (message: (channel: string) => void, lost: () => void) => Promise<Subscriber>;

type Fn = (...args: unknown[]) => unknown;
type Client = Record<string, Fn>;

const ignore = () => {};

/**
 * The {@link Subscriber} over `s`, which `close` closes (whatever it throws or rejects is
 * ignored), with the `listener` of messages its `subscribe` takes (none for ioredis); and `gone`,
 * for the connection's loss: closes it, then tells `lost`.
 */
function over(s: Client, close: () => unknown, lost: () => void, ...listener: [Fn?]) {
  const shut = () => {
    try {
      Promise.resolve(close()).catch(ignore);
    } catch {}
  };
  const subscriber: Subscriber = {
    subscribe: async (channel) => s.subscribe!(channel, ...listener),
    unsubscribe: async (channel) => s.unsubscribe!(channel, ...listener),
    close: shut,
  };
  return {
    subscriber,
    gone: () => {
      shut();
      lost();
    },
  };
}

/** node-redis' and Bun's listener, `(message, channel)`. */
const byChannel = (message: (channel: string) => void) => (_: unknown, channel: unknown) =>
  message(channel as string);

// Each client's way, over what it offers (`duplicate` and `subscribe`): ioredis `Redis` and
// `Cluster` (a duplicate connects by itself; errors and the connection's end are events),
// node-redis v4-v6 client and cluster (a duplicate is connected with `connect()`; `destroy()` from
// v5, `disconnect()` before; the end is an "error" event), Bun's `RedisClient` (`duplicate()`
// resolves it connected; it reconnects without its subscriptions, so a second `onconnect` is a
// loss). Each would reconnect by itself: closed at once in the event instead, it does not.

/** ioredis `Redis` or `Cluster`. */
export const ioredis =
  (client: Client): Open =>
  async (message, lost) => {
    const s = client.duplicate!() as Client;
    const { subscriber, gone } = over(s, () => s.disconnect!(), lost);
    s.on!("error", ignore);
    s.on!("close", gone);
    s.on!("message", message);
    return subscriber;
  };

/** node-redis v4 to v6, a client or a cluster. */
export const nodeRedis =
  (client: Client): Open =>
  async (message, lost) => {
    const s = client.duplicate!() as Client;
    const { subscriber, gone } = over(
      s,
      () => (s.destroy ?? s.disconnect)!.call(s),
      lost,
      byChannel(message),
    );
    s.on!("error", gone);
    try {
      await s.connect!();
    } catch (error) {
      subscriber.close();
      throw error;
    }
    return subscriber;
  };

/** Bun's `RedisClient`. */
export const bun =
  (client: Client): Open =>
  async (message, lost) => {
    const s = (await client.duplicate!()) as Client & {
      connected?: boolean;
      onclose?: unknown;
      onconnect?: unknown;
    };
    const { subscriber, gone } = over(s, () => s.close!(), lost, byChannel(message));
    let up = s.connected !== false;
    s.onclose = gone;
    s.onconnect = () => {
      if (up) gone();
      up = true;
    };
    return subscriber;
  };

/**
 * `watch` over connections `open` makes (ReleaseNotices in src/backend.ts): every watch of the
 * backend shares one connection, opened by the first and closed when the last one ends. A lost
 * connection is closed and forgotten, and the watches it served are told they stopped
 * (`wake(true)`: the core ends them, and their waiters listen again after their next attempt);
 * the next watch opens another, which subscribes to every channel still watched. A failure
 * rejects with `error(reason)`.
 */
export function listener(
  open: Open,
  error: (reason: unknown) => Error,
): (channel: string, wake: (stopped?: true) => void, signal: AbortSignal) => Promise<void> {
  const waiting = wakes();
  let conn: Promise<Subscriber> | undefined;

  /** Closes `made` (once it opened) and forgets it, unless it was already replaced. */
  const drop = (made: Promise<Subscriber> | undefined) => {
    if (conn === made) conn = undefined;
    made?.then((s) => s.close(), ignore);
  };
  /** `made` was lost: closed and forgotten, and, while it was the connection, every watch told it stopped. */
  const lost = (made: Promise<Subscriber>) => {
    const current = conn === made;
    drop(made);
    if (current) waiting.wake(undefined, true);
  };
  /** Opens a connection for the watch of `first`. */
  const connect = (first: string) => {
    const made: Promise<Subscriber> = open(
      (channel) => waiting.wake(channel),
      () => lost(made),
    ).then((s) => {
      // A connection opened after a loss listens for the watches the lost one served.
      for (const channel of waiting.keys()) if (channel !== first) s.subscribe(channel).catch(ignore);
      return s;
    });
    made.catch(() => drop(made));
    return made;
  };
  /** The last watch of `channel` ended: unsubscribed, and the connection closed with the last of all. */
  const left = (channel: string) => {
    conn?.then((s) => s.unsubscribe(channel)).catch(ignore);
    if (waiting.size === 0) drop(conn);
  };

  return async (channel, wake, signal) => {
    signal.throwIfAborted();
    const leave = waiting.add(channel, wake, signal, left);
    conn ??= connect(channel);
    const made = conn;
    try {
      await (await made).subscribe(channel);
    } catch (reason) {
      leave();
      throw error(reason);
    }
    signal.throwIfAborted();
  };
}
