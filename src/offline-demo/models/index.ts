/** The offline model: a deterministic stand-in for an LLM that understands a fixed list of phrasings. */
export { OfflineTaskModel, OFFLINE_MODEL_LABEL, type OfflineTaskModelCallOptions } from "./model.js";
export { decideNextStep } from "./decision.js";
export { OFFLINE_PREFIX, type OfflineDecision } from "./replies.js";
export { OFFLINE_TOOL_NAMES } from "./transcript.js";
export { parseRequest, SUPPORTED_PHRASINGS, type ChangeIntent, type TaskTarget } from "./intent.js";
export { parseFeedbackValue } from "./feedback.js";
export type { TaskField } from "./fields.js";
export {
  planRequest,
  splitClauses,
  MAX_CHANGE_SET_ACTIONS,
  type PlannedAction,
  type PlannedClause,
  type RequestPlan,
} from "./plan.js";
