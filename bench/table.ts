/**
 * Prints bench/README.md's current table (issue 25's figures) from the committed results of
 * control-overhead and post-approval-latency, with the command, date and machine of the run that
 * produced each row. Paste its output over the table in bench/README.md after a run.
 *
 *   npx tsx bench/table.ts            from bench/results/control-overhead.json, post-approval-latency.json
 *   npx tsx bench/table.ts --quick    from the *.quick.json files
 */
import fs from "node:fs";
import path from "node:path";
import { RESULTS_DIR, flag } from "./support/common.js";

interface Figure {
  figure: string;
  ours: number | string;
  bare: number | string;
  ratio: number | null;
  target: string;
  met: boolean | null;
}

interface Result {
  date: string;
  command: string;
  code: { commit: string | null; dirty: string[] };
  machine: { cpuModel: string; cores: number; loadAverageAtStart: number[]; loadAverageAtEnd: number[] };
  results: { figures: Figure[] };
}

const suffix = flag("quick") ? ".quick" : "";
const rows: string[] = [
  "| figure | ours | bare | ratio | target (issue 25) | met | command | date (UTC) | machine, load at start → end | commit |",
  "|---|---|---|---|---|---|---|---|---|---|",
];
for (const name of ["control-overhead", "post-approval-latency"]) {
  const file = path.join(RESULTS_DIR, `${name}${suffix}.json`);
  if (!fs.existsSync(file)) {
    console.error(
      `no ${path.relative(process.cwd(), file)}: run \`npm run bench -- ${name}${suffix ? " --quick" : ""}\` first`,
    );
    process.exitCode = 1;
    continue;
  }
  const r = JSON.parse(fs.readFileSync(file, "utf8")) as Result;
  const when = r.date.slice(0, 16).replace("T", " ");
  const machine = `${r.machine.cores} cores (${r.machine.cpuModel}), ${r.machine.loadAverageAtStart[0]} → ${r.machine.loadAverageAtEnd[0]}`;
  const commit = `${r.code.commit?.slice(0, 7) ?? "?"}${r.code.dirty.length ? ` + ${r.code.dirty.length} changed files` : ""}`;
  for (const f of r.results.figures) {
    const met = f.met === null ? "" : f.met ? "yes" : "**no**";
    const ratio = f.ratio === null ? "" : `${f.ratio}×`;
    rows.push(
      `| ${f.figure} | ${f.ours} | ${f.bare} | ${ratio} | ${f.target} | ${met} | \`${r.command}\` | ${when} | ${machine} | ${commit} |`,
    );
  }
}
console.log(rows.join("\n"));
