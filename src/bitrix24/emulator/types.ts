import { z } from "zod";

const UserIdSchema = z.number().int().positive();

// Dates in a seed are any ISO 8601 string with an offset; they are stored as unix seconds.
const SeedDateSchema = z.string().refine((s) => /([+-]\d{2}:\d{2}|Z)$/.test(s) && !Number.isNaN(Date.parse(s)), {
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

export const EmulatorSeedSchema = z
  .object({
    users: z.array(SeedUserSchema).min(1),
    groups: z.array(SeedGroupSchema).default([]),
    tasks: z.array(SeedTaskSchema).default([]),
  })
  .superRefine((seed, ctx) => {
    const userIds = new Set(seed.users.map((u) => u.id));
    const groupIds = new Set(seed.groups.map((g) => g.id));
    const dup = (ids: number[]) => ids.find((id, i) => ids.indexOf(id) !== i);
    const dupUser = dup(seed.users.map((u) => u.id));
    if (dupUser !== undefined) ctx.addIssue({ code: "custom", message: `duplicate user id ${dupUser}`, path: ["users"] });
    const dupTask = dup(seed.tasks.map((t) => t.id));
    if (dupTask !== undefined) ctx.addIssue({ code: "custom", message: `duplicate task id ${dupTask}`, path: ["tasks"] });
    seed.tasks.forEach((t, i) => {
      const refs = [t.createdBy, t.responsibleId, t.changedBy ?? t.createdBy, ...t.auditors, ...t.accomplices,
        ...(t.readableBy ?? []), ...(t.editableBy ?? [])];
      for (const id of refs) {
        if (!userIds.has(id)) ctx.addIssue({ code: "custom", message: `task ${t.id} refers to unknown user ${id}`, path: ["tasks", i] });
      }
      if (t.groupId !== 0 && !groupIds.has(t.groupId)) {
        ctx.addIssue({ code: "custom", message: `task ${t.id} refers to unknown group ${t.groupId}`, path: ["tasks", i, "groupId"] });
      }
    });
  });

/** What a caller writes (defaults may be omitted). */
export type EmulatorSeed = z.input<typeof EmulatorSeedSchema>;
/** A seed after validation, every default filled in. */
export type ParsedSeed = z.output<typeof EmulatorSeedSchema>;
export type SeedUser = z.output<typeof SeedUserSchema>;
export type SeedGroup = z.output<typeof SeedGroupSchema>;

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
  /** What the `scope` method reports for the webhook (default: task, user). */
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
