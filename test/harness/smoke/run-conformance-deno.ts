// Deno: the conformance suite through the Durable Object's route, with the sources through the
// jsr:@leasehold/leasehold specifiers (deno.json maps them), type-checked.
import { durableObject } from "jsr:@leasehold/leasehold/cloudflare";
import { conformanceChecks } from "jsr:@leasehold/leasehold/testing";
import { conformance } from "./conformance.ts";

try {
  const result = await conformance({ conformanceChecks, durableObject }, (n) => Deno.env.get(n));
  console.log(`CONFORMANCE_REPORT ${JSON.stringify(result)}`);
} catch (error) {
  console.error(error);
  Deno.exit(1);
}
