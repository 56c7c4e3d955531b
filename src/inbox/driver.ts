/**
 * Submits a decision from the web inbox through the same path as the CLI (src/app/threads.ts
 * submitDecision): under the journal's thread lock, after checking that an approval is really
 * pending, as a resume of the graph, where check_decision validates it against the journal's row.
 * The difference: the run carries the signed-in approver as an authenticated LangGraph user, so
 * check_decision binds the decision to that identity and records it `verifiedBy: "authentication"`.
 *
 * The page's hash and nonce are checked under the lock before anything is sent: a card that changed
 * meanwhile (new revision, escalation, decided elsewhere) is refused here and never reaches the graph.
 */
import { Command } from "@langchain/langgraph";
import { RUN_DURABILITY, withThreadLock } from "../app/threads.js";
import { viewThread, type ThreadView } from "../app/view-thread.js";
import type { App } from "../app/open-app.js";
import { DecisionNotAcceptedError } from "../errors.js";
import { runConfigurable } from "../runtime/run-deps.js";

/** What is on the person's screen no longer waits: nothing was sent. */
export class StaleCardError extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = "StaleCardError";
  }
}

export async function submitAsSignedIn(
  app: App,
  threadId: string,
  onScreen: { envelopeHash: string; nonce: string },
  resume: unknown,
  identity: string,
): Promise<ThreadView> {
  return resumeAsSignedIn(app, threadId, identity, "role:approver", (view) => {
    if (view.status !== "awaiting_approval") {
      throw new StaleCardError(
        `the thread is no longer waiting for this approval (it is ${view.status.replace("_", " ")}); nothing was applied`,
      );
    }
    const a = view.approval!;
    if (a.envelopeHash !== onScreen.envelopeHash || a.nonce !== onScreen.nonce) {
      const why =
        a.revision > 0 && a.envelopeHash !== onScreen.envelopeHash
          ? `the card changed since this page was loaded: revision ${a.revision}${a.escalatedTo ? `, escalated to ${a.escalatedTo}` : ""} (${a.envelopeHash}) replaced the envelope on your screen (${onScreen.envelopeHash})`
          : "the card's nonce changed since this page was loaded";
      throw new StaleCardError(`${why}; nothing was applied. Review the current card below.`);
    }
    return resume;
  });
}

/**
 * Answers a structured question from the inbox: under the thread lock, only while the same question
 * (its askedAt) is still waiting, as the resume `{answers}` that the CLI's `answer` sends; check_input
 * validates it against the schema that was shown, exactly as for the CLI.
 */
export async function answerAsSignedIn(
  app: App,
  threadId: string,
  askedAt: string,
  answers: Record<string, string>,
  identity: string,
): Promise<ThreadView> {
  return resumeAsSignedIn(app, threadId, identity, "role:requester", (view) => {
    if (view.status !== "awaiting_input") {
      throw new StaleCardError(
        `the thread is no longer waiting for this answer (it is ${view.status.replace("_", " ")}); nothing was sent`,
      );
    }
    if (view.input!.askedAt !== askedAt) {
      throw new StaleCardError(
        "a new question replaced the one on your screen; nothing was sent. Read the current question below.",
      );
    }
    return { answers };
  });
}

/**
 * Under the thread lock: re-reads the thread, lets `resumeFor` check that what is on the person's
 * screen is still what waits (throwing StaleCardError otherwise) and name the resume value, then
 * drives the graph with the signed-in person as the authenticated user, so check_decision and
 * check_input judge exactly as for the CLI, with the identity verified.
 */
async function resumeAsSignedIn(
  app: App,
  threadId: string,
  identity: string,
  role: string,
  resumeFor: (view: ThreadView) => unknown,
): Promise<ThreadView> {
  return withThreadLock(
    app,
    threadId,
    async () => {
      const view = await viewThread(app, threadId);
      if (view.status === "not_found")
        throw new DecisionNotAcceptedError(threadId, "NO_SUCH_THREAD", "no such thread; nothing was started");
      const resume = resumeFor(view);
      const resumeValue = view.interruptId ? { [view.interruptId]: resume } : resume;
      const stream = await app.graph.stream(new Command({ resume: resumeValue }) as never, {
        configurable: {
          thread_id: threadId,
          langgraph_auth_user: { identity, is_authenticated: true, permissions: [role] },
          ...runConfigurable(false, resumeValue),
        },
        durability: RUN_DURABILITY,
        streamMode: "updates",
      });
      for await (const _chunk of stream) {
        // Drained: each node has run and been checkpointed when the stream ends.
      }
      return await viewThread(app, threadId);
    },
    "inbox:",
  );
}
