/**
 * Row shapes and mappers for the journal's threads and actions, shared by the SQLite and PostgreSQL
 * journals (same columns in both). Each row read is checked against its MAC here, once.
 */
import {
  canMove,
  currentOfSet,
  emptyProgress,
  macContentOfAction,
  macContentOfThread,
  refusedMove,
  releasesLease,
  type ActionProgress,
  type ActionRow,
  type ClosedRecord,
  type Phase,
  type RegisteredAction,
  type SealCheck,
  type ThreadRecord,
} from "./action-machine.js";
import { sealConfirmed } from "../envelope/seal-check.js";
import { sealHolds, sealOf } from "./journal-key.js";
import { dueOnMove, dueOnRegister } from "./due.js";

export interface ActionDbRow {
  envelope_hash: string;
  thread_id: string;
  revision: number;
  registered_json: string;
  mac: string;
  phase: Phase;
  progress_json: string;
  registered_at: string;
}

export interface ThreadDbRow {
  thread_id: string;
  record_json: string;
  mac: string;
  closed_json: string | null;
  created_at: string;
}

export type NewThread = Pick<
  ThreadRecord,
  "threadId" | "request" | "requestedBy" | "requesterVerifiedBy" | "scope" | "createdAt" | "compensates"
> &
  Partial<Pick<ThreadRecord, "auditFrom">>;

export function sealAction(key: Buffer, a: RegisteredAction): { json: string; mac: string } {
  return { json: JSON.stringify(a), mac: sealOf(key, macContentOfAction(a)) };
}

/**
 * A new thread's record with `auditFrom`, the audit log's next seq, when the thread has no audit record
 * yet (`audit`, read by the store when it registers the thread).
 */
export function withAuditFrom(t: NewThread, audit: { next: number; hasRecords: boolean }): NewThread {
  return audit.hasRecords ? t : { ...t, auditFrom: audit.next };
}

export function sealThread(key: Buffer, t: NewThread): { json: string; mac: string } {
  // The row stores the sealed fields, without the seal's kind tag.
  const sealed = macContentOfThread(t);
  const { kind: _kind, ...content } = sealed;
  return { json: JSON.stringify(content), mac: sealOf(key, sealed) };
}

/**
 * Seals this process has already checked, per journal key: MAC → the exact stored text it was checked
 * over. A row read again with byte-identical text and MAC holds for the same reason it held before, so
 * its canonical form is not rebuilt on every read (a node reads its action several times); text that
 * differs in any byte is checked in full. Bounded: cleared when it grows past MAX_CACHED_SEALS.
 */
const checkedSeals = new WeakMap<Buffer, Map<string, string>>();
const MAX_CACHED_SEALS = 20_000;

function sealHoldsCached(
  key: Buffer,
  text: string,
  mac: string | null,
  content: () => unknown,
  remember = true,
): boolean {
  if (!mac) return false;
  let seen = checkedSeals.get(key);
  if (seen?.get(mac) === text) return true;
  if (!sealHolds(key, content(), mac)) return false;
  if (!remember) return true;
  if (!seen) checkedSeals.set(key, (seen = new Map()));
  if (seen.size >= MAX_CACHED_SEALS) seen.clear();
  seen.set(mac, text);
  return true;
}

/**
 * Parsed JSON of rows read or written before, per envelope hash: the stored text and the object parsed
 * from it, deep-frozen. A node reads its action several times and the progress column grows with every
 * raw answer; text that is byte-identical parses to the same value, so the frozen parse is handed out
 * again (frozen, so no caller can change what the next caller gets). Any other text is parsed anew.
 */
const parsedRows = new Map<
  string,
  { registeredText: string; registered: RegisteredAction; progressText: string; progress: ActionProgress }
>();
const MAX_CACHED_ROWS = 2_000;

/** The JSON text of each progress part written or serialised before, by its frozen object. */
const partTexts = new WeakMap<object, string>();
/** Progress parts that are a parse of stored text (so already what a read gives), not yet serialised. */
const parsedParts = new WeakSet<object>();

/** A progress part's JSON text as the progress column stores it (kept from when it was serialised). */
function jsonText(value: unknown): string {
  return (
    (typeof value === "object" && value !== null ? partTexts.get(value) : undefined) ?? JSON.stringify(value)
  );
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value as Record<string, unknown>)) deepFreeze(v);
  }
  return value;
}

function parsedOf(
  r: ActionDbRow,
  remember: boolean,
): { registered: RegisteredAction; progress: ActionProgress } {
  const hit = parsedRows.get(r.envelope_hash);
  const registered =
    hit && hit.registeredText === r.registered_json
      ? hit.registered
      : deepFreeze(JSON.parse(r.registered_json) as RegisteredAction);
  const progress =
    hit && hit.progressText === r.progress_json ? hit.progress : parsedProgress(r.progress_json);
  if (!remember) return { registered, progress };
  if (parsedRows.size >= MAX_CACHED_ROWS && !hit) parsedRows.clear();
  parsedRows.set(r.envelope_hash, {
    registeredText: r.registered_json,
    registered,
    progressText: r.progress_json,
    progress,
  });
  return { registered, progress };
}

function parsedProgress(text: string): ActionProgress {
  const progress = deepFreeze(JSON.parse(text) as ActionProgress);
  for (const part of Object.values(progress))
    if (typeof part === "object" && part !== null) parsedParts.add(part);
  return progress;
}

/**
 * The progress column's text for a move, and the progress as reading that text back gives it
 * (deep-frozen). The text is JSON.stringify's, byte for byte, but a part the row already carried (the
 * decision, the pre-read, ...) is not serialised again: its text is kept from when it was first
 * serialised; only the part a move adds is serialised, and parsed once so the stored and the returned
 * progress agree. The row's parse is remembered, so the next read of this text parses nothing.
 */
export function progressColumn(
  envelopeHash: string,
  progress: ActionProgress,
): { text: string; progress: ActionProgress } {
  const stored: Record<string, unknown> = {};
  let text = "";
  for (const [name, value] of Object.entries(progress)) {
    if (value === undefined) continue;
    let part: unknown = value;
    let partText = typeof value === "object" && value !== null ? partTexts.get(value) : undefined;
    if (partText === undefined) {
      partText = JSON.stringify(value) as string | undefined;
      if (partText === undefined) continue;
      if (typeof value !== "object" || value === null || !parsedParts.has(value))
        part = deepFreeze(JSON.parse(partText) as unknown);
      if (typeof part === "object" && part !== null) partTexts.set(part, partText);
    }
    text += `${text ? "," : ""}${JSON.stringify(name)}:${partText}`;
    stored[name] = part;
  }
  text = `{${text}}`;
  const frozen = Object.freeze(stored) as unknown as ActionProgress;
  const hit = parsedRows.get(envelopeHash);
  if (hit) parsedRows.set(envelopeHash, { ...hit, progressText: text, progress: frozen });
  return { text, progress: frozen };
}

/**
 * The row, its seal checked. `listed`: one of many a listing reads once, so neither its parse nor its
 * seal is remembered (a listing of 100,000 rows would fill both memories with rows no one reads again).
 */
export function toActionRow(r: ActionDbRow, key: Buffer, listed = false): ActionRow {
  let registered: RegisteredAction;
  let progress: ActionProgress;
  let macValid = true;
  try {
    ({ registered, progress } = parsedOf(r, !listed));
  } catch {
    // Unreadable content cannot be trusted either; keep the row's identity so the refusal can name it.
    registered = {
      envelopeHash: r.envelope_hash,
      threadId: r.thread_id,
      revision: r.revision,
    } as RegisteredAction;
    progress = JSON.parse(r.progress_json) as ActionProgress;
    macValid = false;
  }
  macValid =
    macValid &&
    registered.envelopeHash === r.envelope_hash &&
    registered.threadId === r.thread_id &&
    registered.revision === r.revision &&
    sealHoldsCached(key, r.registered_json, r.mac, () => macContentOfAction(registered), !listed);
  return {
    ...registered,
    envelopeHash: r.envelope_hash,
    threadId: r.thread_id,
    revision: r.revision,
    phase: r.phase,
    registeredAt: r.registered_at,
    macValid,
    // Checked where a step acts on them (the gate and the write) and on a row read by itself (a view
    // holds the audit records against it: src/evidence/journal-check.ts); a listing pays nothing.
    decisionSeal:
      actsOnSeals(r.phase) || !listed ? decisionSealOfRow(key, r, progress, !listed) : "unchecked",
    preReadSeal: actsOnPreRead(r.phase) ? preReadSealOfRow(key, r, progress, !listed) : "unchecked",
    acknowledgementSeal: partSealOfRow("acknowledged", key, r, progress, !listed),
    verificationSeal: partSealOfRow("verified", key, r, progress, !listed),
    // The progress as reported: with the recorded close only when its seal holds.
    ...closeOfRow(key, r, progress, !listed),
  };
}

/** The progress parts a seal of each kind covers, besides the action (envelope and thread). */
const SEALED_PARTS = {
  // An acknowledgement: itself (the verification that follows is made on it).
  acknowledgement: ["acknowledgement"],
  // A close: its record and the evidence it was closed on.
  close: ["closed", "preRead", "acknowledgement", "verification"],
  // A verification: itself and the acknowledgement it was made on.
  verification: ["verification", "acknowledgement"],
} as const satisfies Record<string, ReadonlyArray<keyof ActionProgress>>;

/** The moves that seal what they record: the part recorded, the seal's kind and where the seal is kept. */
const SEALED_ON_MOVE: Partial<
  Record<
    Phase,
    {
      part: "acknowledgement" | "verification" | "closed";
      kind: keyof typeof SEALED_PARTS;
      seal: "acknowledgementSeal" | "verificationSeal" | "closeSeal";
    }
  >
> = {
  acknowledged: { part: "acknowledgement", kind: "acknowledgement", seal: "acknowledgementSeal" },
  verified: { part: "verification", kind: "verification", seal: "verificationSeal" },
  closed: { part: "closed", kind: "close", seal: "closeSeal" },
};

/** What a seal of `kind` covers: the action and its parts, each as the progress column stores it. */
function partsSealContent(
  kind: keyof typeof SEALED_PARTS,
  envelopeHash: string,
  threadId: string,
  progress: ActionProgress,
): unknown {
  const parts = SEALED_PARTS[kind].map((name) => {
    const v = progress[name];
    return [name, v === undefined || v === null ? null : jsonText(v)];
  });
  return { kind, envelopeHash, threadId, ...Object.fromEntries(parts) };
}

/**
 * Whether the part the move to `phase` recorded is the one this program recorded. The acknowledgement
 * and the verification are checked at their own phase (the next step acts on them; "unchecked" at any
 * other); a close wherever the row carries one, since it is what every view reports.
 */
function partSealOfRow(
  phase: "acknowledged" | "verified" | "closed",
  key: Buffer,
  r: ActionDbRow,
  progress: ActionProgress,
  remember: boolean,
): SealCheck {
  if (phase !== "closed" && r.phase !== phase) return "unchecked";
  const { part, kind, seal } = SEALED_ON_MOVE[phase]!;
  if (progress[part] === undefined || progress[part] === null) return "none";
  const mac = progress[seal];
  if (typeof mac !== "string" || mac === "") return "unsealed";
  // Checked once per stored text: the seal's content is rebuilt only for text not checked before.
  const holds = sealHoldsCached(
    key,
    `${kind}\n${r.envelope_hash}\n${r.thread_id}\n${r.progress_json}`,
    mac,
    () => partsSealContent(kind, r.envelope_hash, r.thread_id, progress),
    remember,
  );
  return holds ? "valid" : "invalid";
}

/**
 * The row's close as reported: the recorded one when its seal holds; otherwise an INCONCLUSIVE close
 * naming why (OUTCOME_TAMPERED), so no view, report or audit record takes an outcome or its evidence
 * from a row edited after this program closed it (or closed by hand).
 */
function closeOfRow(
  key: Buffer,
  r: ActionDbRow,
  progress: ActionProgress,
  remember: boolean,
): { progress: ActionProgress; closeSeal: SealCheck } {
  const check = partSealOfRow("closed", key, r, progress, remember);
  if (check === "none" || check === "valid") return { progress, closeSeal: check };
  return {
    progress: Object.freeze({ ...progress, closed: unconfirmedClose(progress.closed!, check, "action") }),
    closeSeal: check,
  };
}

/** The close reported in place of a recorded one whose seal does not hold (or is missing). */
function unconfirmedClose(claimed: ClosedRecord, check: SealCheck, of: "action" | "thread"): ClosedRecord {
  const said = `${String((claimed as Partial<ClosedRecord>).outcome)}/${String((claimed as Partial<ClosedRecord>).reasonCode)}`;
  return Object.freeze({
    outcome: "INCONCLUSIVE",
    reasonCode: "OUTCOME_TAMPERED",
    reason:
      check === "unsealed"
        ? `the journal's closing record of this ${of} carries no seal (closed by hand, by a version before closes were sealed, or its seal removed); what it says (${said}) is not reported`
        : `the journal's closing record of this ${of} does not match its seal under the journal key (it, or the evidence it was closed on, was changed outside this program); what it says (${said}) is not reported`,
    at: typeof claimed.at === "string" ? claimed.at : "",
  });
}

/** The thread's closed_json for a close: the record and its seal under the journal key. */
export function sealedThreadClose(key: Buffer, threadId: string, closed: ClosedRecord): string {
  const { seal: _old, ...record } = closed as ClosedRecord & { seal?: unknown };
  return JSON.stringify({ ...record, seal: sealOf(key, threadCloseSealContent(threadId, record)) });
}

function threadCloseSealContent(threadId: string, closed: ClosedRecord): unknown {
  return { kind: "thread-close", threadId, closed: JSON.stringify(closed) };
}

/**
 * A thread's close as reported, from its closed_json: the recorded one when its seal holds, otherwise
 * an INCONCLUSIVE close naming why (OUTCOME_TAMPERED); null while the thread is open.
 */
export function threadCloseOf(key: Buffer, threadId: string, text: string | null): ClosedRecord | null {
  if (!text) return null;
  let stored: ClosedRecord & { seal?: unknown };
  try {
    stored = JSON.parse(text) as ClosedRecord & { seal?: unknown };
  } catch {
    return unconfirmedClose({} as ClosedRecord, "invalid", "thread");
  }
  const { seal, ...closed } = stored;
  if (typeof seal !== "string" || seal === "") return unconfirmedClose(closed, "unsealed", "thread");
  const holds = sealHoldsCached(key, `${threadId}\n${text}`, seal, () =>
    threadCloseSealContent(threadId, closed),
  );
  return holds ? closed : unconfirmedClose(closed, "invalid", "thread");
}

/** The phases whose next step acts on the decision (decided, pre_read). */
const actsOnSeals = (phase: Phase) => phase === "decided" || phase === "pre_read";

/**
 * The phases whose next step acts on the pre-read: the write (pre_read), the verification, which
 * compares the fresh read with the object as the pre-read found it (intent, acknowledged), and the
 * close, which seals it with the rest of the evidence (verified). A closed row's pre-read is covered by
 * the close's seal.
 */
const actsOnPreRead = (phase: Phase) =>
  phase === "pre_read" || phase === "intent" || phase === "acknowledged" || phase === "verified";

/**
 * What a decision's seal covers: the action it decides (envelope and thread) and the decision's JSON
 * text as stored (the progress column keeps JSON.stringify's text, which parsing and writing again
 * gives back byte for byte).
 */
function decisionSealContent(envelopeHash: string, threadId: string, decisionText: string): unknown {
  return { kind: "decision", envelopeHash, threadId, decision: decisionText };
}

/**
 * The move of an action to decided with `decision` and its seal under the journal key: the phase and
 * the rest of the progress column are not sealed, so only the seal tells a decision this program
 * recorded from one written into the row by hand.
 */
export function planDecision(
  key: Buffer,
  current: ActionRow | undefined,
  envelopeHash: string,
  decision: NonNullable<ActionProgress["decision"]>,
): ReturnType<typeof planMove> {
  const threadId = current?.threadId ?? "";
  const decisionSeal = sealOf(key, decisionSealContent(envelopeHash, threadId, JSON.stringify(decision)));
  const plan = planMove(current, envelopeHash, "decided", { decision, decisionSeal });
  // The moved row (moveWrite keeps the row's other fields) carries the decision just sealed.
  return plan.ok ? { ...plan, row: { ...plan.row, decisionSeal: "valid" } } : plan;
}

/**
 * What a pre-read's seal covers: the action (envelope and thread) and the pre-read's JSON text as the
 * progress column stores it: its verdict, and the evidence the write and the verification act on (the
 * object as read, the same-text comments or tasks that existed before).
 */
function preReadSealContent(envelopeHash: string, threadId: string, preReadText: string): unknown {
  return { kind: "pre-read", envelopeHash, threadId, preRead: preReadText };
}

/**
 * A move the machine allows, as planMove plans it; the move to pre_read (the pre-read's MATCH, after
 * which the write goes out) also seals the pre-read under the journal key, so a pre-read written into
 * the row by hand (a MISMATCH turned into a MATCH, a closed action put back at pre_read, its evidence
 * edited before the write or the verification acts on it) is not taken for one this program read.
 */
export function planSealedMove(
  key: Buffer,
  current: ActionRow | undefined,
  envelopeHash: string,
  to: Phase,
  patch: Partial<ActionProgress>,
  from?: Phase,
): ReturnType<typeof planMove> {
  const sealed = SEALED_ON_MOVE[to];
  if (sealed && patch[sealed.part]) {
    const unconfirmed = to === "closed" && current ? unconfirmedParts(current) : [];
    if (unconfirmed.length > 0) patch = { ...patch, closed: { ...patch.closed!, unconfirmed } };
    const plan = planMove(current, envelopeHash, to, patch, from);
    if (!plan.ok) return plan;
    const mac = sealOf(
      key,
      partsSealContent(sealed.kind, envelopeHash, current?.threadId ?? "", plan.progress),
    );
    // The moved row (moveWrite keeps the row's other fields) carries the part just sealed.
    return {
      ...plan,
      progress: { ...plan.progress, [sealed.seal]: mac },
      row: { ...plan.row, [sealed.seal]: "valid" },
    };
  }
  const preRead = patch.preRead;
  if (to !== "pre_read" || !preRead) return planMove(current, envelopeHash, to, patch, from);
  const preReadSeal = sealOf(
    key,
    preReadSealContent(envelopeHash, current?.threadId ?? "", JSON.stringify(preRead)),
  );
  const plan = planMove(current, envelopeHash, to, { ...patch, preReadSeal }, from);
  // The moved row (moveWrite keeps the row's other fields) carries the pre-read just sealed.
  return plan.ok ? { ...plan, row: { ...plan.row, preReadSeal: "valid" } } : plan;
}

/**
 * The parts of an action about to be closed whose seal does not hold, or that no seal checked at its
 * phase covers (the verification's covers the acknowledgement): the close's seal covers every part as it
 * stands, so the close records these by name, and no view reports them as the evidence it was closed on.
 */
function unconfirmedParts(row: ActionRow): NonNullable<ClosedRecord["unconfirmed"]> {
  const p = row.progress;
  const out: NonNullable<ClosedRecord["unconfirmed"]> = [];
  if (p.preRead && !sealConfirmed(row.preReadSeal)) out.push("preRead");
  if (p.acknowledgement && !sealConfirmed(row.acknowledgementSeal, row.verificationSeal))
    out.push("acknowledgement");
  if (p.verification && !sealConfirmed(row.verificationSeal)) out.push("verification");
  return out;
}

function preReadSealOfRow(
  key: Buffer,
  r: ActionDbRow,
  progress: ActionProgress,
  remember: boolean,
): ActionRow["preReadSeal"] {
  const preRead = progress.preRead;
  if (preRead === undefined || preRead === null) return "none";
  const mac = progress.preReadSeal;
  if (typeof mac !== "string" || mac === "") return "unsealed";
  const text = jsonText(preRead);
  // The remembered text names the action too, so a seal copied with its pre-read onto another row is checked in full.
  const holds = sealHoldsCached(
    key,
    `pre-read\n${r.envelope_hash}\n${r.thread_id}\n${text}`,
    mac,
    () => preReadSealContent(r.envelope_hash, r.thread_id, text),
    remember,
  );
  return holds ? "valid" : "invalid";
}

function decisionSealOfRow(
  key: Buffer,
  r: ActionDbRow,
  progress: ActionProgress,
  remember: boolean,
): ActionRow["decisionSeal"] {
  const decision = progress.decision;
  if (decision === undefined || decision === null) return "none";
  const mac = progress.decisionSeal;
  if (typeof mac !== "string" || mac === "") return "unsealed";
  const text = JSON.stringify(decision);
  // The remembered text names the action too, so a seal copied with its decision onto another row is checked in full.
  const holds = sealHoldsCached(
    key,
    `${r.envelope_hash}\n${r.thread_id}\n${text}`,
    mac,
    () => decisionSealContent(r.envelope_hash, r.thread_id, text),
    remember,
  );
  return holds ? "valid" : "invalid";
}

/** A new scope's UPDATE values (record, MAC, thread); none when the seal fails or the thread is closed or has an action. */
export function rescoped(key: Buffer, r: ThreadDbRow, scope: ThreadRecord["scope"], hasAction: boolean) {
  const t = toThreadRecord(r, key);
  if (!t.macValid || t.closed || hasAction) return undefined;
  const sealed = sealThread(key, { ...t, scope });
  return [sealed.json, sealed.mac, t.threadId];
}

export function toThreadRecord(r: ThreadDbRow, key: Buffer): ThreadRecord {
  let content: NewThread;
  let macValid = true;
  try {
    content = JSON.parse(r.record_json) as NewThread;
  } catch {
    content = { threadId: r.thread_id, request: "", requestedBy: "", scope: {}, createdAt: r.created_at };
    macValid = false;
  }
  macValid =
    macValid &&
    content.threadId === r.thread_id &&
    sealHoldsCached(key, r.record_json, r.mac, () => macContentOfThread(content));
  return {
    ...content,
    threadId: r.thread_id,
    closed: threadCloseOf(key, r.thread_id, r.closed_json),
    macValid,
  };
}

/** The row as read, its seal checked; undefined when there is none. */
export function actionRowOf(r: ActionDbRow | undefined, key: Buffer): ActionRow | undefined {
  return r ? toActionRow(r, key) : undefined;
}

/** A move the machine allows: the row as read, where it goes, and its progress after the move. */
export interface PlannedMove {
  row: ActionRow;
  to: Phase;
  progress: ActionProgress;
}

/** The compare-and-set both journals apply inside their transaction. */
export function planMove(
  current: ActionRow | undefined,
  envelopeHash: string,
  to: Phase,
  patch: Partial<ActionProgress>,
  from?: Phase,
): ({ ok: true } & PlannedMove) | { ok: false; phase: Phase | null; reason: string } {
  if (!current) return { ok: false, phase: null, reason: refusedMove(null, to, envelopeHash) };
  if (!canMove(current.phase, to) || (from !== undefined && current.phase !== from))
    return { ok: false, phase: current.phase, reason: refusedMove(current.phase, to, envelopeHash, from) };
  return { ok: true, row: current, to, progress: { ...current.progress, ...patch } };
}

/** The move of a closing thread's action to closed with the thread's record, unless the action has its own close. */
export function planClose(
  key: Buffer,
  action: ActionRow | undefined,
  envelopeHash: string,
  closed: ClosedRecord,
) {
  return action && !action.progress.closed
    ? planSealedMove(key, action, envelopeHash, "closed", { closed })
    : undefined;
}

/**
 * Writing a planned move: the UPDATE's values (phase, progress, due time and reason, envelope hash),
 * whether it releases the action's object lease, and the moved row, its progress as stored.
 */
export function moveWrite(
  plan: PlannedMove,
  nowMs: number,
  resumeGraceMs: number,
): { values: [Phase, string, number | null, string | null, string]; releases: boolean; row: ActionRow } {
  const due = dueOnMove(plan.to, nowMs, resumeGraceMs);
  const column = progressColumn(plan.row.envelopeHash, plan.progress);
  return {
    values: [plan.to, column.text, due?.at ?? null, due?.reason ?? null, plan.row.envelopeHash],
    releases: releasesLease(plan.row.phase, plan.to, column.progress),
    row: { ...plan.row, phase: plan.to, progress: column.progress },
  };
}

/**
 * The thread a registration belongs to (every action of one registration belongs to one thread), and
 * the values of each action's row in the INSERT's order: envelope hash, thread, revision, the sealed
 * envelope and its MAC, the empty progress, when it was registered, and when it falls due and why.
 */
export function registrationRows(
  key: Buffer,
  list: RegisteredAction[],
  at: string,
): { threadId: string; rows: unknown[][] } {
  const threadId = list[0]!.threadId;
  if (list.some((a) => a.threadId !== threadId))
    throw new Error("registerActions: every action of one registration belongs to one thread");
  const progress = JSON.stringify(emptyProgress());
  const rows = list.map((a) => {
    const { json, mac } = sealAction(key, a);
    const due = dueOnRegister(a)!;
    return [a.envelopeHash, a.threadId, a.revision, json, mac, progress, at, due.at, due.reason];
  });
  return { threadId, rows };
}

/**
 * The row with a refused decision kept for the card and counted (toward the budget only when
 * `counted`), and its progress column's text.
 */
export function withRefusal(
  raw: ActionDbRow,
  key: Buffer,
  refusal: NonNullable<ActionProgress["lastRefusal"]>,
  counted: boolean,
): { text: string; row: ActionRow } {
  const p = toActionRow(raw, key).progress;
  const { text } = progressColumn(raw.envelope_hash, {
    ...p,
    lastRefusal: refusal,
    refusalsSeen: p.refusalsSeen + 1,
    refusalsCounted: p.refusalsCounted + (counted ? 1 : 0),
  });
  return { text, row: toActionRow({ ...raw, progress_json: text }, key) };
}

/** Every row of the change set `row` belongs to, in the set's order (missing ones left out; the gate names them). */
export async function setMembersOf(
  row: ActionRow,
  getAction: (envelopeHash: string) => Promise<ActionRow | undefined>,
): Promise<ActionRow[]> {
  if (!row.set) return [row];
  const rows = await Promise.all(row.set.set.actions.map((a) => getAction(a.envelopeHash)));
  return rows.filter((r): r is ActionRow => r !== undefined);
}

/** A thread's current action from its newest row: that row, or for a change set the action the set is at. */
export async function currentFrom(
  newest: ActionRow | undefined,
  getAction: (envelopeHash: string) => Promise<ActionRow | undefined>,
): Promise<ActionRow | undefined> {
  if (!newest?.set) return newest;
  return currentOfSet(await setMembersOf(newest, getAction)) ?? newest;
}
