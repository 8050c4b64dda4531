// A fetch double for what dynalite cannot do: it ignores ReturnValuesOnConditionCheckFailure, so
// this adds the old item to a failed condition's answer the way AWS documents it (the
// ConditionalCheckFailedException's "Item"), read with the AWS SDK right after the failure.
import type { FetchLike } from "../../../src/backend.ts";

/** The global fetch, each operation recorded in `ops`, a failed condition answered with the old item `read(pk)`. */
export function withOldItem(read: (pk: string) => Promise<unknown>, ops: string[]): FetchLike {
  return async (url, init) => {
    ops.push(init.headers["x-amz-target"]?.replace("DynamoDB_20120810.", "") ?? "?");
    const res = await fetch(url, init);
    const text = await res.text();
    if (!text.includes("ConditionalCheckFailedException")) {
      return new Response(text, { status: res.status, headers: res.headers });
    }
    const request = JSON.parse(init.body ?? "{}") as { Key: { pk: { S: string } } };
    const old = await read(request.Key.pk.S);
    return new Response(JSON.stringify({ ...JSON.parse(text), Item: old }), { status: res.status });
  };
}
