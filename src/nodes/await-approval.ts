import { interrupt, type LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { authenticatedIdentity } from "../auth/identity.js";
import { depsOf, receivedIn } from "../runtime/run-deps.js";
import { approvalRequestFrom } from "../hitl/approval-request.js";
import { openGate, refuseUnlessAllowed } from "../hitl/journal-gate.js";
import { admitResume } from "../hitl/bounds.js";
import { boundToSender } from "../hitl/text-decision.js";

/**
 * The pause. This node re-runs from its first line on resume, so nothing before `interrupt()` may
 * have an effect that a second run would repeat: it only reads the journal (and, when the journal
 * says nothing is waiting, records that once, keyed). The payload is the journal's registered action.
 */
export async function awaitApproval(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = depsOf(config);
  const gate = await openGate(deps, config, state);
  const refused = await refuseUnlessAllowed(deps, gate, "await_approval", state);
  if (refused) return refused;
  const authUser = authenticatedIdentity(config.configurable);
  const decision: unknown = interrupt(
    approvalRequestFrom(gate.action!, {
      ...(authUser ? { approverId: authUser } : {}),
      ...(gate.members ? { members: gate.members, partialExecution: deps.policy.partialExecution } : {}),
    }),
  );
  // A one-line decision names no approver: it is bound to this run's caller, who sent it. The run it
  // came with is recorded: check_decision judges it in that run only.
  return {
    pendingDecision: boundToSender(admitResume(decision), authUser),
    pendingFrom: receivedIn(config, { value: decision }) ?? null,
  };
}
