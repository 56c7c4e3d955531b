/**
 * The request fields of a run's input (request, requestedBy, scope, requesterSignature) and their
 * bounds, as Studio's input form shows them and the agent node checks them.
 */
import { z } from "zod";

/** Longest request text accepted; a longer one ends the run before any model call. */
export const MAX_REQUEST_CHARS = 4000;
/** Longest requester id accepted. */
export const MAX_REQUESTER_CHARS = 200;

/** What a run may be about, given with the request; never widened by the model. */
export const RequestScopeSchema = z
  .strictObject({
    taskIds: z
      .array(z.int().positive())
      .max(100)
      .optional()
      .describe("Bitrix24 task ids the request may change; any other task is out of scope."),
    dealIds: z
      .array(z.int().positive())
      .max(100)
      .optional()
      .describe(
        "Bitrix24 CRM deal ids the request may change (update_deal); any other deal is out of scope.",
      ),
    fields: z
      .array(
        z.string().regex(/^[A-Z][A-Z0-9_]*$/, "field names are UPPER_SNAKE, as in Bitrix24 (e.g. TITLE)"),
      )
      .max(50)
      .optional()
      .describe(
        "Task or deal fields (UPPER_SNAKE, e.g. TITLE, PRIORITY, STAGE_ID) the request may change; any other field is out of scope.",
      ),
  })
  .describe(
    "Optional. Task or deal ids and fields the request is about; derived from the request text by code when absent.",
  );

/** A required text field of the run input, of at most `max` characters; `required` when it is missing or blank. */
const requiredText = (field: string, required: string, max: number) =>
  z
    .string({
      error: (iss) =>
        iss.input === undefined || iss.input === null
          ? required
          : `input field "${field}" must be a string, not ${typeof iss.input}`,
    })
    .regex(/\S/, required)
    .max(max, `input field "${field}" is too long: at most ${max} characters are accepted`);

/**
 * The request fields of a run's input, as the agent node checks them on the thread's first turn.
 * (The server-side auth handler fills `requestedBy` with the authenticated caller when tokens are on.)
 */
export const RequestInputSchema = z.object({
  request: requiredText(
    "request",
    'input field "request" is required: a non-empty string saying what should change',
    MAX_REQUEST_CHARS,
  ).describe(
    'What should change, in your words, e.g. "rename task 4 to Q3 report". Required (in chat mode, the last human message).',
  ),
  requestedBy: requiredText(
    "requestedBy",
    'input field "requestedBy" is required: the id of the person asking (filled in from the API token when the server requires one)',
    MAX_REQUESTER_CHARS,
  ).describe(
    "Who is asking. Required, unless the server authenticates callers: then it is the caller's identity and may be left out.",
  ),
  scope: RequestScopeSchema.optional(),
  requesterSignature: z
    .string({ error: (iss) => `input field "requesterSignature" must be a string, not ${typeof iss.input}` })
    .max(200, 'input field "requesterSignature" is too long: an Ed25519 signature is 88 base64 characters')
    .optional()
    .describe(
      "Optional. The requester's Ed25519 signature (base64) over the canonical request {kind, threadId, request, requestedBy, scope}, by the key registered for requestedBy in ACTION_ENVELOPE_APPROVER_KEYS (`run --key`). A valid one records the requester as verified by signature; any other is refused.",
    ),
});
