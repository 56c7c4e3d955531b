/**
 * Action Envelope core: the frozen, hashed object a human approves, the policy and scope gate, the
 * pre-write comparison, the post-write verification, decision validation, approver signatures and the
 * approval card. Framework-free and without I/O (node:crypto only); callers read and write.
 */
export { canonicalJson, sha256Json, fingerprint, HASH_PATTERN, type JsonValue } from "./canonical.js";
export { EnvelopeError, PolicyError, KeyRegistryError } from "./errors.js";
export {
  fieldToTaskKey,
  taskKeyToField,
  TASK_FIELDS,
  COMMENT_FIELDS,
  CHANGE_MARKER_FIELD,
  STATUS_VALUES,
  PRIORITY_VALUES,
  checkFieldValue,
  type FieldKind,
  type FieldSpec,
} from "./fields.js";
export {
  valuesEqual,
  compareValues,
  normalisationRule,
  NORMALISATION_RULES,
  type NormalisationRule,
  type NormalisationRuleId,
  type ValueComparison,
} from "./normalise.js";
export {
  PolicySchema,
  parsePolicy,
  allowedApprovers,
  approverNotAllowed,
  escalationApprovers,
  requesterNotVerified,
  LEVELS,
  REVERSIBILITY,
  GATES,
  OVERRIDABLE_GATES,
  type Policy,
  type PolicyInput,
  type OperationRule,
  type FieldRule,
  type RiskLevel,
  type Reversibility,
  type Gate,
} from "./policy.js";
export { defaultPolicy } from "./default-policy.js";
export {
  checkProposal,
  checkPlan,
  hashPlan,
  checkPlanApproval,
  maxRisk,
  type Scope,
  type Proposal,
  type Risk,
  type ProposalCheck,
  type ProposalRefusalCode,
} from "./scope.js";
export {
  EnvelopeSchema,
  ENVELOPE_SCHEMA_ID,
  REQUESTER_VERIFICATIONS,
  requesterVerificationOf,
  requesterVerificationText,
  createEnvelope,
  parseEnvelope,
  hashEnvelope,
  comparedFieldsFor,
  type Envelope,
  type CreateEnvelopeInput,
  type RequesterVerification,
} from "./envelope.js";
export {
  compareBaseline,
  extractTask,
  noChangeReason,
  type ReadResult,
  type FieldCheck,
  type FieldStatus,
  type CompareVerdict,
  type CompareResult,
  type MovedField,
  type ObjectIdentity,
} from "./compare.js";
export {
  verifyOutcome,
  type Acknowledgement,
  type VerifyVerdict,
  type VerifyResult,
} from "./verify-outcome.js";
export {
  validateDecision,
  validateDecisionFor,
  type RefusalCode,
  type DecisionContext,
  type DecisionValidation,
  type VerifiedBy,
} from "./decision.js";
export { DecisionSchema, type Decision } from "./decision-schema.js";
export { subjectOfEnvelope, subjectOfSet, type DecisionSubject } from "./decision-subject.js";
export { signedPayloadOf } from "./decision-identity.js";
export {
  signDecision,
  verifyDecisionSignature,
  signRequest,
  verifyRequestSignature,
  generateApproverKeyPair,
  parsePublicKeyLines,
  publicKeyLine,
  type SignedDecisionPayload,
  type SignedRequestPayload,
} from "./signature.js";
export {
  renderCard,
  renderValue,
  decodeDisplay,
  type CardFormat,
  type CardOptions,
  type RenderedValue,
} from "./card.js";
export { exampleTask, taskBody } from "./examples.js";
export {
  USER_FIELDS,
  userIdsIn,
  userIdsOnCard,
  personNote,
  typedNamesIn,
  idsForNames,
  unresolvedReason,
  type PersonName,
  type PeopleLookup,
  type TypedName,
  type Candidate,
  type NameResolution,
} from "./people.js";
export {
  OPERATIONS,
  OPERATION_NAMES,
  PROPOSABLE_OPERATIONS,
  REQUIRED_ON_DELETE,
  operationSpec,
  isOperationName,
  fieldsOf,
  writeArgsOf,
  type OperationName,
  type OperationSpec,
  type OperationEffect,
} from "./operations.js";
export {
  compareBeforeDelete,
  verifyDeleted,
  locateDeleted,
  deleteSubjectOf,
  deletedIdOf,
  DELETE_SUBJECTS,
  COMMENT_COMPARED_FIELDS,
  type DeleteSubject,
  type DeletedKind,
  type SubjectRead,
  type GoneResult,
} from "./deleted.js";
export {
  verifyCreatedComment,
  verifyCreatedTask,
  taskIdsWithTitle,
  createdTaskIdOf,
  extractComments,
  commentIdsWithText,
  createdIdOf,
  madeWhen,
  type CreatedObject,
  type CreateVerifyResult,
  type CommentItem,
} from "./created.js";
export {
  ChangeSetSchema,
  CHANGE_SET_SCHEMA_ID,
  MAX_SET_ACTIONS,
  ACTION_ID,
  createChangeSet,
  parseChangeSet,
  hashChangeSet,
  chainRisk,
  chainOutcome,
  outcomeTable,
  partialApprovalForecast,
  memberProblems,
  setCardHeader,
  type ChangeSet,
  type ActionOutcome,
  type PartialForecast,
  type CreateChangeSetInput,
} from "./change-set.js";
