import { errors } from "../errors.js";
import type { Store } from "../store.js";

export interface MethodContext {
  store: Store;
  /** The webhook user every call runs as. */
  userId: number;
  nowSec: number;
  /** Scopes the webhook was given (the `scope` method). */
  scopes?: string[];
}

export interface MethodResult {
  result: unknown;
  total?: number;
  next?: number;
}

export type Params = Record<string, unknown>;
export type MethodHandler = (params: Params, ctx: MethodContext) => MethodResult;

export const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** Integer from a JSON number or a form string ("12"); undefined for anything else. */
export function intLike(v: unknown): number | undefined {
  if (typeof v === "number" && Number.isInteger(v)) return v;
  if (typeof v === "string" && /^\s*-?\d+\s*$/.test(v)) return Number(v);
  return undefined;
}

/** `taskId` as the tasks controllers bind it: absent -> code 100, non-integer or <= 0 -> "wrong task id". */
export function requireTaskId(params: Params, missing = errors.missingTaskId): number {
  const raw = params.taskId;
  if (raw === undefined || raw === null || raw === "") throw missing();
  const id = intLike(raw);
  if (id === undefined || id <= 0) throw errors.wrongTaskId();
  return id;
}

/** PHP-style arrays arrive from forms as objects with numeric keys; both forms mean a list. */
export function listLike(v: unknown): unknown[] | undefined {
  if (Array.isArray(v)) return v;
  if (isRecord(v)) return Object.values(v);
  return undefined;
}

/** Bitrix24's LIKE on text: `%` any run, `_` one character, case-insensitive, the whole value. */
export function likePattern(pattern: string): RegExp {
  const escaped = pattern
    .replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
    .replace(/%/g, ".*")
    .replace(/_/g, ".");
  return new RegExp(`^${escaped}$`, "is");
}

/** The list methods answer fixed pages of 50 rows. */
export const PAGE_SIZE = 50;

/** `start` as the list methods read it: absent, non-integer or negative is the first page. */
export function pageStart(raw: unknown): number {
  const start = intLike(raw);
  return start !== undefined && start > 0 ? start : 0;
}

/** A page of `total` rows from `start`, with `next` while rows remain after it. */
export function paged(result: unknown, total: number, start: number): MethodResult {
  return start + PAGE_SIZE < total ? { result, total, next: start + PAGE_SIZE } : { result, total };
}
