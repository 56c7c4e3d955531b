/**
 * How a journal row's sealed part stands when read (pure): checked under the journal key and held
 * ("valid"), failed ("invalid"), carried no seal ("unsealed"), absent ("none"), or not checked at the
 * row's phase ("unchecked"). The store checks; the executor, the closing and the projection decide by it.
 */
export type SealCheck = "none" | "valid" | "unsealed" | "invalid" | "unchecked";

/** Whether a seal check rules the part out: its seal does not hold, or it carries none. */
export const sealFails = (check: SealCheck): boolean => check === "invalid" || check === "unsealed";

/**
 * Whether a part is confirmed by the seals that cover it: its own (`own`) and the later seals written
 * over it (`covering`, e.g. the verification's over the acknowledgement): none of them fails and one holds.
 */
export function sealConfirmed(own: SealCheck, ...covering: SealCheck[]): boolean {
  const all = [own, ...covering];
  return !all.some(sealFails) && all.includes("valid");
}
