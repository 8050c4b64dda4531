// vitest's one global setup: every file in test/harness/setup/ starts its server (and `provide`s
// its connection) at once, not one after another (about 11 s one after another here: Azurite 3.7,
// the Redis Cluster 3.0, workerd 1.7, …; on a fresh clone Node 24's install 6 s more). When one
// fails, those that started are stopped and the run fails with every failure named.
import { readdirSync } from "node:fs";
import type { TestProject } from "vitest/node";

type Teardown = () => unknown;
type Setup = { default: (project: TestProject) => Promise<Teardown | undefined> | Teardown | undefined };

const dir = new URL("./setup/", import.meta.url);

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const files = readdirSync(dir).filter((f) => f.endsWith(".ts"));
  const started = await Promise.allSettled(
    files.map(async (f) => ((await import(new URL(f, dir).href)) as Setup).default(project)),
  );
  const teardown = async () => {
    await Promise.all(started.map(async (r) => (r.status === "fulfilled" ? r.value?.() : undefined)));
  };
  const failed = started.flatMap((r, i) =>
    r.status === "rejected" ? [`${files[i]}: ${String(r.reason)}`] : [],
  );
  if (failed.length) {
    await teardown();
    throw new Error(`global setup failed:\n${failed.join("\n")}`, {
      cause: started.find((r) => r.status === "rejected")?.reason,
    });
  }
  return teardown;
}
