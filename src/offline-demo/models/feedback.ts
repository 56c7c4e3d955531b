/**
 * A reviewer's rejection feedback as the offline model reads it: their words, and the value they ask for.
 */

const FEEDBACK_PREFIX = /^[\s\S]*?rejected the (?:proposal|change set):\s*/i;
const FEEDBACK_SUFFIX = /\.?\s*Propose a revised change or stop\.?\s*$/i;
const DOUBLE_QUOTED = /["“«`]([^"”»`]+)["”»`]/;
const SINGLE_QUOTED = /(?:^|\s)['‘]([^'’]+)['’](?=$|[\s.,;:!?])/;
const USE_INSTEAD = /\buse\s+([\s\S]+?)\s+instead\b/i;
const INSTEAD_USE = /\binstead,?\s+use\s+([\s\S]+?)(?:\.(?:\s|$)|$)/i;

/** The reviewer's own words out of the feedback message the graph sends, clipped for a reply. */
export function feedbackMessage(text: string): string {
  const message = text.replace(FEEDBACK_PREFIX, "").replace(FEEDBACK_SUFFIX, "").replace(/\s+/g, " ").trim();
  if (message === "") return "no reason given";
  return message.length > 200 ? `"${message.slice(0, 200)}…"` : `"${message}"`;
}

/**
 * Extracts the value a reviewer asked for: a quoted value, "use X instead" or "instead use X".
 * Returns undefined when the feedback names no replacement value.
 */
export function parseFeedbackValue(text: string): string | undefined {
  const message = text.replace(FEEDBACK_PREFIX, "").replace(FEEDBACK_SUFFIX, "").trim();
  const quoted = DOUBLE_QUOTED.exec(message)?.[1] ?? SINGLE_QUOTED.exec(message)?.[1];
  if (quoted !== undefined && quoted.trim() !== "") return quoted;
  const phrase = USE_INSTEAD.exec(message)?.[1] ?? INSTEAD_USE.exec(message)?.[1];
  if (phrase === undefined) return undefined;
  const value = phrase.trim().replace(/[.!]$/, "").trim();
  return value === "" ? undefined : value;
}
