import { ConfigError, UsageError } from "../errors.js";
import { escapeForTerminal } from "../text/escape.js";
import { EXIT_USAGE } from "./exit-codes.js";

/** A configuration or usage error: said in one line, exit 1. Any other error: undefined, nothing said. */
export function reportUsageError(e: unknown): number | undefined {
  if (e instanceof ConfigError) {
    process.stderr.write(
      `configuration error: ${escapeForTerminal(e.message)}\n  (see .env.example for every setting)\n`,
    );
    return EXIT_USAGE;
  }
  if (e instanceof UsageError) {
    process.stderr.write(`error: ${escapeForTerminal(e.message)}\n`);
    return EXIT_USAGE;
  }
  return undefined;
}
