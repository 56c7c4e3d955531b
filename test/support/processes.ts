/**
 * Process-tree helpers for tests that start long-running programs (dev server, CLI under a pty):
 * they let a test prove that stopping the top process left nothing behind. Linux /proc only.
 */
import fs from "node:fs";
import type { ChildProcess } from "node:child_process";

interface ProcInfo {
  pid: number;
  ppid: number;
  pgid: number;
}

function readStat(pid: number): ProcInfo | undefined {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name is in parentheses and may contain spaces; the fields after it are fixed.
    const rest = text.slice(text.lastIndexOf(")") + 2).split(" ");
    if (rest[0] === "Z") return undefined;
    return { pid, ppid: Number(rest[1]), pgid: Number(rest[2]) };
  } catch {
    return undefined;
  }
}

function allProcesses(): ProcInfo[] {
  return fs
    .readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .map((d) => readStat(Number(d)))
    .filter((p): p is ProcInfo => p !== undefined);
}

/** Every live process below `pid` (not including it). */
export function descendants(pid: number): ProcInfo[] {
  const all = allProcesses();
  const out: ProcInfo[] = [];
  const frontier = [pid];
  while (frontier.length > 0) {
    const parent = frontier.pop()!;
    for (const p of all) {
      if (p.ppid === parent) {
        out.push(p);
        frontier.push(p.pid);
      }
    }
  }
  return out;
}

/** Live (non-zombie) processes among the given ids, or in the given process groups. */
export function stillAlive(pids: number[], groups: number[] = []): ProcInfo[] {
  const wanted = new Set(pids);
  const wantedGroups = new Set(groups);
  return allProcesses().filter((p) => wanted.has(p.pid) || wantedGroups.has(p.pgid));
}

/** Resolves with the exit code (or 128+signal) once the child has exited, or rejects after `ms`. */
export function waitForExit(child: ChildProcess, ms: number): Promise<number> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`process ${child.pid} did not exit within ${ms} ms`)), ms);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      resolve(code ?? (signal ? 128 + (signal === "SIGINT" ? 2 : signal === "SIGTERM" ? 15 : 9) : 1));
    });
  });
}

/** Last resort for an afterAll: kill what a failed test left running. */
export function killAll(pids: number[], groups: number[] = []): void {
  for (const p of stillAlive(pids, groups)) {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      // gone meanwhile
    }
  }
}
