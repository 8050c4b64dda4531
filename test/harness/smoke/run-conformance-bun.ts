// Bun: the conformance suite through the Durable Object's route, with the built package
// (leasehold/testing, leasehold/cloudflare from dist/), as a Bun user gets it.
import { durableObject } from "leasehold/cloudflare";
import { conformanceChecks } from "leasehold/testing";
import { conformance } from "./conformance.ts";

try {
  const result = await conformance({ conformanceChecks, durableObject }, (n) => process.env[n]);
  console.log(`CONFORMANCE_REPORT ${JSON.stringify(result)}`);
} catch (error) {
  console.error(error);
  process.exit(1);
}
