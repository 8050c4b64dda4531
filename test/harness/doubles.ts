// Doubles for unit tests, for the faults the real servers cannot make on demand: memory() with
// single methods replaced, requests that never answer, canned HTTP replies, and the fake clock
// the core's timing tests run on. Each test says which fault it needs; nothing else is mocked.
import { afterEach, beforeEach, vi } from "vitest";
import type { Backend, FetchLike } from "../../src/backend.ts";
import { memory } from "../../src/backends/memory/index.ts";
import { BackendError } from "../../src/index.ts";

/** Fakes every timer and both clocks (monotonic and wall), as the core's timing tests need. */
export function useFakeClock(): void {
  vi.useFakeTimers({
    toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "performance", "Date"],
  });
}

/** A promise that never settles, except by rejecting with `signal`'s reason when it aborts. */
export const never = <T>(signal?: AbortSignal, onAbort?: () => void): Promise<T> =>
  new Promise((_, reject) =>
    signal?.addEventListener("abort", () => {
      onAbort?.();
      reject(signal.reason);
    }),
  );

/** A retryable backend failure. */
export const transient = (): BackendError => new BackendError("boom", { backend: "test", retryable: true });

/** memory() with some methods replaced. */
export function backendWith(overrides: Partial<Backend> = {}): Backend {
  return { ...memory(), ...overrides };
}

/** A fetch that never answers (like a black-holed request) but honours its signal, as fetch does. */
export const hanging: FetchLike = (_url, init) =>
  new Promise((_, reject) => {
    const keepAlive = setInterval(() => {}, 1_000); // a real socket would keep the process alive
    init.signal?.addEventListener("abort", () => {
      clearInterval(keepAlive);
      reject(init.signal?.reason);
    });
  });

/** An empty HTTP reply with `status` and `headers`. */
export const reply = (status: number, headers: Record<string, string> = {}): ReturnType<FetchLike> =>
  Promise.resolve({ status, headers: new Headers(headers), text: async () => "" });

/**
 * An azure-blob fetch double: `answer` gets what the request does (`lease:<action>` for a lease
 * request, else the `comp` parameter or the method) and answers.
 */
export function azureFetch(
  answer: (what: string, init: Parameters<FetchLike>[1]) => ReturnType<FetchLike>,
): FetchLike {
  return (url, init) => {
    const comp = new URL(url).searchParams.get("comp") ?? init.method;
    return answer(comp === "lease" ? `lease:${init.headers["x-ms-lease-action"]}` : comp, init);
  };
}

/** What `make` throws, or undefined when it returns. */
export function thrown(make: () => unknown): unknown {
  try {
    make();
  } catch (error) {
    return error;
  }
  return undefined;
}

/** Fakes the clock (useFakeClock) before each test of the file, and restores timers and mocks after. */
export function fakeClockInEachTest(): void {
  beforeEach(useFakeClock);
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });
}
