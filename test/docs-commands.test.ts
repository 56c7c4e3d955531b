/**
 * Every shell command shown in README.md and docs/*.md runs here, as a reader would type it, on a fresh
 * directory with the offline demo (embedded emulator, offline model, SQLite), and reaches what the text
 * says it reaches.
 *
 * The convention the docs follow:
 * - a shell block is a fenced block tagged sh, bash, shell or console, or an untagged one holding a
 *   `$ ` prompt line; each line is a command (`\` continues it), `#` lines are comments;
 * - `# → TEXT` after a command (on its line or the next) is its stated outcome: the command's output
 *   must contain TEXT (whitespace runs compared as one space), and it must exit 0 unless TEXT ends
 *   with `(exit N)`;
 * - `<thread>`, `<hash>` and `<set hash>` stand for the values on the last `approve <thread> --hash <hash>`
 *   line a command of the same document printed;
 * - a block that cannot run here (a server that runs until Ctrl-C, a real portal) has
 *   `<!-- not-run: reason -->` on the line before it.
 *
 * A document's commands run in order in one directory (they form a sequence), through bash, with `npm`
 * and `action-envelope` shimmed to the compiled CLI (dist/, built by the global setup) so that
 * `npm start` and `npm run cli --` behave as in the repository, npm's banner included.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { defaultSeed } from "../src/offline-demo/emulator/seed.js";
import { CLI, ROOT } from "./support/harness.js";

interface DocCommand {
  line: number;
  text: string;
  expect?: string;
  exitCode: number;
}

interface ShellBlock {
  line: number;
  notRun?: string;
  commands: DocCommand[];
}

const SHELL_TAGS = new Set(["sh", "bash", "shell", "console"]);

function shellBlocks(markdown: string): ShellBlock[] {
  const lines = markdown.split("\n");
  const blocks: ShellBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)/.exec(lines[i]!);
    if (!open) continue;
    let end = i + 1;
    while (end < lines.length && !lines[end]!.startsWith("```")) end++;
    const body = lines.slice(i + 1, end);
    const tag = open[1]!;
    const isShell = SHELL_TAGS.has(tag) || (tag === "" && body.some((l) => l.startsWith("$ ")));
    if (isShell) {
      let prev = i - 1;
      while (prev >= 0 && lines[prev]!.trim() === "") prev--;
      const marker = prev >= 0 ? /^<!-- not-run: (.*?) -->$/.exec(lines[prev]!.trim()) : null;
      blocks.push({
        line: i + 1,
        ...(marker ? { notRun: marker[1]!.trim() } : {}),
        commands: commandsOf(body, i + 2),
      });
    }
    i = end;
  }
  return blocks;
}

function commandsOf(body: string[], firstLine: number): DocCommand[] {
  const out: DocCommand[] = [];
  for (let i = 0; i < body.length; i++) {
    let text = body[i]!.replace(/^\$ /, "");
    const line = firstLine + i;
    const own = /^\s*#\s*→\s*(.*)$/.exec(text);
    if (own) {
      const last = out.at(-1);
      if (!last || last.expect !== undefined) throw new Error(`line ${line}: "# →" follows no command`);
      Object.assign(last, parseExpectation(own[1]!));
      continue;
    }
    if (text.trim() === "" || text.trim().startsWith("#")) continue;
    while (text.endsWith("\\") && i + 1 < body.length) text = `${text.slice(0, -1)} ${body[++i]!.trim()}`;
    const trailing = /\s#\s*→\s*(.*)$/.exec(text);
    const command: DocCommand = { line, text: trailing ? text.slice(0, trailing.index) : text, exitCode: 0 };
    if (trailing) Object.assign(command, parseExpectation(trailing[1]!));
    out.push(command);
  }
  return out;
}

function parseExpectation(raw: string): { expect: string; exitCode: number } {
  const exit = /\s*\(exit (\d+)\)\s*$/.exec(raw);
  return { expect: (exit ? raw.slice(0, exit.index) : raw).trim(), exitCode: exit ? Number(exit[1]) : 0 };
}

const DOCS = [
  "README.md",
  ...fs
    .readdirSync(path.join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`),
];

/** GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens. */
function anchorsOf(markdown: string): Set<string> {
  const headings = markdown
    .replace(/```[\s\S]*?```/g, "")
    .split("\n")
    .filter((l) => /^#{1,6} /.test(l));
  return new Set(
    headings.map((h) =>
      h
        .replace(/^#+ /, "")
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\s_-]/gu, "")
        .replace(/\s/g, "-"),
    ),
  );
}

const squash = (s: string) => s.replace(/\s+/g, " ");

const made: string[] = [];
afterAll(() => {
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
});

/** A directory standing in for a fresh clone: an empty working directory, an empty home, shims for npm. */
function freshPlace(): { work: string; env: Record<string, string> } {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "ae-docs-"));
  made.push(root);
  const work = path.join(root, "work");
  const home = path.join(root, "home");
  const bin = path.join(root, "bin");
  for (const d of [work, home, bin]) fs.mkdirSync(d);
  const version = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")).version as string;
  const node = JSON.stringify(process.execPath);
  const cli = JSON.stringify(CLI);
  fs.writeFileSync(
    path.join(bin, "npm"),
    [
      "#!/bin/bash",
      "silent=; args=()",
      '# npm takes -s / --silent anywhere before "--"',
      'while [ $# -gt 0 ]; do case "$1" in -s|--silent) silent=1 ;; --) args+=("$@"); break ;; *) args+=("$1") ;; esac; shift; done',
      'set -- "${args[@]}"',
      'case "$1" in',
      "  start) script=start; shift; pre=(start) ;;",
      '  run) [ "$2" = cli ] || { echo "docs test: npm $* is not available here" >&2; exit 127; }; script=cli; shift 2; pre=() ;;',
      '  *) echo "docs test: npm $* is not available here" >&2; exit 127 ;;',
      "esac",
      '[ "$1" = -- ] && shift',
      `[ -z "$silent" ] && printf '\\n> action-envelope@${version} %s\\n> node scripts/build.mjs --if-stale && node bin/action-envelope.mjs %s\\n\\n' "$script" "\${pre[*]:+\${pre[*]} }$*"`,
      `exec ${node} ${cli} "\${pre[@]}" "$@"`,
      "",
    ].join("\n"),
    { mode: 0o755 },
  );
  fs.writeFileSync(path.join(bin, "action-envelope"), `#!/bin/sh\nexec ${node} ${cli} "$@"\n`, {
    mode: 0o755,
  });
  const env = {
    PATH: `${bin}:${path.dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`,
    HOME: home,
    LANG: "C.UTF-8",
    NO_COLOR: "1",
    TMPDIR: root,
  };
  return { work, env };
}

function runShell(
  command: string,
  cwd: string,
  env: Record<string, string>,
  ms = 60_000,
): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-o", "pipefail", "-c", command], {
      cwd,
      env,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    let output = "";
    child.stdout.on("data", (d) => (output += d));
    child.stderr.on("data", (d) => (output += d));
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // gone meanwhile
      }
      reject(new Error(`timed out after ${ms} ms: ${command}\n${output}`));
    }, ms);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? (signal ? 128 : 1), output });
    });
  });
}

const APPROVE_LINE = /approve (\S+) --hash (sha256:[0-9a-f]{64})/g;

describe("documentation commands", () => {
  const parsed = DOCS.map((doc) => ({
    doc,
    blocks: shellBlocks(fs.readFileSync(path.join(ROOT, doc), "utf8")),
  }));

  it("README stays a front page: at most 250 lines, linking every document in docs/", () => {
    const readme = fs.readFileSync(path.join(ROOT, "README.md"), "utf8");
    expect(readme.split("\n").length).toBeLessThanOrEqual(250);
    for (const doc of DOCS.slice(1)) expect(readme, doc).toContain(`](${doc})`);
  });

  it("README's demo portal tables are the emulator's seed", () => {
    const readme = fs.readFileSync(path.join(ROOT, "README.md"), "utf8");
    // The rows of the table whose header starts with `| first |`, split into trimmed cells.
    const rows = (first: string) => {
      const lines = readme.split("\n");
      const at = lines.findIndex((l) => l.startsWith(`| ${first} |`));
      const body: string[] = [];
      for (let i = at + 2; at >= 0 && i < lines.length && lines[i]!.startsWith("|"); i++)
        body.push(lines[i]!);
      return body.map((l) =>
        l
          .split("|")
          .slice(1, -1)
          .map((c) => c.trim()),
      );
    };
    const seed = defaultSeed();
    const name = (id: number) => {
      const u = seed.users.find((x) => x.id === id)!;
      return `${id} ${u.name} ${u.lastName}`;
    };
    expect(
      rows("task").map((r) => [Number(r[0]), r[1], r[2], r[3]!.split(" ")[0], r[4]!.split(" ")[0]]),
    ).toEqual(
      seed.tasks!.map((s) => [s.id, s.title, name(s.responsibleId), String(s.priority), String(s.status)]),
    );
    expect(
      rows("deal").map((r) => [Number(r[0]), r[1], r[2], Number(r[3]!.replace(/,/g, "")), r[4]]),
    ).toEqual(seed.deals!.map((d) => [d.id, d.title, d.stageId, d.opportunity, name(d.assignedById)]));
  });

  it("every relative link and anchor in README.md and docs/ points at something that exists", () => {
    const broken: string[] = [];
    for (const doc of DOCS) {
      const text = fs.readFileSync(path.join(ROOT, doc), "utf8").replace(/```[\s\S]*?```/g, "");
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!;
        if (/^[a-z]+:/.test(target)) continue;
        const [file, anchor] = target.split("#") as [string, string | undefined];
        const resolved =
          file === "" ? path.join(ROOT, doc) : path.resolve(path.dirname(path.join(ROOT, doc)), file);
        if (!fs.existsSync(resolved)) broken.push(`${doc}: ${target} (no such file)`);
        else if (
          anchor !== undefined &&
          resolved.endsWith(".md") &&
          !anchorsOf(fs.readFileSync(resolved, "utf8")).has(anchor)
        )
          broken.push(`${doc}: ${target} (no such heading)`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("every block that does not run says why, and they stay few", () => {
    const skipped = parsed.flatMap(({ doc, blocks }) =>
      blocks.filter((b) => b.notRun !== undefined).map((b) => ({ doc, line: b.line, why: b.notRun! })),
    );
    for (const s of skipped) expect(s.why.length, `${s.doc}:${s.line}`).toBeGreaterThan(10);
    expect(skipped.length).toBeLessThanOrEqual(12);
    const runnable = parsed.flatMap(({ blocks }) => blocks.filter((b) => b.notRun === undefined));
    expect(runnable.flatMap((b) => b.commands).length).toBeGreaterThan(15);
  });

  for (const { doc, blocks } of parsed) {
    const commands = blocks.filter((b) => b.notRun === undefined).flatMap((b) => b.commands);
    if (commands.length === 0) continue;
    it.concurrent(
      `${doc}: ${commands.length} commands reach what the text says`,
      async () => {
        const { work, env } = freshPlace();
        let thread: string | undefined;
        let hash: string | undefined;
        for (const c of commands) {
          const where = `${doc}:${c.line}: ${c.text}`;
          const text = c.text.replace(/<thread>|<set hash>|<hash>/g, (p) => {
            const value = p === "<thread>" ? thread : hash;
            if (value === undefined)
              throw new Error(`${where}: ${p} before any command printed an approve line`);
            return value;
          });
          const { code, output } = await runShell(text, work, env);
          expect(code, `${where}\n${output}`).toBe(c.exitCode);
          if (c.expect !== undefined)
            expect(squash(output), `${where}\n${output}`).toContain(squash(c.expect));
          for (const m of output.matchAll(APPROVE_LINE)) [thread, hash] = [m[1], m[2]];
        }
        // The README's commands take about half a minute of CPU; the bound leaves room for a loaded machine.
      },
      600_000,
    );
  }
});
