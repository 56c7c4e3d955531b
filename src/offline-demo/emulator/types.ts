import { z } from "zod";

const UserIdSchema = z.number().int().positive();

// Dates in a seed are any ISO 8601 string with an offset; they are stored as unix seconds.
const SeedDateSchema = z
  .string()
  .refine((s) => /([+-]\d{2}:\d{2}|Z)$/.test(s) && !Number.isNaN(Date.parse(s)), {
    message: "expected an ISO 8601 date with an offset, e.g. 2026-11-20T10:00:00+03:00",
  });

export const SeedUserSchema = z.object({
  id: UserIdSchema,
  name: z.string().min(1),
  lastName: z.string().default(""),
  secondName: z.string().default(""),
  login: z.string().min(1),
  email: z.string().default(""),
  workPosition: z.string().nullable().default(null),
  /** false = dismissed: still returned by user.get, excluded by its ACTIVE=true filter. */
  active: z.boolean().default(true),
  /** A portal administrator: may delete other people's task comments (task.commentitem.delete). */
  admin: z.boolean().default(false),
});

export const SeedGroupSchema = z.object({
  id: z.number().int().positive(),
  name: z.string().min(1),
  opened: z.boolean().default(false),
  /** The group's members (user ids); its membersCount. Without it every user of the portal is a member. */
  members: z.array(z.number().int().positive()).optional(),
});

export const SeedTaskSchema = z.object({
  id: z.number().int().positive(),
  title: z.string().min(1),
  description: z.string().default(""),
  createdBy: UserIdSchema,
  responsibleId: UserIdSchema,
  createdDate: SeedDateSchema,
  changedDate: SeedDateSchema,
  changedBy: UserIdSchema.optional(),
  deadline: SeedDateSchema.nullable().default(null),
  priority: z.number().int().min(0).max(2).default(1),
  status: z.number().int().min(1).max(7).default(2),
  groupId: z.number().int().min(0).default(0),
  auditors: z.array(UserIdSchema).default([]),
  accomplices: z.array(UserIdSchema).default([]),
  parentId: z.number().int().positive().nullable().default(null),
  /** Users who may read the task; omitted = every user of the portal. */
  readableBy: z.array(UserIdSchema).optional(),
  /** Users who may edit the task; omitted = every user who may read it. */
  editableBy: z.array(UserIdSchema).optional(),
});

/** Deal stages of the general sales funnel (CATEGORY_ID 0), as crm.status.list ENTITY_ID DEAL_STAGE lists them. */
export const DEAL_STAGES = [
  "NEW",
  "PREPARATION",
  "PREPAYMENT_INVOICE",
  "EXECUTING",
  "FINAL_INVOICE",
  "WON",
  "LOSE",
  "APOLOGY",
] as const;
export const DEAL_CURRENCIES = ["RUB", "USD", "EUR"] as const;

export const SeedDealSchema = z.object({
  id: z.number().int().positive(),
  title: z.string().min(1),
  typeId: z.string().default("SALE"),
  stageId: z.enum(DEAL_STAGES).default("NEW"),
  probability: z.number().int().min(0).max(100).nullable().default(null),
  currencyId: z.enum(DEAL_CURRENCIES).default("RUB"),
  /** The amount; printed with two decimals ("5000.00"). */
  opportunity: z.number().min(0).default(0),
  companyId: z.number().int().positive().nullable().default(null),
  contactId: z.number().int().positive().nullable().default(null),
  assignedById: UserIdSchema,
  createdById: UserIdSchema,
  modifyById: UserIdSchema.optional(),
  dateCreate: SeedDateSchema,
  dateModify: SeedDateSchema,
  begindate: SeedDateSchema.nullable().default(null),
  closedate: SeedDateSchema.nullable().default(null),
  comments: z.string().nullable().default(null),
  opened: z.boolean().default(true),
  sourceId: z.string().nullable().default(null),
  /** Users who may read the deal; omitted = every user of the portal. */
  readableBy: z.array(UserIdSchema).optional(),
  /** Users who may change the deal; omitted = every user who may read it. */
  editableBy: z.array(UserIdSchema).optional(),
});

/** A comment already on a task when the portal starts (task.commentitem.*). Ids are given in seed order from 1. */
export const SeedCommentSchema = z.object({
  taskId: z.number().int().positive(),
  authorId: UserIdSchema,
  postDate: SeedDateSchema,
  message: z.string().min(1),
});

export const EmulatorSeedSchema = z
  .object({
    users: z.array(SeedUserSchema).min(1),
    groups: z.array(SeedGroupSchema).default([]),
    tasks: z.array(SeedTaskSchema).default([]),
    deals: z.array(SeedDealSchema).default([]),
    comments: z.array(SeedCommentSchema).default([]),
  })
  .superRefine((seed, ctx) => {
    const issue = (message: string, path: (string | number)[]) =>
      ctx.addIssue({ code: "custom", message, path });
    const userIds = new Set(seed.users.map((u) => u.id));
    const groupIds = new Set(seed.groups.map((g) => g.id));
    const dup = (ids: number[]) => ids.find((id, i) => ids.indexOf(id) !== i);
    const dupUser = dup(seed.users.map((u) => u.id));
    if (dupUser !== undefined) issue(`duplicate user id ${dupUser}`, ["users"]);
    const dupTask = dup(seed.tasks.map((t) => t.id));
    if (dupTask !== undefined) issue(`duplicate task id ${dupTask}`, ["tasks"]);
    seed.tasks.forEach((t, i) => {
      const refs = [
        t.createdBy,
        t.responsibleId,
        t.changedBy ?? t.createdBy,
        ...t.auditors,
        ...t.accomplices,
        ...(t.readableBy ?? []),
        ...(t.editableBy ?? []),
      ];
      for (const id of refs)
        if (!userIds.has(id)) issue(`task ${t.id} refers to unknown user ${id}`, ["tasks", i]);
      if (t.groupId !== 0 && !groupIds.has(t.groupId))
        issue(`task ${t.id} refers to unknown group ${t.groupId}`, ["tasks", i, "groupId"]);
    });
    const dupDeal = dup(seed.deals.map((d) => d.id));
    if (dupDeal !== undefined) issue(`duplicate deal id ${dupDeal}`, ["deals"]);
    seed.deals.forEach((d, i) => {
      const refs = [
        d.assignedById,
        d.createdById,
        d.modifyById ?? d.createdById,
        ...(d.readableBy ?? []),
        ...(d.editableBy ?? []),
      ];
      for (const id of refs)
        if (!userIds.has(id)) issue(`deal ${d.id} refers to unknown user ${id}`, ["deals", i]);
    });
    const taskIds = new Set(seed.tasks.map((t) => t.id));
    seed.comments.forEach((c, i) => {
      if (!taskIds.has(c.taskId))
        issue(`comment ${i + 1} refers to unknown task ${c.taskId}`, ["comments", i]);
      if (!userIds.has(c.authorId))
        issue(`comment ${i + 1} refers to unknown user ${c.authorId}`, ["comments", i]);
    });
  });

/** What a caller writes (defaults may be omitted). */
export type EmulatorSeed = z.input<typeof EmulatorSeedSchema>;
/** A seed after validation, every default filled in. */
export type ParsedSeed = z.output<typeof EmulatorSeedSchema>;
export type SeedUser = z.output<typeof SeedUserSchema>;
export type SeedGroup = z.output<typeof SeedGroupSchema>;

/** The webhook's scopes when none are given. */
export const DEFAULT_SCOPES: readonly string[] = ["task", "user", "crm"];

export interface EmulatorOptions {
  port?: number;
  host?: string;
  userId?: number;
  code?: string;
  seed?: EmulatorSeed;
  rate?: number;
  burst?: number;
  statePath?: string;
  maxBodyBytes?: number;
  /** What the `scope` method reports for the webhook (default: task, user, crm). */
  scopes?: string[];
}

export interface RunningEmulator {
  port: number;
  baseUrl: string;
  webhookUrl: string;
  close(): Promise<void>;
}

/** A task as the store keeps it: numbers for ids/enums, unix seconds for dates. */
export interface TaskRecord {
  id: number;
  parentId: number | null;
  title: string;
  description: string;
  priority: number;
  status: number;
  createdBy: number;
  createdDate: number;
  responsibleId: number;
  changedBy: number;
  changedDate: number;
  statusChangedBy: number | null;
  statusChangedDate: number | null;
  closedBy: number | null;
  closedDate: number | null;
  activityDate: number;
  dateStart: number | null;
  deadline: number | null;
  guid: string;
  groupId: number;
  auditors: number[];
  accomplices: number[];
  readableBy: number[] | null;
  editableBy: number[] | null;
  /**
   * Rights in the task's `action` map refused to every user whatever editableBy says (changeDeadline,
   * edit.plan, edit.originator), set by `POST /_emulator/tasks/{id}/rights`; never in the seed. Absent: none.
   */
  deniedRights?: string[];
  /** Comments on the task (COMMENTS_COUNT, printed as null while there are none); absent = 0. */
  commentsCount?: number;
}

/** A deal as the store keeps it: numbers for ids and money, unix seconds for dates. */
export interface DealRecord {
  id: number;
  title: string;
  typeId: string;
  stageId: string;
  probability: number | null;
  currencyId: string;
  opportunity: number;
  isManualOpportunity: boolean;
  taxValue: number | null;
  companyId: number | null;
  contactId: number | null;
  begindate: number | null;
  closedate: number | null;
  assignedById: number;
  createdById: number;
  modifyById: number;
  dateCreate: number;
  dateModify: number;
  opened: boolean;
  comments: string | null;
  additionalInfo: string | null;
  sourceId: string | null;
  sourceDescription: string | null;
  movedById: number;
  movedTime: number;
  lastActivityTime: number;
  lastActivityBy: number;
  readableBy: number[] | null;
  editableBy: number[] | null;
}

/** A task comment (forum message) as the store keeps it. */
export interface CommentRecord {
  id: number;
  taskId: number;
  authorId: number;
  postDate: number;
  message: string;
}

export interface HistoryRecord {
  id: number;
  taskId: number;
  createdDate: number;
  field: string;
  from: string | null;
  to: string | null;
  userId: number;
}
