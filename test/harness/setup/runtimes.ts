// Global setup: the test-only runtimes (Node 24) are installed before any test runs.
import { ensureRuntimes } from "../servers/runtimes.ts";

export default function setup(): Promise<void> {
  return ensureRuntimes();
}
