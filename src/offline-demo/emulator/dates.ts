// The emulated portal runs at a fixed UTC+03:00 offset; Bitrix24 prints dates in the portal/user offset.
export const PORTAL_OFFSET = "+03:00";
const PORTAL_OFFSET_SECONDS = 3 * 3600;

/** Unix seconds -> "2026-11-30T21:00:00+03:00" (no fractions, like PHP date('c')). */
export function formatPortalDate(unixSeconds: number): string {
  // The portal's wall-clock time, written as UTC's ISO form without its fraction and "Z".
  const wall = new Date((Math.floor(unixSeconds) + PORTAL_OFFSET_SECONDS) * 1000);
  return `${wall.toISOString().slice(0, 19)}${PORTAL_OFFSET}`;
}

export function formatNullableDate(unixSeconds: number | null): string | null {
  return unixSeconds === null ? null : formatPortalDate(unixSeconds);
}

export function nowSeconds(): number {
  return Date.now() / 1000;
}

const ISO_RE =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?)?\s*(Z|[+-]\d{2}:?\d{2})?$/i;
const RU_RE = /^(\d{2})\.(\d{2})\.(\d{4})(?: (\d{2}):(\d{2})(?::(\d{2}))?)?$/;

/**
 * Parses a date the way the portal accepts it on input (PHP strtotime for the common forms):
 * ISO 8601 with or without offset (no offset = portal time), date only, or the portal's DD.MM.YYYY format.
 * Returns unix seconds, or undefined when the text is not a date.
 */
export function parsePortalDate(text: string): number | undefined {
  const s = text.trim();
  let y: number,
    mo: number,
    d: number,
    h = 0,
    mi = 0,
    se = 0;
  let offsetSeconds = PORTAL_OFFSET_SECONDS;
  const iso = ISO_RE.exec(s);
  const ru = iso ? null : RU_RE.exec(s);
  if (iso) {
    [y, mo, d] = [Number(iso[1]), Number(iso[2]), Number(iso[3])];
    h = Number(iso[4] ?? 0);
    mi = Number(iso[5] ?? 0);
    se = Number(iso[6] ?? 0);
    const off = iso[7];
    if (off && off.toUpperCase() === "Z") offsetSeconds = 0;
    else if (off) {
      const m = /^([+-])(\d{2}):?(\d{2})$/.exec(off);
      if (!m) return undefined;
      offsetSeconds = (m[1] === "-" ? -1 : 1) * (Number(m[2]) * 3600 + Number(m[3]) * 60);
    }
  } else if (ru) {
    [d, mo, y] = [Number(ru[1]), Number(ru[2]), Number(ru[3])];
    h = Number(ru[4] ?? 0);
    mi = Number(ru[5] ?? 0);
    se = Number(ru[6] ?? 0);
  } else {
    return undefined;
  }
  if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || se > 59) return undefined;
  const ms = Date.UTC(y, mo - 1, d, h, mi, se);
  const check = new Date(ms);
  if (check.getUTCDate() !== d || check.getUTCMonth() !== mo - 1) return undefined; // e.g. 2026-02-30
  return ms / 1000 - offsetSeconds;
}
