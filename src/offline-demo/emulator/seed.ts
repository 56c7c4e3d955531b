import { readFileSync } from "node:fs";
import {
  EmulatorSeedSchema,
  type CommentRecord,
  type DealRecord,
  type EmulatorSeed,
  type HistoryRecord,
  type ParsedSeed,
  type TaskRecord,
} from "./types.js";

/** Thrown when a seed file or object does not match the seed schema. */
export class SeedError extends Error {
  constructor(source: string, detail: string) {
    super(
      `invalid emulator seed (${source}): expected {users, groups?, tasks?, deals?, comments?} as documented; ${detail}`,
    );
    this.name = "SeedError";
  }
}

export function parseSeed(input: unknown, source = "seed object"): ParsedSeed {
  const parsed = EmulatorSeedSchema.safeParse(input);
  if (!parsed.success) {
    const detail = parsed.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ");
    throw new SeedError(source, detail);
  }
  return parsed.data;
}

/** Reads and validates a JSON seed file (for the CLI's `--seed`). */
export function loadSeedFile(path: string): EmulatorSeed {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new SeedError(path, `could not read the file: ${(e as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new SeedError(path, `the file is not JSON: ${(e as Error).message}`);
  }
  return parseSeed(json, path);
}

/** A seeded user; every address is the login at example.test. */
function person(
  id: number,
  name: string,
  lastName: string,
  login: string,
  workPosition: string,
  extra: { admin?: boolean; active?: boolean } = {},
): EmulatorSeed["users"][number] {
  return { id, name, lastName, login, email: `${login}@example.test`, workPosition, ...extra };
}

/** A small synthetic portal: ten users (one dismissed), two workgroups, eight tasks with a mix of access rules, four deals. */
export function defaultSeed(): EmulatorSeed {
  return {
    users: [
      person(1, "Anna", "Petrova", "anna.petrova", "Portal administrator", { admin: true }),
      person(2, "Ivan", "Sokolov", "ivan.sokolov", "Project manager"),
      person(3, "Maria", "Volkova", "maria.volkova", "Developer"),
      person(4, "Dmitry", "Orlov", "dmitry.orlov", "QA engineer"),
      person(5, "Elena", "Kuznetsova", "elena.kuznetsova", "Operations lead"),
      person(6, "Pavel", "Smirnov", "pavel.smirnov", "Chief accountant"),
      // Names that make user lookups interesting: one active Bob Smith (and a dismissed namesake), two Alex Morgans.
      person(7, "Bob", "Smith", "bob.smith", "Sales manager"),
      person(8, "Alex", "Morgan", "alex.morgan", "Support engineer"),
      person(9, "Alex", "Morgan", "alex.morgan2", "Designer"),
      person(10, "Bob", "Smith", "bob.smith.old", "Sales manager", { active: false }),
    ],
    groups: [
      // Members fixed at the six original users, so a group's membersCount (part of every task answer,
      // and so of every envelope's fingerprints) does not move when users are added to the seed.
      { id: 1, name: "Operations", opened: true, members: [1, 2, 3, 4, 5, 6] },
      { id: 3, name: "Agent Lab", opened: false, members: [1, 2, 3, 4, 5, 6] },
    ],
    tasks: [
      {
        id: 1,
        title: "Prepare Q4 vendor report",
        description: "Collect vendor spend for October and November.",
        createdBy: 2,
        responsibleId: 2,
        createdDate: "2026-11-02T09:15:00+03:00",
        changedDate: "2026-11-18T16:40:12+03:00",
        deadline: "2026-12-10T18:00:00+03:00",
        priority: 1,
        status: 3,
        groupId: 1,
        auditors: [1],
        accomplices: [6],
      },
      {
        id: 2,
        title: "Update onboarding checklist",
        description: "Add the security training step.",
        createdBy: 1,
        responsibleId: 3,
        createdDate: "2026-11-03T11:00:00+03:00",
        changedDate: "2026-11-10T12:05:44+03:00",
        deadline: "2026-11-20T18:00:00+03:00",
        priority: 1,
        status: 2,
        groupId: 0,
      },
      {
        id: 3,
        title: "Fix invoice export rounding",
        description: "Totals differ by one kopeck on large invoices.",
        createdBy: 4,
        responsibleId: 3,
        createdDate: "2026-11-04T10:30:00+03:00",
        changedDate: "2026-11-12T17:22:03+03:00",
        deadline: "2026-11-14T18:00:00+03:00",
        priority: 2,
        status: 5,
        groupId: 1,
        auditors: [4],
      },
      {
        id: 4,
        title: "LAB-AGENT-EXEC-002 - BOUND ACTION TEST",
        description:
          "Test task for the action envelope: an agent proposes a change, a human approves it, and exactly that change is executed.",
        createdBy: 1,
        responsibleId: 5,
        createdDate: "2026-11-16T10:00:00+03:00",
        changedDate: "2026-11-25T14:30:05+03:00",
        changedBy: 1,
        deadline: "2026-12-15T18:00:00+03:00",
        priority: 1,
        status: 2,
        groupId: 3,
        auditors: [2, 6],
        accomplices: [3],
      },
      {
        id: 5,
        title: "Migrate CRM contact tags",
        description: "Map the old tag list onto the new contact categories.",
        createdBy: 2,
        responsibleId: 4,
        createdDate: "2026-11-05T13:45:00+03:00",
        changedDate: "2026-11-19T09:01:30+03:00",
        deadline: null,
        priority: 2,
        status: 2,
        groupId: 1,
      },
      {
        id: 6,
        title: "Payroll reconciliation for November",
        description: "Reconcile payroll with the bank statement.",
        createdBy: 6,
        responsibleId: 6,
        createdDate: "2026-11-06T08:30:00+03:00",
        changedDate: "2026-11-24T11:11:11+03:00",
        deadline: "2026-12-05T18:00:00+03:00",
        priority: 1,
        status: 3,
        groupId: 0,
        auditors: [1],
        readableBy: [1, 6],
        editableBy: [6],
      },
      {
        id: 7,
        title: "Confidential: salary review 2027",
        description: "Salary bands for next year.",
        createdBy: 6,
        responsibleId: 5,
        createdDate: "2026-11-07T15:00:00+03:00",
        changedDate: "2026-11-21T10:20:30+03:00",
        deadline: "2026-12-20T18:00:00+03:00",
        priority: 2,
        status: 2,
        groupId: 0,
        readableBy: [5, 6],
        editableBy: [6],
      },
      {
        id: 8,
        title: "LAB-AGENT-EXEC-003 - DEFERRED FOLLOW-UP",
        description: "Follow-up check after the bound action test.",
        createdBy: 1,
        responsibleId: 1,
        createdDate: "2026-11-17T12:00:00+03:00",
        changedDate: "2026-11-26T18:45:00+03:00",
        deadline: "2026-12-22T18:00:00+03:00",
        priority: 0,
        status: 6,
        groupId: 3,
        auditors: [5],
      },
    ],
    // CRM deals of the general funnel, in RUB; assignees among the users above. No comments are seeded, so every
    // task's commentsCount stays null (as in the recorded answers) until a test adds one.
    deals: [
      {
        id: 1,
        title: "Office chairs for the Kazan branch",
        typeId: "GOODS",
        stageId: "NEW",
        probability: 20,
        opportunity: 5000,
        companyId: 1,
        contactId: 3,
        assignedById: 7,
        createdById: 2,
        dateCreate: "2026-11-05T10:00:00+03:00",
        dateModify: "2026-11-05T10:00:00+03:00",
        begindate: "2026-11-05T00:00:00+03:00",
        closedate: "2026-12-15T00:00:00+03:00",
      },
      {
        id: 2,
        title: "Annual support contract: Volga Logistics",
        typeId: "SERVICE",
        stageId: "PREPARATION",
        probability: 50,
        opportunity: 120000,
        companyId: 2,
        contactId: 4,
        assignedById: 5,
        createdById: 5,
        dateCreate: "2026-11-10T12:30:00+03:00",
        dateModify: "2026-11-20T15:45:10+03:00",
        begindate: "2026-11-10T00:00:00+03:00",
        closedate: "2026-12-31T00:00:00+03:00",
        comments: "Waiting for the signed NDA.",
      },
      {
        id: 3,
        title: "LAB-DEAL-EXEC-001 - BOUND DEAL TEST",
        typeId: "SALE",
        stageId: "EXECUTING",
        probability: 80,
        opportunity: 48500.5,
        companyId: 1,
        contactId: null,
        assignedById: 2,
        createdById: 1,
        modifyById: 1,
        dateCreate: "2026-11-16T09:00:00+03:00",
        dateModify: "2026-11-25T14:30:05+03:00",
        begindate: "2026-11-16T00:00:00+03:00",
        closedate: "2026-12-20T00:00:00+03:00",
      },
      {
        id: 4,
        title: "Payroll software licences",
        typeId: "SALE",
        stageId: "NEW",
        probability: null,
        opportunity: 0,
        assignedById: 6,
        createdById: 6,
        dateCreate: "2026-11-24T11:11:11+03:00",
        dateModify: "2026-11-24T11:11:11+03:00",
        readableBy: [1, 6],
        editableBy: [6],
      },
    ],
  };
}

/** STAGE_ID decides STAGE_SEMANTIC_ID and CLOSED: WON is a success, LOSE and APOLOGY a failure, the rest in progress. */
export function stageSemantics(stageId: string): { semantic: "P" | "S" | "F"; closed: boolean } {
  if (stageId === "WON") return { semantic: "S", closed: true };
  if (stageId === "LOSE" || stageId === "APOLOGY") return { semantic: "F", closed: true };
  return { semantic: "P", closed: false };
}

export function seedDealRecords(seed: ParsedSeed): DealRecord[] {
  return seed.deals.map((d): DealRecord => {
    const modified = toSeconds(d.dateModify);
    const modifyBy = d.modifyById ?? d.createdById;
    return {
      id: d.id,
      title: d.title,
      typeId: d.typeId,
      stageId: d.stageId,
      probability: d.probability,
      currencyId: d.currencyId,
      opportunity: d.opportunity,
      isManualOpportunity: false,
      taxValue: null,
      companyId: d.companyId,
      contactId: d.contactId,
      begindate: d.begindate === null ? null : toSeconds(d.begindate),
      closedate: d.closedate === null ? null : toSeconds(d.closedate),
      assignedById: d.assignedById,
      createdById: d.createdById,
      modifyById: modifyBy,
      dateCreate: toSeconds(d.dateCreate),
      dateModify: modified,
      opened: d.opened,
      comments: d.comments,
      additionalInfo: null,
      sourceId: d.sourceId,
      sourceDescription: null,
      movedById: modifyBy,
      movedTime: modified,
      lastActivityTime: modified,
      lastActivityBy: modifyBy,
      readableBy: d.readableBy ?? null,
      editableBy: d.editableBy ?? null,
    };
  });
}

/** Seeded comments, ids 1..n in seed order (each task's count of them is set by seedTaskRecords). */
export function seedCommentRecords(seed: ParsedSeed): CommentRecord[] {
  return seed.comments.map((c, i) => ({
    id: i + 1,
    taskId: c.taskId,
    authorId: c.authorId,
    postDate: toSeconds(c.postDate),
    message: c.message,
  }));
}

const toSeconds = (iso: string) => Date.parse(iso) / 1000;

/** Turns validated seed tasks into store records, plus a NEW history row per task like the portal writes on creation. */
export function seedTaskRecords(seed: ParsedSeed): {
  tasks: TaskRecord[];
  history: Omit<HistoryRecord, "id">[];
} {
  const tasks = seed.tasks.map((t): TaskRecord => {
    const commentsCount = seed.comments.filter((c) => c.taskId === t.id).length;
    const created = toSeconds(t.createdDate);
    const changed = toSeconds(t.changedDate);
    const changedBy = t.changedBy ?? t.createdBy;
    return {
      id: t.id,
      parentId: t.parentId,
      title: t.title,
      description: t.description,
      priority: t.priority,
      status: t.status,
      createdBy: t.createdBy,
      createdDate: created,
      responsibleId: t.responsibleId,
      changedBy,
      changedDate: changed,
      statusChangedBy: t.status === 2 ? null : changedBy,
      statusChangedDate: changed,
      closedBy: t.status === 5 ? t.responsibleId : null,
      closedDate: t.status === 5 ? changed : null,
      activityDate: changed,
      dateStart: t.status === 3 || t.status === 5 ? created : null,
      deadline: t.deadline === null ? null : toSeconds(t.deadline),
      guid: guidFor(t.id),
      groupId: t.groupId,
      auditors: t.auditors,
      accomplices: t.accomplices,
      readableBy: t.readableBy ?? null,
      editableBy: t.editableBy ?? null,
      ...(commentsCount > 0 ? { commentsCount } : {}),
    };
  });
  const history = tasks.map((t) => ({
    taskId: t.id,
    createdDate: t.createdDate,
    field: "NEW",
    from: null,
    to: null,
    userId: t.createdBy,
  }));
  return { tasks, history };
}

/** Deterministic GUIDs keep seeded portals byte-identical across runs. */
export function guidFor(taskId: number): string {
  const hex = taskId.toString(16).padStart(12, "0");
  return `{7a5e0000-0000-4000-8000-${hex}}`;
}
