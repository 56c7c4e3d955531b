import { errors } from "../errors.js";
import { normaliseSelectKey } from "../shapes.js";
import type { Params } from "./context.js";
import { listLike } from "./context.js";

/** `select` as the controllers bind it: absent or empty = default set; must be an array otherwise. */
export function selectParam(params: Params): Set<string> | null {
  const raw = params.select;
  if (raw === undefined || raw === null || raw === "") return null;
  const list = listLike(raw);
  if (!list) throw errors.notArray("select", raw);
  const keys = list
    .filter((k): k is string => typeof k === "string" && k.trim() !== "")
    .map((k) => normaliseSelectKey(k.trim()));
  return keys.length === 0 ? null : new Set(keys);
}
