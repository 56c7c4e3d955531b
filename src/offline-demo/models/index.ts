/** The offline model: a deterministic stand-in for an LLM that understands a fixed list of phrasings. */
export { OfflineTaskModel, OFFLINE_MODEL_LABEL, type OfflineTaskModelCallOptions } from "./model.js";
export { decideNextStep, OFFLINE_TOOL_NAMES, OFFLINE_PREFIX, type OfflineDecision } from "./decision.js";
export {
  parseRequest,
  parseFeedbackValue,
  planRequest,
  splitClauses,
  SUPPORTED_PHRASINGS,
  MAX_CHANGE_SET_ACTIONS,
  type PlannedAction,
  type PlannedClause,
  type RequestPlan,
  type ChangeIntent,
  type TaskField,
  type TaskTarget,
} from "./intent.js";
