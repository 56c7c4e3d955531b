/**
 * Process-tree helpers for tests that start long-running programs (dev server, CLI under a pty):
 * they let a test prove that stopping the top process left nothing behind. Linux /proc only.
 */
import fs from "node:fs";
import type { ChildProcess } from "node:child_process";

export interface ProcInfo {
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
    const timer = setTimeout(
      () => reject(new Error(`process ${child.pid} did not exit within ${ms} ms`)),
      ms,
    );
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

function environOf(pid: number): string[] {
  try {
    return fs.readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
  } catch {
    return [];
  }
}

/** The command line of a process, for messages. */
export function commandOf(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim();
  } catch {
    return "?";
  }
}

/** This process and every process above it, with their process groups: what a reaper must never signal. */
function ownLine(): { pids: Set<number>; groups: Set<number> } {
  const pids = new Set<number>();
  const groups = new Set<number>();
  for (let info = readStat(process.pid); info && !pids.has(info.pid); info = readStat(info.ppid)) {
    pids.add(info.pid);
    groups.add(info.pgid);
  }
  return { pids, groups };
}

/**
 * What a test scope left running: every live process whose starting environment holds `marker`
 * (NAME=value, inherited by whatever a test spawns with this process's environment), the descendants of
 * `below` (children started with a trimmed environment, like the MCP server's), the processes `also`
 * names, every other member of those processes' process groups (an orphan whose parent was killed keeps
 * its group) and all their descendants. Never this process, its ancestors or their groups.
 */
export function strays(marker: string, opts: { below?: number; also?: number[] } = {}): ProcInfo[] {
  const own = ownLine();
  const all = allProcesses();
  const also = new Set(opts.also ?? []);
  const found = new Map<number, ProcInfo>();
  for (const p of all) if (also.has(p.pid) || environOf(p.pid).includes(marker)) found.set(p.pid, p);
  if (opts.below !== undefined) for (const p of descendants(opts.below)) found.set(p.pid, p);
  const groups = new Set([...found.values()].map((p) => p.pgid).filter((g) => !own.groups.has(g)));
  for (const p of all) if (groups.has(p.pgid)) found.set(p.pid, p);
  let grew = true;
  while (grew) {
    grew = false;
    for (const p of all) {
      if (!found.has(p.pid) && found.has(p.ppid)) {
        found.set(p.pid, p);
        grew = true;
      }
    }
  }
  return [...found.values()].filter((p) => !own.pids.has(p.pid));
}

/** SIGKILLs the given processes (strays()); returns one line per process that was still alive. */
export function reap(list: ProcInfo[]): string[] {
  const lines = list.map((p) => `pid ${p.pid} (group ${p.pgid}): ${commandOf(p.pid)}`);
  for (const p of list) {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      // gone meanwhile
    }
  }
  return lines;
}
