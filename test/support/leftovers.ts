/**
 * `.ci/run`'s check that a test pass left nothing behind (run with tsx).
 *   tsx test/support/leftovers.ts snapshot <file>                 before a pass
 *   tsx test/support/leftovers.ts check <pass> <marker> <file>    after it; exits 1 if anything was left
 * Left behind: a process carrying the pass's marker (NAME=value in its starting environment, see
 * test/support/run-scope.ts) or its group, a process naming this checkout in its command line or
 * working directory that was not running before the pass, an `ae-*` entry of the system temporary
 * folder that was not there before. Each is printed; processes are killed. Temporary entries are left
 * in place: on a shared machine another program's may be among them, and only a person can tell.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { commandOf, reap, strays } from "./processes.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

interface Snapshot {
  temp: string[];
  pids: number[];
}

const tempEntries = () => fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith("ae-"));

/** Processes whose command line or working directory is inside this checkout (the MCP server's child has no marker). */
function checkoutProcesses(): number[] {
  return fs
    .readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((pid) => {
      let cwd = "";
      try {
        cwd = fs.readlinkSync(`/proc/${pid}/cwd`);
      } catch {
        // gone, or not ours to read
      }
      return cwd === ROOT || cwd.startsWith(`${ROOT}/`) || commandOf(pid).includes(`${ROOT}/`);
    });
}

const [command, ...args] = process.argv.slice(2);
if (command === "snapshot") {
  const snap: Snapshot = { temp: tempEntries(), pids: checkoutProcesses() };
  fs.writeFileSync(args[0]!, JSON.stringify(snap));
} else if (command === "check") {
  const [pass, marker, file] = args as [string, string, string];
  const before = JSON.parse(fs.readFileSync(file, "utf8")) as Snapshot;
  const known = new Set(before.pids);
  const processes = reap(strays(marker, { also: checkoutProcesses().filter((pid) => !known.has(pid)) }));
  const knownTemp = new Set(before.temp);
  const files = tempEntries().filter((n) => !knownTemp.has(n));
  if (processes.length > 0)
    console.log(
      `${pass} pass left ${processes.length} process(es) running (killed now):\n  ${processes.join("\n  ")}`,
    );
  if (files.length > 0)
    console.log(
      `${pass} pass left ${files.length} entr${files.length === 1 ? "y" : "ies"} in ${os.tmpdir()} (not removed):\n  ${files.slice(0, 50).join("\n  ")}${files.length > 50 ? "\n  …" : ""}`,
    );
  process.exitCode = processes.length + files.length > 0 ? 1 : 0;
} else {
  console.error("usage: leftovers.ts snapshot <file> | check <pass> <marker> <file>");
  process.exitCode = 2;
}
