/**
 * Tools the model may "call" that the graph interprets rather than executes: the proposal and the
 * structured-input question. Neither touches Bitrix24.
 */
import { tool } from "@langchain/core/tools";
import { z } from "zod";
import { MAX_SET_ACTIONS } from "../envelope/change-set.js";
import { OPERATIONS, PROPOSABLE_OPERATIONS } from "../envelope/operations.js";

/** The object an action names must be the kind its operation acts on: taskId for a task's, dealId for update_deal. */
function oneObject(
  a: {
    operation: (typeof PROPOSABLE_OPERATIONS)[number];
    taskId?: number | undefined;
    dealId?: number | undefined;
  },
  ctx: z.RefinementCtx,
): void {
  if (OPERATIONS[a.operation].effect === "create") {
    // A create names no existing object: the target makes one.
    for (const k of ["taskId", "dealId"] as const)
      if (a[k] !== undefined)
        ctx.addIssue({
          code: "custom",
          path: [k],
          message: `${a.operation} creates a new ${OPERATIONS[a.operation].target}; it names no ${k}`,
        });
    return;
  }
  const want = OPERATIONS[a.operation].idArg;
  const other = want === "taskId" ? "dealId" : "taskId";
  if (a[want] === undefined)
    ctx.addIssue({
      code: "custom",
      path: [want],
      message: `${a.operation} names its ${OPERATIONS[a.operation].target} by ${want}`,
    });
  if (a[other] !== undefined)
    ctx.addIssue({
      code: "custom",
      path: [other],
      message: `${a.operation} acts on a ${OPERATIONS[a.operation].target}; ${other} does not belong here`,
    });
}

/** The object id of a parsed proposal or action, whichever kind it names. */
export function objectIdOf(a: { taskId?: number | undefined; dealId?: number | undefined }): number {
  // 0 for a create (add_task): the object does not exist yet.
  return a.dealId ?? a.taskId ?? 0;
}

/** What one action names: the operation, its object (taskId or dealId) and the fields. */
const ActionShape = {
  // Deletes are not offered: only an undo proposes one, built by code (src/hitl/compensation.ts).
  operation: z
    .enum(PROPOSABLE_OPERATIONS)
    .default("update_task")
    .describe(
      "update_task: change fields of the task; add_task_comment: post a comment on the task (fields: {POST_MESSAGE: the full text}); update_deal: change fields of a CRM deal (dealId; fields STAGE_ID, OPPORTUNITY, ASSIGNED_BY_ID, …); add_task: create a new task (no taskId; fields TITLE and RESPONSIBLE_ID at least)",
    ),
  taskId: z.number().int().positive().optional().describe("Bitrix24 task id (update_task, add_task_comment)"),
  dealId: z.number().int().positive().optional().describe("Bitrix24 CRM deal id (update_deal)"),
  fields: z
    .record(z.string().regex(/^[A-Z][A-Z0-9_]*$/, "field names are Bitrix24 UPPER_SNAKE keys"), z.unknown())
    .refine((f) => Object.keys(f).length > 0, "at least one field to change")
    .describe(
      "update_task / update_deal: fields to write, UPPER_SNAKE keys (TITLE, DEADLINE, PRIORITY, STATUS, RESPONSIBLE_ID, STAGE_ID, ...) with full final values; add_task_comment: {POST_MESSAGE}",
    ),
};

export const ProposalArgsSchema = z
  .object({ ...ActionShape, rationale: z.string().min(1).describe("Why this change, citing what you read") })
  .superRefine(oneObject);

export const proposeChangeTool = tool(
  async () => "proposal recorded; it will be checked and shown to a human",
  {
    name: "propose_change",
    description:
      "Propose exactly one change to one Bitrix24 task: an update of its fields, or a comment on it. Nothing is written until a human approves the exact change.",
    schema: ProposalArgsSchema,
  },
);

/**
 * One action of a change set: the same shape as a single proposal, without its own rationale. A set
 * acts on tasks only (its schema, src/envelope/change-set.ts); a deal's change is proposed on its own.
 */
export const ProposedActionSchema = z
  .object(ActionShape)
  .superRefine(oneObject)
  .superRefine((a, ctx) => {
    if (OPERATIONS[a.operation].target !== "task")
      ctx.addIssue({
        code: "custom",
        path: ["operation"],
        message: `a change set acts on tasks only; ${a.operation} acts on a ${OPERATIONS[a.operation].target}: propose it on its own with propose_change`,
      });
  });

export const ChangeSetArgsSchema = z.object({
  actions: z
    .array(ProposedActionSchema)
    .min(2, "a change set has at least 2 actions; propose a single change with propose_change")
    .max(MAX_SET_ACTIONS, `a change set has at most ${MAX_SET_ACTIONS} actions`)
    .describe(
      "The actions in the order they are to run. Execution stops at the first one that is not verified; put irreversible ones last.",
    ),
  rationale: z.string().min(1).describe("Why these changes, citing what you read"),
});

export const proposeChangeSetTool = tool(
  async () => "change set recorded; it will be checked and shown to a human",
  {
    name: "propose_change_set",
    description:
      "Propose several changes that belong together (e.g. move a task to review, reassign it, and comment on it) as one change set: approved together, run in order, stopping at the first one that does not verify. Use propose_change for a single change.",
    schema: ChangeSetArgsSchema,
  },
);

export const RequestInputArgsSchema = z.object({
  question: z.string().min(1),
  fields: z.record(
    z.string(),
    z.object({
      type: z.enum(["string", "number", "enum"]),
      description: z.string().optional(),
      choices: z.array(z.string()).optional(),
    }),
  ),
});

export const requestInputTool = tool(async () => "question recorded; a human will answer", {
  name: "request_input",
  description:
    "Ask the human for a missing value or a choice (e.g. which of several matching tasks) instead of guessing.",
  schema: RequestInputArgsSchema,
});
