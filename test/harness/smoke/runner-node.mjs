// What the Node runners share: run the suite with the environment's coordinates, print one
// `SMOKE_REPORT {json}` line, and exit non-zero on failure. On success the process is left to
// exit by itself: a lease timer or socket that kept it alive would make the test time out.

/** Whether this runtime parses `await using` itself. */
export function nativeAwaitUsing() {
  try {
    new Function("return async () => { await using x = null; };");
    return true;
  } catch {
    return false;
  }
}

export async function report(suite, lib, extra) {
  try {
    const result = await suite.smoke(
      lib,
      suite.smokeEnv((name) => process.env[name]),
    );
    console.log(`SMOKE_REPORT ${JSON.stringify({ ...result, ...extra })}`);
  } catch (error) {
    console.error(error);
    process.exit(1);
  }
}
