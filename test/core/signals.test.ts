// src/signals.ts helpers, where a test of the faces above them would not pin them down.
import { expect, it } from "vitest";
import { abortable } from "../../src/signals.ts";

it("abortable on a signal already aborted: rejects with its reason, and the promise's later rejection is handled", async () => {
  // A backend's watch (docs/DESIGN.md §19) started as the wait's signal aborts rejects later: it
  // must not surface as an unhandled rejection, which ends a Node or Bun process.
  const unhandled: unknown[] = [];
  const record = (reason: unknown) => unhandled.push(reason);
  process.on("unhandledRejection", record);
  try {
    let fail!: (error: Error) => void;
    const later = new Promise<never>((_, reject) => {
      fail = reject;
    });
    await expect(abortable(later, AbortSignal.abort(new Error("stop")))).rejects.toThrow("stop");
    fail(new Error("late"));
    await new Promise((r) => setTimeout(r, 20));
    expect(unhandled).toEqual([]);
  } finally {
    process.off("unhandledRejection", record);
  }
});
