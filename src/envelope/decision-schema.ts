/** The shape of a human decision (the resume value item) as it is parsed, before any check against what it answers. */
import { z } from "zod";
import { HASH_PATTERN } from "./canonical.js";
import { operationSpec } from "./operations.js";

/** Ids are short; a longer one is refused (MALFORMED) rather than carried into records. */
export const MAX_ID_CHARS = 128;
const Approver = z.strictObject({
  id: z
    .string()
    .min(1)
    .max(MAX_ID_CHARS, `approver id is at most ${MAX_ID_CHARS} characters`)
    .regex(/^\S+$/, "approver id has no whitespace"),
});
const Base = {
  envelopeHash: z.string().regex(HASH_PATTERN, 'envelopeHash is "sha256:" + 64 lowercase hex digits'),
  nonce: z.string().min(1).max(MAX_ID_CHARS),
  approver: Approver,
  decidedAt: z.iso.datetime({ offset: true }).optional(),
  /** Base64 Ed25519 signature over the canonical SignedDecisionPayload. */
  signature: z.string().min(1).optional(),
  /** For a change set decided action by action: the action (a1, a2, …) this decision is about. */
  actionId: z
    .string()
    .regex(/^a[1-9][0-9]?$/, "actionId is a1, a2, … as the change set lists them")
    .optional(),
};

export const DecisionSchema = z.discriminatedUnion("type", [
  z.strictObject({
    type: z.literal("approve"),
    ...Base,
    /** Ask to pass a gate that policy lets an authorised role override (only separation_of_duties today). */
    override: z
      .strictObject({
        gate: z.string().min(1).max(MAX_ID_CHARS),
        reason: z
          .string()
          .trim()
          .min(1, "an override needs a reason")
          .max(4000, "an override reason is at most 4,000 characters"),
      })
      .optional(),
  }),
  z.strictObject({
    type: z.literal("reject"),
    ...Base,
    message: z.string().max(4000, "a rejection message is at most 4,000 characters").optional(),
  }),
  z.strictObject({
    type: z.literal("edit"),
    ...Base,
    editedAction: z
      .strictObject({
        name: z.string().min(1),
        // The object's id under the operation's own name: taskId for a task's, dealId for update_deal. A
        // create (add_task) names no object: its args are {fields} as shown (taskId 0 is read the same).
        args: z.strictObject({
          taskId: z.int().nonnegative().optional(),
          dealId: z.int().nonnegative().optional(),
          fields: z.record(z.string(), z.json()),
        }),
      })
      .superRefine((a, ctx) => {
        if (operationSpec(a.name)?.effect === "create") return; // which id, if any, is judged against the envelope (OUT_OF_SCOPE)
        if ((a.args.taskId === undefined) === (a.args.dealId === undefined)) {
          ctx.addIssue({
            code: "custom",
            path: ["args"],
            message: "name the edited object by exactly one of taskId (a task) or dealId (a deal)",
          });
        }
        for (const k of ["taskId", "dealId"] as const) {
          if (a.args[k] === 0)
            ctx.addIssue({
              code: "custom",
              path: ["args", k],
              message: "Too small: expected number to be >0",
            });
        }
      }),
  }),
]);

/** A decision as DecisionSchema parses it. */
export type Decision = z.output<typeof DecisionSchema>;
