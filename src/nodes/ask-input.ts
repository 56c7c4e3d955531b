import { Command, interrupt, type LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { inputRequestFrom } from "../hitl/input-request.js";
import { admitResume } from "../hitl/bounds.js";
import { receivedIn } from "../runtime/run-deps.js";

/** The pause for a structured question; like await_approval, nothing but the interrupt. */
export async function askInput(state: State, config: LangGraphRunnableConfig): Promise<Update | Command> {
  // An answer taken and not yet checked: this node took it in the step before, whose check_input runs
  // beside this one (reached again by a goto's node that ran beside the pause and routed here, its
  // writes replayed on resume). It is not asked again, and this branch ends: check_input goes on.
  if (state.pendingDecision != null) return {};
  // No question in state (a goto here, an edited checkpoint): nothing to ask; check_input goes by the
  // journal's question, or where the journal says the thread is.
  if (!state.inputRequest) return new Command({ goto: "check_input" });
  const answer: unknown = interrupt(inputRequestFrom(state, String(config.configurable?.thread_id ?? "")));
  // The run it came with is recorded: check_input judges it in that run only.
  return new Command({
    update: {
      pendingDecision: admitResume(answer),
      pendingFrom: receivedIn(config, { value: answer }) ?? null,
    },
    goto: "check_input",
  });
}
