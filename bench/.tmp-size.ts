import { runSize } from "./size.ts";
const r = await runSize();
for (const row of r.rows) console.log(row.id.padEnd(24), row.minified, row.gzip);
