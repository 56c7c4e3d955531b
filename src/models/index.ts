export {
  createChatModel,
  ModelConfigError,
  GROQ_DEFAULT_BASE_URL,
  type ModelConfig,
  type CreatedChatModel,
} from "./factory.js";
export { OfflineTaskModel, OFFLINE_MODEL_LABEL, type OfflineTaskModelCallOptions } from "./offline-model.js";
export { decideNextStep, OFFLINE_TOOL_NAMES, OFFLINE_PREFIX, type OfflineDecision } from "./offline-decision.js";
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
} from "./offline-intent.js";
export { describeModelError, type ModelFailure, type ModelFailureKind } from "./model-errors.js";
