/**
 * The emulator for benchmarks runs in its own process (`npm run cli -- emulator`), so its request
 * handling does not share the event loop being measured. The seed adds copies of task 4 so that every
 * action touches a task nobody else changed: the pre-read compares each task to its own baseline.
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { defaultSeed, EmulatorControl, type EmulatorSeed } from "../../src/offline-demo/emulator/index.js";
import { ROOT, TSX } from "./common.js";

export const FIRST_BENCH_TASK = 1001;

export interface BenchPortal {
  webhookUrl: string;
  baseUrl: string;
  control: EmulatorControl;
  pid: number;
  /** How the emulator was started, for the record. */
  command: string;
  close(): Promise<void>;
}

/** The default seed plus `count` editable copies of task 4 with ids 1001, 1002, ... */
export function benchSeed(count: number): EmulatorSeed {
  const seed = defaultSeed();
  const model = seed.tasks!.find((t) => t.id === 4)!;
  for (let i = 0; i < count; i++) {
    const id = FIRST_BENCH_TASK + i;
    seed.tasks!.push({ ...model, id, title: `BENCH-${id} - BOUND ACTION TEST` });
  }
  return seed;
}

export async function startBenchPortal(opts: {
  dir: string;
  tasks: number;
  rate: number;
  burst?: number;
}): Promise<BenchPortal> {
  const seedPath = path.join(opts.dir, "bench-seed.json");
  fs.writeFileSync(seedPath, JSON.stringify(benchSeed(opts.tasks)));
  const args = [
    "src/cli/main.ts",
    "emulator",
    "--port",
    "0",
    "--rate",
    String(opts.rate),
    "--burst",
    String(opts.burst ?? 50),
    "--seed",
    seedPath,
  ];
  const child = spawn(TSX, args, {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
    env: { ...process.env, NO_COLOR: "1" },
  });
  const webhookUrl = await new Promise<string>((resolve, reject) => {
    let out = "";
    let err = "";
    const timer = setTimeout(
      () => reject(new Error(`emulator did not start within 60 s; stderr: ${err}`)),
      60_000,
    );
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /webhook: (\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`emulator exited with ${code} before it was ready; stderr: ${err}`));
    });
  });
  const baseUrl = new URL(webhookUrl).origin;
  return {
    webhookUrl,
    baseUrl,
    control: new EmulatorControl(baseUrl),
    pid: child.pid!,
    command: `tsx ${args.join(" ").replace(seedPath, "<bench-seed.json>")}`,
    close: () => stopGroup(child),
  };
}

/** Stops a process group this benchmark started (the tsx wrapper and its node child). */
export async function stopGroup(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  try {
    process.kill(-child.pid!, "SIGTERM");
  } catch {
    return;
  }
  const timeout = new Promise<"timeout">((r) => setTimeout(() => r("timeout"), 5000).unref());
  if ((await Promise.race([exited, timeout])) === "timeout") {
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {
      // already gone
    }
  }
}
