import type { z } from "zod";

/** One line per zod issue, "path: message", including the inner reason of invalid record keys and union members. */
export function formatIssues(error: z.ZodError): string {
  return error.issues.map(formatIssue).join("; ");
}

function formatIssue(issue: z.core.$ZodIssue): string {
  const path = issue.path.map(String).join(".") || "(root)";
  const inner =
    "issues" in issue && Array.isArray(issue.issues) && issue.code === "invalid_key"
      ? ` (${(issue.issues as z.core.$ZodIssue[]).map((i) => i.message).join(", ")})`
      : "";
  return `${path}: ${issue.message}${inner}`;
}
