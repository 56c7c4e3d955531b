export {
  createChatModel,
  ModelConfigError,
  GROQ_DEFAULT_BASE_URL,
  type ModelConfig,
  type CreatedChatModel,
} from "./factory.js";
export { describeModelError, type ModelFailure, type ModelFailureKind } from "./model-errors.js";
