import type { State, Update } from "../graph/state.js";
import { getDeps } from "../runtime/deps.js";
import { verifyOutcome, type Acknowledgement } from "../envelope/index.js";
import { rawOf, toReadResult } from "../hitl/reads.js";
import type { VerificationRecord } from "../hitl/records.js";

/** A fresh read after the write; the acknowledgement alone never counts as verified. */
export async function verify(state: State): Promise<Update> {
  const deps = await getDeps();
  const envelope = state.envelope!;
  const ack = state.acknowledgement!;
  const acknowledgement: Acknowledgement =
    ack.status === "OK"
      ? { status: "OK", body: ack.body }
      : ack.status === "ERROR"
        ? { status: "ERROR", error: ack.error! }
        : { status: "MISSING", reason: ack.reason ?? "no acknowledgement" };
  const res = await deps.tools.read("getTask", { taskId: envelope.object.id });
  const result = verifyOutcome(envelope, acknowledgement, toReadResult(res));
  const verification: VerificationRecord = { ...result, raw: rawOf(res), at: deps.clock().toISOString() };
  return { verification };
}
