/**
 * A process appending to a write anchor as the executor does (record before each send), to show that
 * processes sharing an anchor lose no line and never miss their own: after each record it checks that
 * the anchor names the envelope (a miss would be a false ROLLBACK_DETECTED). Waits for `go` to exist,
 * so two writers start at the same moment.
 * Usage: tsx test/support/anchor-writer.ts <anchor file> <go file> <writer id> <count>
 * Prints "ready", then one JSON line: {recorded, missedOwn, sawOther, startedAt, endedAt} (ms).
 */
import fs from "node:fs";
import { WriteAnchor } from "../../src/store/write-anchor.js";

const [file, go, id, count] = process.argv.slice(2) as [string, string, string, string];
const hashOf = (writer: string, n: number) =>
  `sha256:${writer.padStart(4, "0")}${n.toString(16).padStart(60, "0")}`;

process.stdout.write("ready\n");
const deadline = Date.now() + 30_000;
while (!fs.existsSync(go)) {
  if (Date.now() > deadline) throw new Error(`${go} never appeared`);
}
const startedAt = Date.now();
const anchor = new WriteAnchor(file);
let missedOwn = 0;
for (let n = 0; n < Number(count); n++) {
  const h = hashOf(id, n);
  await anchor.record(h, new Date().toISOString());
  if (!anchor.has(h)) missedOwn++;
}
const endedAt = Date.now();
const other = id === "1" ? "2" : "1";
let sawOther = 0;
for (let n = 0; n < Number(count); n++) if (anchor.has(hashOf(other, n))) sawOther++;
process.stdout.write(
  `${JSON.stringify({ recorded: Number(count), missedOwn, sawOther, startedAt, endedAt })}\n`,
);
