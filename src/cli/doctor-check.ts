/** One check of `doctor` (area, name, status, what was found, the fix) and how a list of them is printed. */
import { escapeForTerminal } from "../text/escape.js";

export interface DoctorCheck {
  area: "config" | "portal" | "model" | "policy" | "stores";
  name: string;
  status: "pass" | "warn" | "fail" | "skip";
  detail: string;
  /** What to do about a failure or warning. */
  fix?: string;
}

/** Adds a check to its area's: each area's checks are given an adder that fills the area in. */
export type AddCheck = (c: Omit<DoctorCheck, "area">) => void;

/** One line per check: status, area and name, what was found, and the fix. */
export function renderDoctor(checks: DoctorCheck[]): string {
  const lines = checks.map((c) => {
    const head = `${c.status.toUpperCase().padEnd(4)}  ${`${c.area}/${c.name}`.padEnd(22)} ${escapeForTerminal(c.detail)}`;
    return c.fix ? `${head} — fix: ${escapeForTerminal(c.fix)}` : head;
  });
  const failed = checks.filter((c) => c.status === "fail").length;
  lines.push(failed ? `${failed} check${failed === 1 ? "" : "s"} failed` : "all checks passed");
  return `${lines.join("\n")}\n`;
}
