// Option checks every HTTP backend shares (src/backends/shared/options.ts).
import { describe, expect, it } from "vitest";
import { upstash } from "../../../src/backends/upstash/index.ts";
import { createMutex } from "../../../src/index.ts";

describe("the URL option", () => {
  // fetch refuses a URL with user info with a message quoting it, password included, which became
  // the BackendError's message and cause (CHANGELOG.md, Fixed: "A password in a URL leaked into
  // errors").
  it("a URL with a password is refused at creation and never echoed", async () => {
    const password = "PasteD-Passw0rd-4242";
    const make = () => upstash({ url: `https://default:${password}@x.upstash.io`, token: "tok-0123456789" });
    let backend: ReturnType<typeof upstash>;
    try {
      backend = make();
    } catch (error) {
      expect(error).toBeInstanceOf(TypeError);
      expect(String(error)).not.toContain(password);
      return;
    }
    const error = await createMutex(backend, { name: "p", ttl: 500 })
      .tryAcquire()
      .catch((e: Error) => e);
    expect(`${String(error)} ${String((error as Error).cause)}`).not.toContain(password);
  });
});
