/**
 * `api-token`: a fresh LangGraph API token for one identity and its roles. Prints the token (give it
 * to that person; it is not stored anywhere) and the entry to add to the ACTION_ENVELOPE_API_TOKENS
 * file, which holds only its sha256.
 */
import { Command, InvalidArgumentError } from "commander";
import { UsageError } from "../errors.js";
import { API_ROLES, newApiToken, type ApiRole } from "../auth/tokens.js";
import { esc, stringifyJsonSafe } from "../text/escape.js";

const role = (value: string, previous: ApiRole[] = []): ApiRole[] => {
  if (!(API_ROLES as readonly string[]).includes(value))
    throw new InvalidArgumentError(`expected one of ${API_ROLES.join(", ")}, got "${value}"`);
  return [...previous, value as ApiRole];
};

export function apiTokenCommand(): Command {
  return new Command("api-token")
    .description("Print a new LangGraph API token and its entry for the ACTION_ENVELOPE_API_TOKENS file")
    .requiredOption(
      "--identity <id>",
      "who the token authenticates, e.g. alice (approver ids must match the policy's)",
    )
    .requiredOption("--role <role>", `role (repeatable): ${API_ROLES.join(", ")}`, role)
    .option("--json", "print {token, entry} as one JSON object")
    .action((opts: { identity: string; role: ApiRole[]; json?: boolean }) => {
      let made: ReturnType<typeof newApiToken>;
      try {
        made = newApiToken(opts.identity, opts.role);
      } catch (e) {
        throw new UsageError(`--identity: ${(e as Error).message}`);
      }
      if (opts.json) {
        process.stdout.write(`${stringifyJsonSafe(made, 0)}\n`);
        return;
      }
      process.stdout.write(
        esc`token (give it to ${made.entry.identity}; it is shown once and stored nowhere):` +
          `\n  ${made.token}\nentry for the "tokens" array of the ACTION_ENVELOPE_API_TOKENS file:\n  ${stringifyJsonSafe(made.entry, 0)}\n`,
      );
    });
}
