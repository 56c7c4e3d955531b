import { formatNullableDate, formatPortalDate } from "./dates.js";
import type { Store } from "./store.js";
import type { SeedUser, TaskRecord } from "./types.js";

export const str = (n: number | null): string | null => (n === null ? null : String(n));

/**
 * PHP's json_encode prints an array as a JSON list when its keys are exactly 0..n-1 (so an empty one is `[]`),
 * and as an object otherwise; the portal's answers show both.
 */
export function phpAssoc<T>(entries: [string, T][]): Record<string, T> | T[] {
  if (entries.every(([k], i) => k === String(i))) return entries.map(([, v]) => v);
  return Object.fromEntries(entries);
}

export function timeBlock(startMs: number, finishMs: number): Record<string, number | string> {
  const start = startMs / 1000;
  const finish = finishMs / 1000;
  return {
    start,
    finish,
    duration: finish - start,
    processing: finish - start,
    date_start: formatPortalDate(start),
    date_finish: formatPortalDate(finish),
    operating_reset_at: Math.floor(start) + 600,
    operating: 0,
  };
}

export function userRef(store: Store, id: number): Record<string, string | null> {
  const u = store.getUser(id);
  return {
    id: String(id),
    name: u ? [u.name, u.lastName].filter(Boolean).join(" ") : "",
    link: `/company/personal/user/${id}/`,
    icon: "/bitrix/images/tasks/default_avatar.png",
    workPosition: u?.workPosition ?? null,
  };
}

export function historyUser(u: SeedUser | undefined, id: number): Record<string, unknown> {
  return {
    id,
    name: u?.name ?? "",
    lastName: u?.lastName ?? "",
    secondName: u?.secondName ?? "",
    login: u?.login ?? "",
  };
}

/** A task's or deal's access lists: null means every user (editableBy: every user who may read it). */
type Access = Pick<TaskRecord, "readableBy" | "editableBy">;

export function canRead(record: Access, userId: number): boolean {
  return record.readableBy === null || record.readableBy.includes(userId);
}

export function canEdit(record: Access, userId: number): boolean {
  if (!canRead(record, userId)) return false;
  return record.editableBy === null || record.editableBy.includes(userId);
}

/** Overdue (-1) and almost overdue (-3, under 24 h left) meta-statuses apply to open tasks only. */
export function subStatus(task: TaskRecord, nowSec: number): number {
  const open = task.status !== 5 && task.status !== 6 && task.status !== 7 && task.status !== 4;
  if (open && task.deadline !== null) {
    if (task.deadline < nowSec) return -1;
    if (task.deadline - nowSec < 86400) return -3;
  }
  return task.status;
}

function actionMap(task: TaskRecord, userId: number): Record<string, boolean> {
  const edit = canEdit(task, userId);
  const s = task.status;
  const isCreator = task.createdBy === userId;
  const rights: Record<string, boolean> = {
    accept: false,
    decline: false,
    complete: edit && s !== 5 && s !== 4,
    approve: s === 4 && isCreator,
    disapprove: s === 4 && isCreator,
    start: edit && (s === 1 || s === 2),
    pause: edit && s === 3,
    delegate: edit && s !== 5,
    remove: edit && isCreator,
    edit,
    defer: edit && (s === 2 || s === 3),
    renew: edit && (s === 5 || s === 6),
    create: true,
    changeDeadline: edit,
    checklistAddItems: edit,
    addFavorite: true,
    deleteFavorite: false,
    rate: edit,
    take: false,
    "edit.originator": false,
    "checklist.reorder": edit,
    "elapsedtime.add": edit,
    "dayplan.timer.toggle": false,
    "edit.plan": edit,
    "checklist.add": edit,
    "favorite.add": true,
    "favorite.delete": false,
  };
  for (const r of task.deniedRights ?? []) if (r in rights) rights[r] = false;
  return rights;
}

/** Whether `changes` touch a field whose narrower right the task denies (of the fields the emulator stores, only the deadline has one). */
export function deniedChange(task: TaskRecord, changes: { deadline?: unknown }): boolean {
  return changes.deadline !== undefined && (task.deniedRights ?? []).includes("changeDeadline");
}

function groupObject(store: Store, groupId: number): Record<string, unknown> | [] {
  if (groupId === 0) return [];
  const g = store.getGroup(groupId);
  if (!g) return [];
  return {
    id: String(g.id),
    name: g.name,
    opened: g.opened,
    membersCount: g.members?.length ?? store.allUsers().length,
    image: "",
    additionalData: [],
  };
}

/**
 * Stored task fields keyed by the UPPER_SNAKE name a caller puts in `select`, in the order the portal prints them.
 * The camelCase output key is derived from the UPPER name, like the controller's convertKeysToCamelCase.
 */
const FIELD_GETTERS: [string, (t: TaskRecord) => unknown][] = [
  ["ID", (t) => String(t.id)],
  ["PARENT_ID", (t) => str(t.parentId)],
  ["TITLE", (t) => t.title],
  ["DESCRIPTION", (t) => t.description],
  ["MARK", () => null],
  ["PRIORITY", (t) => String(t.priority)],
  ["MULTITASK", () => "N"],
  ["NOT_VIEWED", () => "N"],
  ["REPLICATE", () => "N"],
  ["STAGE_ID", () => "0"],
  ["SPRINT_ID", () => null],
  ["BACKLOG_ID", () => null],
  ["CREATED_BY", (t) => String(t.createdBy)],
  ["CREATED_DATE", (t) => formatPortalDate(t.createdDate)],
  ["RESPONSIBLE_ID", (t) => String(t.responsibleId)],
  ["CHANGED_BY", (t) => String(t.changedBy)],
  ["CHANGED_DATE", (t) => formatPortalDate(t.changedDate)],
  ["STATUS_CHANGED_BY", (t) => str(t.statusChangedBy)],
  ["CLOSED_BY", (t) => str(t.closedBy)],
  ["CLOSED_DATE", (t) => formatNullableDate(t.closedDate)],
  ["ACTIVITY_DATE", (t) => formatPortalDate(t.activityDate)],
  ["DATE_START", (t) => formatNullableDate(t.dateStart)],
  ["DEADLINE", (t) => formatNullableDate(t.deadline)],
  ["START_DATE_PLAN", () => null],
  ["END_DATE_PLAN", () => null],
  ["GUID", (t) => t.guid],
  ["XML_ID", () => null],
  // null while the task has no comments (as recorded), then the count as a string.
  ["COMMENTS_COUNT", (t) => (t.commentsCount ? String(t.commentsCount) : null)],
  ["SERVICE_COMMENTS_COUNT", () => null],
  ["ALLOW_CHANGE_DEADLINE", () => "N"],
  ["ALLOW_TIME_TRACKING", () => "N"],
  ["TASK_CONTROL", () => "N"],
  ["ADD_IN_REPORT", () => "N"],
  ["FORKED_BY_TEMPLATE_ID", () => null],
  ["TIME_ESTIMATE", () => "0"],
  ["TIME_SPENT_IN_LOGS", () => null],
  ["MATCH_WORK_TIME", () => "N"],
  ["FORUM_TOPIC_ID", () => null],
  ["FORUM_ID", () => null],
  ["SITE_ID", () => "s1"],
  ["SUBORDINATE", () => "N"],
  ["EXCHANGE_MODIFIED", () => null],
  ["EXCHANGE_ID", () => null],
  ["OUTLOOK_VERSION", () => "1"],
  ["VIEWED_DATE", () => null],
  ["SORTING", () => null],
  ["DURATION_FACT", () => null],
  ["IS_MUTED", () => "N"],
  ["IS_PINNED", () => "N"],
  ["IS_PINNED_IN_GROUP", () => "N"],
  ["FLOW_ID", () => null],
  ["DESCRIPTION_IN_BBCODE", () => "Y"],
  ["STATUS", (t) => String(t.status)],
  ["STATUS_CHANGED_DATE", (t) => formatNullableDate(t.statusChangedDate)],
  ["DURATION_PLAN", () => null],
  ["DURATION_TYPE", () => "days"],
  ["FAVORITE", () => "N"],
  ["GROUP_ID", (t) => String(t.groupId)],
  ["AUDITORS", (t) => t.auditors.map(String)],
  ["ACCOMPLICES", (t) => t.accomplices.map(String)],
];

const UF_FIELDS = ["UF_CRM_TASK", "UF_TASK_WEBDAV_FILES", "UF_MAIL_MESSAGE"];
function camelOf(upper: string): string {
  return upper.toLowerCase().replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** Select entries may come as UPPER_SNAKE or camelCase (the docs mix `subStatus` into a select list). */
export function normaliseSelectKey(key: string): string {
  const upper =
    /[a-z]/.test(key) && !key.includes("_")
      ? key.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase()
      : key.toUpperCase();
  return upper === "REAL_STATUS" ? "STATUS" : upper;
}

export interface ShapeOptions {
  /** Normalised UPPER_SNAKE keys, or null for the default (all stored non-UF fields). */
  select: Set<string> | null;
  /** `get`/`update`/`add` answers add checklist data and `action`; list items add `subStatus` instead. */
  mode: "single" | "list";
  userId: number;
  nowSec: number;
}

function participantsData(store: Store, ids: number[]): Record<string, unknown> | unknown[] {
  return phpAssoc(ids.map((id) => [String(id), userRef(store, id)]));
}

/** Renders a stored task the way `tasks.task.get` / `tasks.task.list` print it (camelCase keys, string values). */
export function renderTask(store: Store, task: TaskRecord, opts: ShapeOptions): Record<string, unknown> {
  const all = opts.select === null || opts.select.has("*");
  const wants = (k: string) => all || (opts.select?.has(k) ?? false);
  const out: Record<string, unknown> = {};
  for (const [key, get] of FIELD_GETTERS) {
    // A narrowed select always keeps ID; `get` appends FAVORITE; DESCRIPTION brings its BBCode flag along.
    const forced =
      key === "ID" ||
      (key === "FAVORITE" && opts.mode === "single") ||
      (key === "DESCRIPTION_IN_BBCODE" && wants("DESCRIPTION"));
    if (wants(key) || forced) out[camelOf(key)] = get(task);
  }
  if (opts.mode === "single" && all) out.checklist = [];
  out.group = groupObject(store, task.groupId);
  if (wants("CREATED_BY")) out.creator = userRef(store, task.createdBy);
  if (wants("RESPONSIBLE_ID")) out.responsible = userRef(store, task.responsibleId);
  if (wants("ACCOMPLICES")) out.accomplicesData = participantsData(store, task.accomplices);
  if (wants("AUDITORS")) out.auditorsData = participantsData(store, task.auditors);
  const selectedUf =
    opts.select !== null && (opts.select.has("*") || UF_FIELDS.some((f) => opts.select?.has(f)));
  if (selectedUf) {
    // Selecting any one of the three UF fields returns all three; empty UF values print as false/null.
    out.ufCrmTask = false;
    out.ufTaskWebdavFiles = false;
    out.ufMailMessage = null;
  }
  if (opts.mode === "single") {
    if (all) out.newCommentsCount = 0;
    out.action = actionMap(task, opts.userId);
    if (all) {
      out.checkListTree = {
        nodeId: 0,
        fields: {
          id: null,
          copiedId: null,
          entityId: null,
          userId: opts.userId,
          createdBy: null,
          parentId: null,
          title: "",
          sortIndex: null,
          displaySortIndex: "",
          isComplete: false,
          isImportant: false,
          completedCount: 0,
          members: [],
          attachments: [],
          nodeId: null,
        },
        action: [],
        descendants: [],
      };
      out.checkListCanAdd = canEdit(task, opts.userId);
    }
  } else {
    if (all) out.newCommentsCount = 0;
    out.subStatus = String(subStatus(task, opts.nowSec));
  }
  return out;
}
