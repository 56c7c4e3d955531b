/**
 * A journal put together from one part per concern: each method is the owning part's, bound to it,
 * except the one-action forms of registration and decision, which the front answers with the set forms.
 */
import type {
  ExecutionJournal,
  ThreadJournal,
  ActionJournal,
  ApprovalListing,
  TurnJournal,
  QuestionJournal,
  LeaseJournal,
  LockJournal,
  DueJournal,
  Journal,
} from "./api.js";

import type { CommitCount } from "../statements.js";

/** The methods the front answers itself, through the parts' set forms. */
type FrontMethods = "registerAction" | "decideAction";

/** What a backend's actions part answers: the ActionJournal less the front's methods. */
export type ActionPart = Omit<ActionJournal, FrontMethods>;

/** The parts a backend supplies, one per concern. */
export interface JournalParts {
  executions: ExecutionJournal;
  threads: ThreadJournal;
  actions: ActionPart;
  listing: ApprovalListing;
  turns: TurnJournal;
  questions: QuestionJournal;
  leases: LeaseJournal;
  locks: LockJournal;
  due: DueJournal;
}

/** Every other method of the Journal, each answered by one part; the backend adds `commits` and `close`. */
type PartMethods = Omit<Journal, "commits" | "close" | "threadRows" | FrontMethods>;

/** The methods each part answers for: every one of its interface's, checked by the compiler. */
const OWNED: { [K in keyof JournalParts]: Record<keyof JournalParts[K], true> } = {
  executions: { recordAcknowledgement: true, beginWrite: true, recordAnswer: true, findExecution: true },
  threads: { registerThread: true, getThread: true, setThreadScope: true, closeThread: true },
  actions: {
    registerActions: true,
    getAction: true,
    currentAction: true,
    decideActions: true,
    moveAction: true,
    noteRefusal: true,
  },
  listing: {
    listRegistered: true,
    countRegistered: true,
    legacyApprovals: true,
    retireLegacyApprovals: true,
  },
  turns: { noteAgentStep: true, noteModelReply: true, noteInvalidProposal: true, getThreadTurns: true },
  questions: {
    recordQuestion: true,
    noteInvalidAnswer: true,
    closeQuestion: true,
    getQuestion: true,
    listOpenQuestions: true,
  },
  leases: { acquireObjectLease: true, objectLease: true },
  locks: { acquireThreadLock: true, releaseThreadLock: true },
  due: { claimDue: true, releaseDue: true },
};

/** Each part's methods, bound to the part. */
function bindParts(parts: JournalParts): PartMethods {
  const methods: Record<string, unknown> = {};
  for (const concern of Object.keys(OWNED) as (keyof JournalParts)[]) {
    const part = parts[concern] as unknown as Record<string, (...a: unknown[]) => unknown>;
    for (const name of Object.keys(OWNED[concern])) methods[name] = part[name]!.bind(part);
  }
  return methods as unknown as PartMethods;
}

/** A base whose instances carry the parts' bound methods, typed as carrying them. */
const PartsFront = class {
  constructor(parts: JournalParts) {
    Object.assign(this, bindParts(parts));
  }
} as unknown as abstract new (parts: JournalParts) => PartMethods;

/** The shared front of both backends; each supplies its parts, its commit count and its close. */
export abstract class ComposedJournal extends PartsFront implements Journal {
  abstract readonly commits: CommitCount;
  abstract close(): Promise<void>;
  // Properties rather than methods, so that they stay bound like the parts' methods.
  readonly registerAction: Journal["registerAction"] = async (a, at, records) =>
    (await this.registerActions([a], at, records))[0]!;
  readonly decideAction: Journal["decideAction"] = (envelopeHash, claim, decision, records, lease) =>
    this.decideActions([{ envelopeHash, decision }], claim, records, lease);
  /** The three parts' own reads; a backend whose reads are round trips answers in one (PostgresJournal). */
  readonly threadRows: Journal["threadRows"] = async (threadId) => {
    const [thread, action, question] = await Promise.all([
      this.getThread(threadId),
      this.currentAction(threadId),
      this.getQuestion(threadId),
    ]);
    return { thread, action, question };
  };
}
