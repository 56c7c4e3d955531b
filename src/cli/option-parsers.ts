/**
 * Parsers of the CLI's numeric option values: durations, whole numbers and task or deal ids, each length-
 * capped.
 */
import { InvalidArgumentError } from "commander";
import { capped } from "./limits.js";
import { esc } from "../text/escape.js";

/** "90s", "30m", "2h", "1d" → milliseconds. */
export const duration = (value: string) => {
  capped("--older-than", value, 20);
  const m = /^(\d+)(s|m|h|d)$/.exec(value);
  if (!m) throw new InvalidArgumentError(esc`expected a duration like 30m, 2h or 1d, got "${value}"`);
  return Number(m[1]) * { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as "s" | "m" | "h" | "d"];
};

export const positive =
  (name: string, zeroOk = false) =>
  (value: string) => {
    capped(name, value, 12);
    if (!/^\d+$/.test(value) || (!zeroOk && Number(value) === 0))
      throw new InvalidArgumentError(
        esc`expected a ${zeroOk ? "whole number" : "positive whole number"}, got "${value}"`,
      );
    return Number(value);
  };

export const objectId = (flag: string, kind: "task" | "deal") => (value: string) => {
  capped(flag, value, 20);
  if (!/^\d+$/.test(value) || Number(value) <= 0)
    throw new InvalidArgumentError(esc`expected a positive ${kind} id, got "${value}"`);
  return Number(value);
};
export const taskId = objectId("--task", "task");
