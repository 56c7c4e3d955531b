/**
 * The envelope core's named errors. Each message says what was expected and what arrived, so a caller
 * can log it as is. Refusals of proposals and decisions are results, not errors; these are thrown only
 * when a caller hands the core something it cannot work with.
 */

/** An envelope could not be built or read: a needed field is missing, a value is not JSON, an id is wrong. */
export class EnvelopeError extends Error {
  override readonly name = "EnvelopeError";
  constructor(
    readonly code: "MISSING_FIELD" | "NOT_JSON" | "INVALID_ENVELOPE" | "WRONG_TASK" | "PROPOSAL_DENIED",
    readonly expected: string,
    readonly received: string,
  ) {
    super(`${code}: expected ${expected}; received ${received}`);
  }
}

/** A policy document does not match the policy schema or contradicts itself. */
export class PolicyError extends Error {
  override readonly name = "PolicyError";
  constructor(
    readonly expected: string,
    readonly received: string,
  ) {
    super(`invalid policy: expected ${expected}; received ${received}`);
  }
}

/** A public-key registry line or a key pair request is not usable. */
export class KeyRegistryError extends Error {
  override readonly name = "KeyRegistryError";
  constructor(
    readonly expected: string,
    readonly received: string,
  ) {
    super(`invalid approver key: expected ${expected}; received ${received}`);
  }
}

/** Short, single-line, bounded description of a received value for error messages (never for the card). */
export function describeReceived(value: unknown): string {
  if (value === undefined) return "nothing (missing)";
  if (value === null) return "null";
  if (typeof value === "string") {
    const shown = JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}` : value);
    return value.length > 80 ? `string ${shown}… (${value.length} chars)` : `string ${shown}`;
  }
  if (typeof value === "number" || typeof value === "boolean") return `${typeof value} ${String(value)}`;
  if (Array.isArray(value)) return `array of ${value.length}`;
  if (typeof value === "object") {
    const keys = Object.keys(value as object);
    return `object with keys [${keys.slice(0, 12).join(", ")}${keys.length > 12 ? ", …" : ""}]`;
  }
  return typeof value;
}
