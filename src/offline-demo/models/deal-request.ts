/**
 * A request about a CRM deal ("move deal 3 to WON") as the offline model reads it: pure functions.
 */
import { stripWrappingQuotes } from "./intent.js";

export type DealField = "TITLE" | "STAGE_ID" | "OPPORTUNITY" | "ASSIGNED_BY_ID";

export interface DealIntent {
  dealId: number;
  field: DealField;
  value: string;
}

export type ParsedDealRequest =
  | { ok: true; intent: DealIntent }
  | { ok: false; field: DealField; rawValue: string; reason: string }
  | undefined;

const DEAL_STAGE_NAMES: Record<string, string> = {
  new: "NEW",
  preparation: "PREPARATION",
  "prepayment invoice": "PREPAYMENT_INVOICE",
  executing: "EXECUTING",
  "in progress": "EXECUTING",
  "final invoice": "FINAL_INVOICE",
  won: "WON",
  lose: "LOSE",
  lost: "LOSE",
  apology: "APOLOGY",
};

const DEAL_PATTERNS: ReadonlyArray<{ re: RegExp; field: DealField }> = [
  {
    re: /\b(?:move|set)\s+(?:the\s+)?deal\s+#?(?<id>\d+)\s+to\s+(?:stage\s+)?(?<value>[\s\S]+)$/i,
    field: "STAGE_ID",
  },
  {
    re: /\b(?:set|change|update)\s+(?:the\s+)?stage\s+(?:of|for)\s+deal\s+#?(?<id>\d+)\s+to\s+(?<value>[\s\S]+)$/i,
    field: "STAGE_ID",
  },
  {
    re: /\b(?:set|change|update)\s+(?:the\s+)?(?:amount|opportunity|sum)\s+(?:of|for)\s+deal\s+#?(?<id>\d+)\s+to\s+(?<value>[\s\S]+)$/i,
    field: "OPPORTUNITY",
  },
  { re: /\b(?:assign|reassign)\s+deal\s+#?(?<id>\d+)\s+to\s+(?<value>[\s\S]+)$/i, field: "ASSIGNED_BY_ID" },
  { re: /\b(?:rename|retitle)\s+deal\s+#?(?<id>\d+)\s+to\s+(?<value>[\s\S]+)$/i, field: "TITLE" },
];

/** A request about a CRM deal ("move deal 3 to WON"), or undefined when it names no deal. */
export function parseDealRequest(text: string): ParsedDealRequest {
  const request = text.trim();
  for (const { re, field } of DEAL_PATTERNS) {
    const m = re.exec(request);
    if (!m?.groups) continue;
    const rawValue = stripWrappingQuotes(m.groups["value"] ?? "");
    const dealId = Number(m.groups["id"]);
    const v = rawValue.replace(/[.!]+$/, "").trim();
    switch (field) {
      case "STAGE_ID": {
        const code =
          DEAL_STAGE_NAMES[v.toLowerCase().replace(/[_-]+/g, " ")] ?? (/^[A-Z_]+$/.test(v) ? v : undefined);
        if (!code)
          return {
            ok: false,
            field,
            rawValue,
            reason: `expected a stage: ${Object.values(DEAL_STAGE_NAMES)
              .filter((x, i, a) => a.indexOf(x) === i)
              .join(", ")}`,
          };
        return { ok: true, intent: { dealId, field, value: code } };
      }
      case "OPPORTUNITY": {
        const amount = v.replace(/\s+(?:rub|usd|eur|₽)$/i, "").replace(/[\s,]/g, "");
        if (!/^\d+(?:\.\d{1,2})?$/.test(amount))
          return { ok: false, field, rawValue, reason: "expected an amount such as 51000 or 51000.50" };
        return { ok: true, intent: { dealId, field, value: amount } };
      }
      case "ASSIGNED_BY_ID": {
        const id = v.replace(/^(?:the\s+)?(?:user\s*)?(?:id\s*)?#?/i, "");
        if (!/^\d+$/.test(id) || Number(id) <= 0)
          return { ok: false, field, rawValue, reason: "expected a numeric Bitrix24 user id, e.g. user 7" };
        return { ok: true, intent: { dealId, field, value: id } };
      }
      case "TITLE":
        if (rawValue.trim() === "") return { ok: false, field, rawValue, reason: "a title cannot be empty" };
        return { ok: true, intent: { dealId, field, value: rawValue } };
    }
  }
  return undefined;
}
