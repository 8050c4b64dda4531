// A server of the global setup in a process of its own: the run's busiest servers written in
// Node (the shared Upstash bridge, dynalite) then have an event loop to themselves, not vitest's
// main process's, which also relays every worker's output and results.
//
// As a script, `node --import tsx own-process.ts <kind> [arg]` starts the server of that kind,
// prints one JSON line with its addresses once it listens, and stops on SIGTERM or when its
// stdin closes (the process that started it ended). `inOwnProcess(kind, arg)` runs it.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

/** Each kind: starts its server and answers what to print and how to stop it. */
const KINDS = {
  async bridge(socket: string) {
    const { startBridge } = await import("./upstash-bridge.ts");
    const b = await startBridge({ redis: socket });
    return { info: { url: b.url, token: b.token, readOnlyToken: b.readOnlyToken }, stop: b.stop };
  },
  async dynalite() {
    const { startDynalite } = await import("./dynalite.ts");
    const d = await startDynalite();
    return { info: { endpoint: d.endpoint }, stop: d.stop };
  },
};
type Kind = keyof typeof KINDS;
type Info<K extends Kind> = Awaited<ReturnType<(typeof KINDS)[K]>>["info"];

const script = fileURLToPath(import.meta.url);

if (process.argv[1] === script) {
  const server = await KINDS[process.argv[2] as Kind](process.argv[3]!);
  process.stdout.write(`${JSON.stringify(server.info)}\n`);
  const stop = () => void server.stop().finally(() => process.exit(0));
  process.once("SIGTERM", stop);
  process.stdin.once("end", stop).resume();
}

/**
 * Starts the server `kind` (with `arg`) in a child process: its addresses, and `stop()` (SIGTERM,
 * SIGKILL after 5 s). Rejects, with its stderr, when it does not print them within 30 s.
 */
export async function inOwnProcess<K extends Kind>(
  kind: K,
  arg = "",
): Promise<Info<K> & { stop(): Promise<void> }> {
  const child = spawn(process.execPath, ["--import", "tsx", script, kind, arg], {
    stdio: ["pipe", "pipe", "pipe"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    const killer = setTimeout(() => child.kill("SIGKILL"), 5_000);
    await exited;
    clearTimeout(killer);
  };
  // Kept until it prints its addresses (for the error when it does not), then dropped.
  let stderr = "";
  const keep = (c: string) => (stderr += c);
  child.stderr!.setEncoding("utf8").on("data", keep);
  try {
    const line = await new Promise<string>((resolve, reject) => {
      let out = "";
      const timeout = setTimeout(() => reject(new Error("no address within 30 s")), 30_000);
      const onData = (c: string) => {
        out += c;
        if (!out.includes("\n")) return;
        clearTimeout(timeout);
        child.stdout!.off("data", onData).resume();
        resolve(out.slice(0, out.indexOf("\n")));
      };
      child.stdout!.setEncoding("utf8").on("data", onData);
      child.once("error", (error) => {
        clearTimeout(timeout);
        reject(error);
      });
      // "close", not "exit": its stderr has been read to the end by then.
      child.once("close", (code, signal) => {
        clearTimeout(timeout);
        reject(new Error(`it exited with ${signal ?? code}`));
      });
    });
    child.stderr!.off("data", keep).resume();
    stderr = "";
    return { ...(JSON.parse(line) as Info<K>), stop };
  } catch (error) {
    await stop();
    throw new Error(
      `${kind} did not start in its own process: ${(error as Error).message}; stderr: ${stderr.slice(-2_000)}`,
    );
  }
}
