/**
 * Application-level error types. Each says what was expected and what arrived, so a message can be
 * shown to a person as is. Bitrix24 and envelope errors have their own types in their modules.
 */

/** A setting is missing or malformed; the process cannot start until it is fixed. */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    readonly problem: string,
  ) {
    super(`${variable} ${problem}`);
    this.name = "ConfigError";
  }
}

/** A command was given something it cannot act on (unknown thread, no pending approval, bad flag). */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** A decision arrived for a thread that cannot take it (ended, busy in another process, never started). */
export class DecisionNotAcceptedError extends Error {
  constructor(
    readonly threadId: string,
    readonly code:
      "THREAD_ENDED" | "IN_PROGRESS" | "NO_SUCH_THREAD" | "NOT_AWAITING_APPROVAL" | "INTEGRITY_CHECK_FAILED",
    readonly detail: string,
  ) {
    super(`thread ${threadId}: ${detail}`);
    this.name = "DecisionNotAcceptedError";
  }
}
