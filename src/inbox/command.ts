/**
 * `inbox [--port N] [--host H]`: serve the web approval inbox over the same data directory or database
 * as the CLI. `inbox-user --id ID [--file FILE]`: read a password from stdin and print the credentials
 * entry for ACTION_ENVELOPE_INBOX_USERS (a scrypt hash; the password itself is stored nowhere), or
 * write it into FILE: created when missing, the entry added or an entry of the same id replaced.
 */
import fs from "node:fs";
import { Command, InvalidArgumentError } from "commander";
import { loadConfig } from "../config/env.js";
import { esc } from "../text/escape.js";
import { hashPassword, loadInboxUsers, MAX_PASSWORD_LENGTH, parseInboxUsers } from "./users.js";

const port = (v: string) => {
  if (!/^\d{1,5}$/.test(v) || Number(v) > 65535)
    throw new InvalidArgumentError(esc`expected a port number, got "${v}"`);
  return Number(v);
};

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

export function inboxCommands(): Command[] {
  const serve = new Command("inbox")
    .description("Serve the web approval inbox on 127.0.0.1 (sign-in from ACTION_ENVELOPE_INBOX_USERS)")
    .option("--port <n>", "port (0 = free port)", port, 3390)
    .option(
      "--host <host>",
      "address to listen on; keep it on loopback unless behind a TLS proxy",
      "127.0.0.1",
    )
    .action(async (opts: { port: number; host: string }) => {
      const config = loadConfig();
      const users = loadInboxUsers(config.inboxUsersPath);
      // The runtime and the web server are loaded only when this command runs.
      const [{ createDeps }, { openApp }, { startInbox }] = await Promise.all([
        import("../runtime/deps.js"),
        import("../app/open-app.js"),
        import("./server.js"),
      ]);
      const app = openApp(await createDeps(config));
      const inbox = await startInbox({ app, users, port: opts.port, host: opts.host });
      process.stdout.write(
        esc`web inbox: ${inbox.url}/ (${users.ids().length} approver account(s); Ctrl-C stops it)\n`,
      );
      await new Promise<void>((resolve) => {
        process.once("SIGINT", () => resolve());
        process.once("SIGTERM", () => resolve());
      });
      await inbox.close();
      await app.close();
    });

  const user = new Command("inbox-user")
    .description("Print a credentials entry for ACTION_ENVELOPE_INBOX_USERS; the password is read from stdin")
    .requiredOption("--id <approver>", "approver id (as in the policy)")
    .option(
      "--file <users.json>",
      "write the entry into this file (created when missing; an entry of the same id is replaced) instead of printing it",
    )
    .action(async (opts: { id: string; file?: string }) => {
      if (process.stdin.isTTY) process.stderr.write("password (then Enter and Ctrl-D): ");
      const password = (await readStdin()).replace(/\r?\n$/, "");
      if (password.length < 8 || password.length > MAX_PASSWORD_LENGTH) {
        throw new InvalidArgumentError(`the password must be 8 to ${MAX_PASSWORD_LENGTH} characters`);
      }
      if (!/^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$/.test(opts.id))
        throw new InvalidArgumentError(esc`--id must be letters, digits, . _ @ -, got "${opts.id}"`);
      const entry = { id: opts.id, password: await hashPassword(password) };
      if (opts.file) {
        const existing = fs.existsSync(opts.file) ? fs.readFileSync(opts.file, "utf8") : undefined;
        // The file must already be a valid users file: nothing else in it is overwritten.
        if (existing !== undefined) parseInboxUsers(existing, opts.file);
        const users =
          existing === undefined
            ? []
            : (JSON.parse(existing) as { users: Array<{ id: string; password: string }> }).users;
        const replaced = users.some((u) => u.id === opts.id);
        const next = { users: [...users.filter((u) => u.id !== opts.id), entry] };
        const tmp = `${opts.file}.${process.pid}.tmp`;
        fs.writeFileSync(tmp, `${JSON.stringify(next, null, 2)}\n`, { mode: 0o600 });
        fs.renameSync(tmp, opts.file);
        process.stdout.write(
          esc`${existing === undefined ? "created" : replaced ? "replaced the entry of" : "added"} ${opts.id} ${existing === undefined ? "in a new" : "in"} ${opts.file} (${String(next.users.length)} account(s)); point ACTION_ENVELOPE_INBOX_USERS at it\n`,
        );
        return;
      }
      process.stdout.write(`${JSON.stringify(entry)}\n`);
      process.stderr.write(
        `add this entry to the "users" array of the file ACTION_ENVELOPE_INBOX_USERS names, or run again with --file FILE to write it there\n`,
      );
    });

  return [serve, user];
}
