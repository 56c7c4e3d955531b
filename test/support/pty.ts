/**
 * Runs a shell command on a pseudo-terminal with util-linux `script`, so programs see a real TTY
 * (and @inquirer/prompts draws its real prompts), without native addons. Keystrokes are sent as
 * the prompts they answer appear, never on a timer.
 */
import { spawn, execFileSync } from "node:child_process";
import { stripVTControlCharacters } from "node:util";

export interface PtyStep {
  /** Sent once, as soon as the (ANSI-stripped) output after the previous step matches. */
  when: RegExp;
  keys: string;
}

export interface PtyResult {
  code: number | null;
  /** Everything the terminal showed, escape sequences removed. */
  text: string;
  raw: string;
  stepsSent: number;
}

export const KEY = { enter: "\r", down: "\u001b[B", up: "\u001b[A" } as const;

export function hasScript(): boolean {
  try {
    execFileSync("script", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

export function runInPty(
  command: string,
  opts: { cwd: string; env: NodeJS.ProcessEnv; steps?: PtyStep[]; timeoutMs?: number },
): Promise<PtyResult> {
  return new Promise((resolve, reject) => {
    // -q quiet, -f flush every write, -e return the command's exit code, -c the command; log to /dev/null.
    // Without a terminal of its own, `script` leaves the pty at 0x0; give it a usual size first.
    const child = spawn("script", ["-qfec", `stty cols 160 rows 50 2>/dev/null; ${command}`, "/dev/null"], {
      cwd: opts.cwd,
      env: { TERM: "xterm-256color", ...opts.env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    const steps = opts.steps ?? [];
    let raw = "";
    let sent = 0;
    let from = 0;
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(
        new Error(
          `pty command did not finish in ${opts.timeoutMs ?? 90_000} ms; steps sent ${sent}/${steps.length}; output:\n${stripVTControlCharacters(raw)}`,
        ),
      );
    }, opts.timeoutMs ?? 90_000);
    const onData = (d: Buffer) => {
      raw += d.toString("utf8");
      const step = steps[sent];
      if (!step) return;
      const text = stripVTControlCharacters(raw);
      if (step.when.test(text.slice(from))) {
        sent += 1;
        from = text.length;
        child.stdin.write(step.keys);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      child.stdin.destroy();
      resolve({ code, text: stripVTControlCharacters(raw).replace(/\r\n/g, "\n"), raw, stepsSent: sent });
    });
  });
}
