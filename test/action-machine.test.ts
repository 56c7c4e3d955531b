/**
 * The action state machine (src/store/action-machine.ts), pure: properties over every phase and
 * every sequence of moves, and the agreement between "where the journal says a thread is" and
 * "which node may act there" that keeps `resync` from ever bouncing between two refusing nodes.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import {
  canMove,
  emptyProgress,
  leaseIsFree,
  nextFromJournal,
  PHASES,
  releasesLease,
  stepOf,
  TRANSITIONS,
  type ActionRow,
  type Phase,
  type ThreadRecord,
} from "../src/store/action-machine.js";
import { allowedAt } from "../src/hitl/journal-gate.js";
import * as routes from "../src/graph/routes.js";
import { builder, compileGraph } from "../src/graph/graph.js";
import { MemorySaver } from "@langchain/langgraph";

const ORDER: Phase[] = ["registered", "decided", "pre_read", "intent", "acknowledged", "verified"];
/** A phase no move leaves. */
const isFinal = (p: Phase) => TRANSITIONS[p].length === 0;

describe("transitions", () => {
  it("closed and superseded are final; every other phase can be closed", () => {
    expect(PHASES.filter(isFinal).sort()).toEqual(["closed", "superseded"]);
    for (const p of PHASES.filter((x) => !isFinal(x))) expect(canMove(p, "closed"), p).toBe(true);
  });

  it("the execution path only moves forward, one step at a time: no step can be skipped or repeated", () => {
    fc.assert(
      fc.property(fc.constantFrom(...ORDER), fc.constantFrom(...ORDER), (from, to) => {
        const forwardByOne = ORDER.indexOf(to) === ORDER.indexOf(from) + 1;
        expect(canMove(from, to)).toBe(forwardByOne);
      }),
    );
  });

  it("any sequence of attempted moves reaches `intent` at most once, and only through a recorded pre-read", () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...PHASES), { maxLength: 40 }), (attempts) => {
        let phase: Phase = "registered";
        const visited: Phase[] = [phase];
        for (const to of attempts) {
          if (canMove(phase, to)) {
            phase = to;
            visited.push(to);
          }
        }
        expect(visited.filter((p) => p === "intent").length).toBeLessThanOrEqual(1);
        const i = visited.indexOf("intent");
        if (i >= 0) expect(visited.slice(0, i)).toEqual(["registered", "decided", "pre_read"]);
        // Once final, nothing moves it again.
        const f = visited.findIndex(isFinal);
        if (f >= 0) expect(visited.length).toBe(f + 1);
      }),
    );
  });

  it("superseding is possible only before a pre-read: an approved action that was checked against the portal can only be executed or closed", () => {
    for (const p of PHASES) expect(canMove(p, "superseded"), p).toBe(p === "registered" || p === "decided");
    expect(TRANSITIONS.pre_read).toEqual(["intent", "closed"]);
  });
});

const decisions = [undefined, "approve", "reject", "edit", "cancel", "expire"] as const;

function row(
  phase: Phase,
  decision: (typeof decisions)[number],
  flags: { revise: boolean; escalate: boolean },
): ActionRow {
  const progress = emptyProgress();
  if (decision) {
    progress.decision = {
      type: decision,
      envelopeHash: "sha256:x",
      nonce: "n",
      revision: 1,
      approverId: "a",
      verifiedBy: "self_declared",
      decidedAt: "t",
      acceptedAt: "t",
      raw: null,
      ...(decision === "reject" ? { revise: flags.revise } : {}),
      ...(decision === "expire" && flags.escalate ? { escalateTo: "leads" } : {}),
    };
  }
  return { phase, progress } as ActionRow;
}

describe("where the journal says a thread is, and who may act there", () => {
  it("the node the journal names next is always allowed to act at that point (resync cannot loop)", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...PHASES),
        fc.constantFrom(...decisions),
        fc.boolean(),
        fc.boolean(),
        fc.boolean(),
        fc.boolean(),
        (phase, decision, revise, escalate, hasAction, threadClosed) => {
          const thread = { closed: threadClosed ? { outcome: "NOT_EXECUTED" } : null } as ThreadRecord;
          const next = nextFromJournal(
            thread,
            hasAction ? row(phase, decision, { revise, escalate }) : undefined,
          );
          const target = next ?? "agent";
          expect(allowedAt(next)).toContain(target);
        },
      ),
    );
  });

  it("the executor is reachable only for an approved action the journal holds open, never from a waiting or ended thread", () => {
    for (const phase of PHASES) {
      for (const d of decisions) {
        const next = nextFromJournal(undefined, row(phase, d, { revise: true, escalate: true }));
        const mayCarryOut = allowedAt(next).includes("carry_out");
        expect(mayCarryOut, `${phase}/${d}`).toBe(
          (phase === "decided" && d === "approve") ||
            phase === "pre_read" ||
            phase === "intent" ||
            phase === "acknowledged",
        );
      }
    }
    expect(
      allowedAt(
        nextFromJournal(
          { closed: { outcome: "VERIFIED" } } as ThreadRecord,
          row("pre_read", "approve", { revise: false, escalate: false }),
        ),
      ),
    ).toEqual(["finish"]);
  });

  it("a waiting approval can be acted on only by the pause and the decision check", () => {
    expect(
      allowedAt(nextFromJournal(undefined, row("registered", undefined, { revise: false, escalate: false }))),
    ).toEqual(["await_approval", "check_decision"]);
  });
});

describe("the order of the steps after an approval is written once: the phase table (stepOf)", () => {
  it("each open phase of an approved action has exactly one step, and `intent` is reconciled before it is verified", () => {
    const steps = PHASES.map((p) => [p, stepOf(row(p, "approve", { revise: false, escalate: false }))]);
    expect(Object.fromEntries(steps)).toEqual({
      registered: null,
      decided: "pre_read",
      pre_read: "write",
      intent: "reconcile",
      acknowledged: "verify",
      verified: null,
      closed: null,
      superseded: null,
    });
    for (const d of decisions.filter((x) => x !== "approve"))
      expect(stepOf(row("decided", d, { revise: true, escalate: true })), String(d)).toBeNull();
  });

  it("the graph has no node, edge or router for a post-approval step: one executor node, and no pause can fall between its phases", () => {
    const nodes = Object.keys(builder.nodes);
    for (const step of ["pre_read", "execute", "write", "reconcile", "verify"])
      expect(nodes, step).not.toContain(step);
    expect(nodes).toContain("carry_out");
    const drawn = compileGraph({ checkpointer: new MemorySaver() }).getGraph();
    for (const e of drawn.edges)
      for (const end of [e.source, e.target]) expect(["pre_read", "execute", "verify"]).not.toContain(end);
    // The drawing (Studio) still names the phases the node runs.
    expect(drawn.nodes["carry_out"]?.metadata?.["phases"]).toMatch(/pre-read → bound write → verify/);
    // No router may choose a post-approval step: none exists, and none returns one.
    for (const name of ["afterPreRead", "afterExecute", "afterVerify"])
      expect(Object.keys(routes), name).not.toContain(name);
    // A pause between the phases cannot be asked for: LangGraph refuses to compile an interrupt at a node that does not exist.
    for (const node of ["pre_read", "execute", "verify"]) {
      expect(
        () => compileGraph({ checkpointer: new MemorySaver(), interruptBefore: [node as never] }),
        node,
      ).toThrow(/not present/);
    }
  });

  it("no source file outside the phase table maps a phase to a step or names a post-approval node as a destination", () => {
    const root = path.resolve(__dirname, "../src");
    const files: string[] = [];
    const walk = (dir: string) => {
      for (const f of readdirSync(dir)) {
        const full = path.join(dir, f);
        if (statSync(full).isDirectory()) walk(full);
        else if (full.endsWith(".ts")) files.push(full);
      }
    };
    walk(root);
    const offenders: string[] = [];
    for (const f of files) {
      const rel = path.relative(root, f);
      if (rel === path.join("store", "action-machine.ts")) continue;
      const text = readFileSync(f, "utf8");
      // A switch on a phase that returns a step or node name, or a route/goto to one.
      if (
        /case "(decided|pre_read|intent|acknowledged)":\s*(\/\/[^\n]*\s*)*return "(pre_read|write|reconcile|verify|execute)"/.test(
          text,
        )
      )
        offenders.push(`${rel}: maps a phase to a step`);
      if (
        /goto:\s*"(pre_read|execute|verify)"|return "(pre_read|execute|verify)"|addNode\("(pre_read|execute|verify)"/.test(
          text,
        )
      )
        offenders.push(`${rel}: chooses a post-approval step`);
    }
    expect(offenders).toEqual([]);
  });
});

describe("object leases (leaseIsFree, releasesLease)", () => {
  const lease = fc.record({
    objectKey: fc.constant("portal|task|4"),
    owner: fc.constantFrom("sha256:a", "sha256:b"),
    threadId: fc.constant("t"),
    acquiredAt: fc.integer({ min: 0, max: 1_000 }),
    expiresAt: fc.integer({ min: 0, max: 2_000 }),
  });

  it("another action can take an object only when nobody holds it or the holder's lease ran out; the holder can always renew", () => {
    fc.assert(
      fc.property(
        fc.option(lease, { nil: undefined }),
        fc.constantFrom("sha256:a", "sha256:b"),
        fc.integer({ min: 0, max: 2_000 }),
        (holder, owner, now) => {
          const free = leaseIsFree(holder, owner, now);
          if (!holder || holder.owner === owner) expect(free).toBe(true);
          else expect(free).toBe(holder.expiresAt <= now);
        },
      ),
    );
  });

  it("only an ending move releases, and never while a sent write is unanswered and not seen applied (it may still land)", () => {
    const ack = fc.constantFrom(undefined, "OK", "ERROR", "MISSING");
    const verdict = fc.constantFrom(
      undefined,
      "VERIFIED",
      "VERIFICATION_FAILED",
      "INVARIANT_VIOLATION",
      "INCONCLUSIVE",
    );
    fc.assert(
      fc.property(fc.constantFrom(...PHASES), fc.constantFrom(...PHASES), ack, verdict, (from, to, a, v) => {
        const progress = {
          ...emptyProgress(),
          ...(a ? { acknowledgement: { status: a, at: "t" } as never } : {}),
          ...(v ? { verification: { verdict: v, reason: "", fields: [], raw: null, at: "t" } as never } : {}),
        };
        const released = releasesLease(from, to, progress);
        const ending = to === "verified" || to === "closed" || to === "superseded";
        const sent = from === "intent" || from === "acknowledged" || from === "verified";
        const mayStillLand = sent && (a === undefined || a === "MISSING") && v !== "VERIFIED";
        expect(released).toBe(ending && !mayStillLand);
      }),
    );
  });
});
