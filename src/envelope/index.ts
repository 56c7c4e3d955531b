/**
 * Action Envelope core: the frozen, hashed object a human approves, the policy and scope gate, the
 * pre-write comparison, the post-write verification, decision validation, approver signatures and the
 * approval card. Framework-free and without I/O (node:crypto only); callers read and write.
 */
export { canonicalJson, sha256Json, fingerprint, type JsonValue } from "./canonical.js";
export { EnvelopeError, PolicyError, KeyRegistryError } from "./errors.js";
export { fieldToTaskKey, taskKeyToField, CHANGE_MARKER_FIELD } from "./fields.js";
export { valuesEqual, compareValues, NORMALISATION_RULES, type NormalisationRule } from "./normalise.js";
export {
  parsePolicy,
  allowedApprovers,
  escalationApprovers,
  requesterNotVerified,
  type Policy,
  type RiskLevel,
} from "./policy.js";
export { defaultPolicy } from "./default-policy.js";
export { checkProposal, checkPlan, type Proposal } from "./scope.js";
export {
  EnvelopeSchema,
  requesterVerificationOf,
  createEnvelope,
  parseEnvelope,
  hashEnvelope,
  type Envelope,
  type CreateEnvelopeInput,
  type RequesterVerification,
} from "./envelope.js";
export {
  compareBaseline,
  noChangeReason,
  type ReadResult,
  type FieldCheck,
  type CompareResult,
  type MovedField,
  type ObjectIdentity,
} from "./compare.js";
export { verifyOutcome, type Acknowledgement } from "./verify-outcome.js";
export { validateDecision, type RefusalCode, type DecisionContext, type VerifiedBy } from "./decision.js";
export { DecisionSchema } from "./decision-schema.js";
export { signedPayloadOf } from "./decision-identity.js";
export {
  signDecision,
  verifyDecisionSignature,
  signRequest,
  verifyRequestSignature,
  generateApproverKeyPair,
  parsePublicKeyLines,
  type SignedDecisionPayload,
} from "./signature.js";
export { renderCard, renderValue, decodeDisplay } from "./card.js";
export {
  userIdsOnCard,
  typedNamesIn,
  type PersonName,
  type PeopleLookup,
  type TypedName,
  type Candidate,
  type NameResolution,
} from "./people.js";
export {
  OPERATIONS,
  OPERATION_NAMES,
  isOperationName,
  writeArgsOf,
  type OperationName,
} from "./operations.js";
export {
  compareBeforeDelete,
  verifyDeleted,
  locateDeleted,
  type SubjectRead,
  type GoneResult,
} from "./deleted.js";
export {
  verifyCreatedComment,
  verifyCreatedTask,
  taskIdsWithTitle,
  extractComments,
  commentIdsWithText,
  madeWhen,
} from "./created.js";
export {
  MAX_SET_ACTIONS,
  createChangeSet,
  hashChangeSet,
  chainOutcome,
  outcomeTable,
  partialApprovalForecast,
  memberProblems,
  setCardHeader,
  type ChangeSet,
  type ActionOutcome,
} from "./change-set.js";
