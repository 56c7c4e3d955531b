/**
 * Envelope core benchmark: builds, hashes, compares and verifies 10,000 envelopes, and renders their
 * cards. Prints a table and writes bench/results/envelope-core.json with the machine, the Node version,
 * the command and every raw sample. Numbers are for the record, never asserted.
 *
 *   npx tsx bench/envelope-core.ts [--count 10000] [--samples 5]
 *   npm run bench -- envelope-core [--count 10000] [--samples 5]
 */
import { execSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { performance } from "node:perf_hooks";
import {
  compareBaseline,
  createEnvelope,
  defaultPolicy,
  hashEnvelope,
  renderCard,
  verifyOutcome,
  type Envelope,
  type ReadResult,
} from "../src/envelope/index.js";
import { exampleTask, taskBody } from "../test/support/examples.js";
import { codeState, machine, versions } from "./support/common.js";

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isSafeInteger(v) || v <= 0)
    throw new Error(`--${name} expects a positive integer, got ${process.argv[i + 1]}`);
  return v;
}

const COUNT = arg("count", 10_000);
const SAMPLES = arg("samples", 5);
const policy = defaultPolicy();
const now = new Date("2026-11-30T10:00:00Z");

/** A spread of realistic proposals: short titles, a long description, dates, ids, id lists. */
function paramsFor(i: number): Record<string, unknown> {
  switch (i % 5) {
    case 0:
      return { TITLE: `LAB-AGENT-EXEC-${i} - renamed` };
    case 1:
      return { DESCRIPTION: `Step ${i}\n` + "Detailed description line. ".repeat(40), PRIORITY: "2" };
    case 2:
      return { DEADLINE: "2026-12-20T18:00:00+03:00", STATUS: "3" };
    case 3:
      return { RESPONSIBLE_ID: 3 + (i % 3) };
    default:
      return { AUDITORS: ["2", "6", String(10 + (i % 7))], ACCOMPLICES: [3] };
  }
}

const task = exampleTask();
const preBody: ReadResult = { status: "ok", body: taskBody(task) };

interface Phase {
  name: string;
  run: (envelopes: Envelope[]) => unknown;
}

function afterBody(e: Envelope): ReadResult {
  const over: Record<string, unknown> = {
    changedDate: "2026-11-30T13:00:01+03:00",
    activityDate: "2026-11-30T13:00:01+03:00",
  };
  for (const [f, v] of Object.entries(e.params)) {
    const key = f.toLowerCase().replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
    over[key] = Array.isArray(v) ? v.map(String) : typeof v === "number" ? String(v) : v;
  }
  return { status: "ok", body: taskBody(exampleTask(over)) };
}

function main(): void {
  const build = (): Envelope[] =>
    Array.from({ length: COUNT }, (_, i) =>
      createEnvelope({
        portal: "b24.example.test",
        taskId: 4,
        params: paramsFor(i),
        task,
        requestedBy: "demo-user",
        runContext: { threadId: `t-${i}` },
        policy,
        now,
      }),
    );
  let envelopes = build();
  const afterReads = envelopes.map(afterBody);
  const phases: Phase[] = [
    { name: "createEnvelope", run: () => (envelopes = build()) },
    { name: "hashEnvelope", run: (es) => es.map(hashEnvelope) },
    {
      name: "compareBaseline",
      run: (es) =>
        es.map((e) => {
          const r = compareBaseline(e, preBody);
          if (r.verdict !== "MATCH") throw new Error(r.reason);
          return r;
        }),
    },
    {
      name: "verifyOutcome",
      run: (es) =>
        es.map((e, i) => {
          const r = verifyOutcome(e, { status: "OK", body: null }, afterReads[i]!);
          if (r.verdict !== "VERIFIED") throw new Error(r.reason);
          return r;
        }),
    },
    { name: "renderCard(text)", run: (es) => es.map((e) => renderCard(e, hashEnvelope(e), "text")) },
  ];

  // One warm-up pass so the JIT has seen every path before timing.
  for (const p of phases) p.run(envelopes);
  const samples: Record<string, number[]> = Object.fromEntries(phases.map((p) => [p.name, []]));
  for (let s = 0; s < SAMPLES; s++) {
    for (const p of phases) {
      const t0 = performance.now();
      p.run(envelopes);
      samples[p.name]!.push(performance.now() - t0);
    }
  }

  const median = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    const m = Math.floor(s.length / 2);
    return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
  };
  const rows = phases.map((p) => {
    const xs = samples[p.name]!;
    const med = median(xs);
    return {
      phase: p.name,
      n: COUNT,
      medianMs: round(med),
      minMs: round(Math.min(...xs)),
      maxMs: round(Math.max(...xs)),
      usPerOp: round((med * 1000) / COUNT),
      opsPerSec: Math.round(COUNT / (med / 1000)),
    };
  });
  const bytes = envelopes.map((e) => JSON.stringify(e).length);
  console.log(
    `envelope core, ${COUNT} envelopes, ${SAMPLES} samples after 1 warm-up (median envelope ${median(bytes)} bytes of JSON)`,
  );
  console.table(rows);

  const here = path.dirname(fileURLToPath(import.meta.url));
  const out = path.join(here, "results", "envelope-core.json");
  mkdirSync(path.dirname(out), { recursive: true });
  let commit: string | null = null;
  try {
    commit = execSync("git rev-parse HEAD", { cwd: here, stdio: ["ignore", "pipe", "ignore"] })
      .toString()
      .trim();
  } catch {
    commit = null;
  }
  const cpus = os.cpus();
  writeFileSync(
    out,
    JSON.stringify(
      {
        benchmark: "envelope-core",
        date: new Date().toISOString(),
        command: `npx tsx bench/envelope-core.ts${process.argv.slice(2).length ? " " + process.argv.slice(2).join(" ") : ""}`,
        invokedAs: process.env.BENCH_INVOKED_AS ?? null,
        commit,
        dirty: codeState().dirty,
        versions: versions(),
        node: process.version,
        v8: process.versions.v8,
        machine: {
          platform: os.platform(),
          release: os.release(),
          arch: os.arch(),
          cpuModel: cpus[0]?.model ?? "unknown",
          cpuCount: cpus.length,
          totalMemBytes: os.totalmem(),
          loadAverageAtStart: machine().loadAverageAtStart,
          loadAverageAtEnd: machine().loadAverageAtEnd,
        },
        count: COUNT,
        samples: SAMPLES,
        envelopeJsonBytes: { median: median(bytes), min: Math.min(...bytes), max: Math.max(...bytes) },
        results: rows,
        rawSamplesMs: samples,
      },
      null,
      2,
    ) + "\n",
  );
  console.log(`written ${path.relative(process.cwd(), out)}`);
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}

main();
