/** A journal put together from one part per concern: each method is handed to the part that owns it. */
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

/** The parts a backend supplies, one per concern. */
export interface JournalParts {
  executions: ExecutionJournal;
  threads: ThreadJournal;
  actions: ActionJournal;
  listing: ApprovalListing;
  turns: TurnJournal;
  questions: QuestionJournal;
  leases: LeaseJournal;
  locks: LockJournal;
  due: DueJournal;
}

/** The shared front of both backends; each supplies its parts, its commit count and its close. */
export abstract class ComposedJournal implements Journal {
  abstract readonly commits: CommitCount;
  abstract close(): Promise<void>;

  constructor(private readonly parts: JournalParts) {}

  recordAcknowledgement(
    ...a: Parameters<Journal["recordAcknowledgement"]>
  ): ReturnType<Journal["recordAcknowledgement"]> {
    return this.parts.executions.recordAcknowledgement(...a);
  }

  beginWrite(...a: Parameters<Journal["beginWrite"]>): ReturnType<Journal["beginWrite"]> {
    return this.parts.executions.beginWrite(...a);
  }

  recordAnswer(...a: Parameters<Journal["recordAnswer"]>): ReturnType<Journal["recordAnswer"]> {
    return this.parts.executions.recordAnswer(...a);
  }

  findExecution(...a: Parameters<Journal["findExecution"]>): ReturnType<Journal["findExecution"]> {
    return this.parts.executions.findExecution(...a);
  }

  registerThread(...a: Parameters<Journal["registerThread"]>): ReturnType<Journal["registerThread"]> {
    return this.parts.threads.registerThread(...a);
  }

  getThread(...a: Parameters<Journal["getThread"]>): ReturnType<Journal["getThread"]> {
    return this.parts.threads.getThread(...a);
  }

  setThreadScope(...a: Parameters<Journal["setThreadScope"]>): ReturnType<Journal["setThreadScope"]> {
    return this.parts.threads.setThreadScope(...a);
  }

  closeThread(...a: Parameters<Journal["closeThread"]>): ReturnType<Journal["closeThread"]> {
    return this.parts.threads.closeThread(...a);
  }

  registerAction(...a: Parameters<Journal["registerAction"]>): ReturnType<Journal["registerAction"]> {
    return this.parts.actions.registerAction(...a);
  }

  registerActions(...a: Parameters<Journal["registerActions"]>): ReturnType<Journal["registerActions"]> {
    return this.parts.actions.registerActions(...a);
  }

  getAction(...a: Parameters<Journal["getAction"]>): ReturnType<Journal["getAction"]> {
    return this.parts.actions.getAction(...a);
  }

  currentAction(...a: Parameters<Journal["currentAction"]>): ReturnType<Journal["currentAction"]> {
    return this.parts.actions.currentAction(...a);
  }

  decideAction(...a: Parameters<Journal["decideAction"]>): ReturnType<Journal["decideAction"]> {
    return this.parts.actions.decideAction(...a);
  }

  decideActions(...a: Parameters<Journal["decideActions"]>): ReturnType<Journal["decideActions"]> {
    return this.parts.actions.decideActions(...a);
  }

  moveAction(...a: Parameters<Journal["moveAction"]>): ReturnType<Journal["moveAction"]> {
    return this.parts.actions.moveAction(...a);
  }

  listOpenThreads(...a: Parameters<Journal["listOpenThreads"]>): ReturnType<Journal["listOpenThreads"]> {
    return this.parts.actions.listOpenThreads(...a);
  }

  noteRefusal(...a: Parameters<Journal["noteRefusal"]>): ReturnType<Journal["noteRefusal"]> {
    return this.parts.actions.noteRefusal(...a);
  }

  listRegistered(...a: Parameters<Journal["listRegistered"]>): ReturnType<Journal["listRegistered"]> {
    return this.parts.listing.listRegistered(...a);
  }

  countRegistered(...a: Parameters<Journal["countRegistered"]>): ReturnType<Journal["countRegistered"]> {
    return this.parts.listing.countRegistered(...a);
  }

  legacyApprovals(...a: Parameters<Journal["legacyApprovals"]>): ReturnType<Journal["legacyApprovals"]> {
    return this.parts.listing.legacyApprovals(...a);
  }

  retireLegacyApprovals(
    ...a: Parameters<Journal["retireLegacyApprovals"]>
  ): ReturnType<Journal["retireLegacyApprovals"]> {
    return this.parts.listing.retireLegacyApprovals(...a);
  }

  noteAgentStep(...a: Parameters<Journal["noteAgentStep"]>): ReturnType<Journal["noteAgentStep"]> {
    return this.parts.turns.noteAgentStep(...a);
  }

  noteModelReply(...a: Parameters<Journal["noteModelReply"]>): ReturnType<Journal["noteModelReply"]> {
    return this.parts.turns.noteModelReply(...a);
  }

  noteInvalidProposal(
    ...a: Parameters<Journal["noteInvalidProposal"]>
  ): ReturnType<Journal["noteInvalidProposal"]> {
    return this.parts.turns.noteInvalidProposal(...a);
  }

  getThreadTurns(...a: Parameters<Journal["getThreadTurns"]>): ReturnType<Journal["getThreadTurns"]> {
    return this.parts.turns.getThreadTurns(...a);
  }

  recordQuestion(...a: Parameters<Journal["recordQuestion"]>): ReturnType<Journal["recordQuestion"]> {
    return this.parts.questions.recordQuestion(...a);
  }

  noteInvalidAnswer(
    ...a: Parameters<Journal["noteInvalidAnswer"]>
  ): ReturnType<Journal["noteInvalidAnswer"]> {
    return this.parts.questions.noteInvalidAnswer(...a);
  }

  closeQuestion(...a: Parameters<Journal["closeQuestion"]>): ReturnType<Journal["closeQuestion"]> {
    return this.parts.questions.closeQuestion(...a);
  }

  getQuestion(...a: Parameters<Journal["getQuestion"]>): ReturnType<Journal["getQuestion"]> {
    return this.parts.questions.getQuestion(...a);
  }

  listOpenQuestions(
    ...a: Parameters<Journal["listOpenQuestions"]>
  ): ReturnType<Journal["listOpenQuestions"]> {
    return this.parts.questions.listOpenQuestions(...a);
  }

  acquireObjectLease(
    ...a: Parameters<Journal["acquireObjectLease"]>
  ): ReturnType<Journal["acquireObjectLease"]> {
    return this.parts.leases.acquireObjectLease(...a);
  }

  acquireThreadLock(
    ...a: Parameters<Journal["acquireThreadLock"]>
  ): ReturnType<Journal["acquireThreadLock"]> {
    return this.parts.locks.acquireThreadLock(...a);
  }

  releaseThreadLock(
    ...a: Parameters<Journal["releaseThreadLock"]>
  ): ReturnType<Journal["releaseThreadLock"]> {
    return this.parts.locks.releaseThreadLock(...a);
  }

  claimDue(...a: Parameters<Journal["claimDue"]>): ReturnType<Journal["claimDue"]> {
    return this.parts.due.claimDue(...a);
  }

  releaseDue(...a: Parameters<Journal["releaseDue"]>): ReturnType<Journal["releaseDue"]> {
    return this.parts.due.releaseDue(...a);
  }
}
