// Runs workerd with the LeaseholdLock worker (test/harness/servers/workerd-locks.ts) in its own
// process for the bench: Miniflare loaded into the bench's parent process broke the Azure round
// trips through the counting proxy (undici: "invalid content-length header"). Prints one JSON line
// { url, token, origin } when ready; stops workerd when stdin closes.
import { startLockWorker } from "../../test/harness/servers/workerd-locks.ts";

const worker = await startLockWorker();
process.stdout.write(`${JSON.stringify({ url: worker.url, token: worker.token, origin: worker.origin })}\n`);
process.stdin.resume();
process.stdin.on("close", () => {
  worker.stop().finally(() => process.exit(0));
});
