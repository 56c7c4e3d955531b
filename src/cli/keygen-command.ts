/**
 * `keygen`: an approver's Ed25519 key pair. The private key belongs to the approver, not to the
 * project, so by default it goes to the approver's own configuration directory
 * ($XDG_CONFIG_HOME/action-envelope/keys, else ~/.config/action-envelope/keys; directory 0700, key
 * 0600), never into a repository where it could be committed or shipped with the code. A directory
 * inside the repository working tree (the git working tree of the current directory or of this
 * project, or this project's own directory) is refused unless it was named explicitly with --out,
 * and then a warning is printed.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Command } from "commander";
import { generateApproverKeyPair } from "../envelope/index.js";
import { isInside } from "../config/file-mode.js";
import { UsageError } from "../errors.js";
import { esc } from "../text/escape.js";
import { cap, LIMITS } from "./limits.js";

/** This project's own directory (where package.json is), which counts as a repository even without .git. */
const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** The default key directory: $XDG_CONFIG_HOME/action-envelope/keys, else ~/.config/action-envelope/keys. */
export function defaultKeyDir(env: NodeJS.ProcessEnv = process.env, home: string = os.homedir()): string {
  const xdg = env["XDG_CONFIG_HOME"];
  // The XDG spec says a relative value is invalid and must be ignored.
  const base = xdg && path.isAbsolute(xdg) ? xdg : path.join(home, ".config");
  return path.join(base, "action-envelope", "keys");
}

/** The real path of `dir`, or of its nearest existing ancestor joined with the rest. */
function realPathOf(dir: string): string {
  const rest: string[] = [];
  let current = path.resolve(dir);
  for (;;) {
    try {
      return path.join(fs.realpathSync(current), ...rest.reverse());
    } catch {
      const parent = path.dirname(current);
      if (parent === current) return path.resolve(dir);
      rest.push(path.basename(current));
      current = parent;
    }
  }
}

/** The nearest directory at or above `dir` that holds `.git` (a git working tree), if any. */
function workTreeOf(dir: string): string | undefined {
  for (let d = realPathOf(dir); ; d = path.dirname(d)) {
    if (fs.existsSync(path.join(d, ".git"))) return d;
    if (path.dirname(d) === d) return undefined;
  }
}

/**
 * The repository working tree that contains `dir`, if any: the git working tree of the current
 * directory or of this project, or this project's own directory (an installed copy has no .git).
 */
export function containingRepository(dir: string, cwd: string = process.cwd()): string | undefined {
  const real = realPathOf(dir);
  const candidates = [workTreeOf(cwd), workTreeOf(PROJECT_ROOT), realPathOf(PROJECT_ROOT)];
  return candidates.find((c): c is string => c !== undefined && isInside(real, c));
}

export interface KeygenResult {
  privatePath: string;
  publicPath: string;
  publicKeyLine: string;
  /** Set when the key was written inside a repository because --out named it explicitly. */
  warning?: string;
}

/** Writes the key pair; throws UsageError on a refusal. `out` undefined means the default directory. */
export function writeApproverKeys(
  approver: string,
  out: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
  cwd: string = process.cwd(),
): KeygenResult {
  if (!/^[\w.@-]+$/.test(approver))
    throw new UsageError(`approver id may contain letters, digits, . _ @ -; got "${approver}"`);
  const explicit = out !== undefined;
  const dir = explicit ? path.resolve(out) : defaultKeyDir(env);
  const repo = containingRepository(dir, cwd);
  let warning: string | undefined;
  if (repo && !explicit) {
    throw new UsageError(
      `refusing to write a private key to ${dir}: it is inside the repository working tree ${repo}, where it could be committed or shipped with the code. ` +
        `Set XDG_CONFIG_HOME (or HOME) to a directory outside it, or name a directory with --out if you really mean it.`,
    );
  }
  if (repo)
    warning = esc`${dir} is inside the repository working tree ${repo}; a private key there can be committed or copied with the code (approver-keys/ and *.key are git-ignored in this project). Keep it with the approver only.`;

  const privatePath = path.join(dir, `${approver}.key`);
  const publicPath = path.join(dir, `${approver}.pub`);
  if (fs.existsSync(privatePath))
    throw new UsageError(`${privatePath} already exists; refusing to overwrite a private key`);
  const existed = fs.existsSync(dir);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  // A directory we create, or our own default one, is the approver's alone (umask cannot widen it).
  if (!existed || !explicit) fs.chmodSync(dir, 0o700);

  const pair = generateApproverKeyPair(approver);
  try {
    // "wx": never replace a file that appeared meanwhile; the mode applies from the first byte.
    fs.writeFileSync(privatePath, pair.privateKeyPem, { mode: 0o600, flag: "wx" });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST")
      throw new UsageError(`${privatePath} already exists; refusing to overwrite a private key`);
    throw e;
  }
  fs.chmodSync(privatePath, 0o600);
  fs.writeFileSync(publicPath, `${pair.publicKeyLine}\n`, { mode: 0o644 });
  return { privatePath, publicPath, publicKeyLine: pair.publicKeyLine, ...(warning ? { warning } : {}) };
}

export function keygenCommand(): Command {
  return new Command("keygen")
    .description("Create an approver's Ed25519 key pair; the private key stays with the approver")
    .requiredOption("--approver <id>", "approver id", cap("--approver", LIMITS.id))
    .option(
      "--out <dir>",
      "where to write the key pair (default: $XDG_CONFIG_HOME/action-envelope/keys or ~/.config/action-envelope/keys)",
      cap("--out", LIMITS.path),
    )
    .action((opts: { approver: string; out?: string }) => {
      const r = writeApproverKeys(opts.approver, opts.out);
      if (r.warning) process.stderr.write(`warning: ${r.warning}\n`);
      process.stdout.write(
        esc`private key: ${r.privatePath} (mode 0600; keep it with the approver; never give it to the agent runtime)\n` +
          esc`public key:  ${r.publicPath}\n` +
          `register this line in the file or directory named by ACTION_ENVELOPE_APPROVER_KEYS:\n` +
          esc`${r.publicKeyLine}\n`,
      );
    });
}
