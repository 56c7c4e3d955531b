/**
 * One projection (src/hitl/thread-view.ts): the state mirror the nodes write, the local view (`show`,
 * `show --json`, the inbox's thread page, which is built from it) and the API's view (from the audit
 * records the server serves) agree on a thread's status, outcome, decision and verification, for a
 * verified, a rejected, an inconclusive and a waiting thread; and nothing else in src/ builds the
 * journal's view of a thread.
 */
import fs from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startRun, submitDecision } from "../src/app/threads.js";
import { type App } from "../src/app/open-app.js";
import { viewThread, type ThreadView } from "../src/app/view-thread.js";
import { auditedView } from "../src/api/cli-api.js";
import { threadJson } from "../src/cli/render.js";
import type { State } from "../src/graph/state.js";
import { openTestApp, startPortal, tempDir, type Portal } from "./support/harness.js";
import { ScriptedChatModel, readThenPropose } from "./support/scripted-model.js";

const REQUEST = "rename task 4 to ONE VIEW";

let portal: Portal;
let app: App | undefined;

beforeEach(async () => {
  portal = await startPortal();
});

afterEach(async () => {
  await app?.close();
  app = undefined;
  await portal.emulator.close();
});

async function waiting(): Promise<ThreadView> {
  app = await openTestApp(portal, tempDir(), {
    model: new ScriptedChatModel(readThenPropose(4, { TITLE: "ONE VIEW" })),
  });
  const view = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
  expect(view.status).toBe("awaiting_approval");
  return view;
}

const decide = (view: ThreadView, type: "approve" | "reject") => ({
  decisions: [
    {
      type,
      envelopeHash: view.approval!.envelopeHash,
      nonce: view.approval!.nonce,
      approver: { id: "demo-approver" },
    },
  ],
});

/** What every view must agree on. */
const gist = (status: string, s: Partial<State> | undefined) => ({
  status,
  outcome: s?.outcome ?? null,
  reasonCode: s?.reasonCode ?? null,
  envelopeHash: s?.envelopeHash ?? null,
  decision: s?.decision ? { type: s.decision.type, approverId: s.decision.approverId } : null,
  verification: s?.verification?.verdict ?? null,
});

/** The thread as each interface sees it: the state mirror, the local view (show --json), and the API's audited view. */
async function views(threadId: string) {
  const snapshot = await app!.graph.getState({ configurable: { thread_id: threadId } });
  const local = await viewThread(app!, threadId);
  const json = threadJson(local) as Partial<State> & { status: string };
  const api = auditedView(
    threadId,
    snapshot,
    snapshot.values as State,
    await app!.deps.audit.records({ threadId }),
  );
  return {
    mirror: gist(local.status, snapshot.values as State),
    show: gist(local.status, local.state),
    json: gist(json.status, json),
    api: gist(api.status, api.state),
  };
}

describe("one projection", () => {
  it.each([
    [
      "VERIFIED",
      "approve",
      undefined,
      { outcome: "VERIFIED", verification: "VERIFIED", decision: "approve" },
    ],
    [
      "REJECTED",
      "reject",
      undefined,
      { outcome: "NOT_EXECUTED", reasonCode: "REJECTED_BY_HUMAN", verification: null, decision: "reject" },
    ],
    [
      "INCONCLUSIVE",
      "approve",
      { kind: "timeout_without_apply" },
      { outcome: "INCONCLUSIVE", verification: "INCONCLUSIVE", decision: "approve" },
    ],
  ] as const)(
    "a %s thread: the state mirror, show, show --json and the API view agree",
    async (_name, type, fault, expected) => {
      const view = await waiting();
      if (fault) await portal.fault({ method: "tasks.task.update", times: 1, ...fault });
      const done = await submitDecision(app!, view.threadId, decide(view, type));
      const v = await views(view.threadId);
      expect(v.show).toMatchObject({
        status: "finished",
        outcome: expected.outcome,
        envelopeHash: view.approval!.envelopeHash,
        decision: { type: expected.decision, approverId: "demo-approver" },
        verification: expected.verification,
        ...("reasonCode" in expected ? { reasonCode: expected.reasonCode } : {}),
      });
      expect(v.mirror).toEqual(v.show);
      expect(v.json).toEqual(v.show);
      expect(v.api).toEqual(v.show);
      // The view submitDecision returns is the same projection.
      expect(gist(done.status, done.state)).toEqual(v.show);
    },
  );

  it("a waiting thread: every view says it waits, with no outcome, decision or verification", async () => {
    const view = await waiting();
    const v = await views(view.threadId);
    const expected = {
      status: "awaiting_approval",
      outcome: null,
      reasonCode: null,
      envelopeHash: view.approval!.envelopeHash,
      decision: null,
      verification: null,
    };
    expect(v).toEqual({ mirror: expected, show: expected, json: expected, api: expected });
  });
});

describe("one place", () => {
  const src = path.join(import.meta.dirname, "..", "src");
  const files = (dir: string): string[] =>
    fs
      .readdirSync(dir, { withFileTypes: true })
      .flatMap((e) =>
        e.isDirectory()
          ? files(path.join(dir, e.name))
          : e.name.endsWith(".ts")
            ? [path.join(dir, e.name)]
            : [],
      );
  const rel = (f: string) => path.relative(src, f).split(path.sep).join("/");

  it("only src/hitl/thread-view.ts turns journal rows into evidence or an ending, and it imports no LangGraph and no I/O", () => {
    // A view field filled straight from a row's progress, an execution entry or a close record.
    const builds =
      /\b(preRead|acknowledgement|verification|invocation|decision|outcome|finishedAt)\s*:\s*[\w?.!]*(progress\.(preRead|acknowledgement|verification|decision|closed)|closed\??\.(outcome|at)\b)/;
    const offenders = files(src)
      .filter((f) => rel(f) !== "hitl/thread-view.ts")
      .flatMap((f) =>
        fs
          .readFileSync(f, "utf8")
          .split("\n")
          .map((line, i) => [`${rel(f)}:${i + 1}`, line] as const),
      )
      .filter(([, line]) => builds.test(line))
      .map(([at, line]) => `${at}: ${line.trim()}`);
    expect(offenders).toEqual([]);
    const view = fs.readFileSync(path.join(src, "hitl/thread-view.ts"), "utf8");
    const imports = [...view.matchAll(/^import\s+(type\s+)?[^;]*from\s+"([^"]+)"/gm)].map((m) => ({
      typeOnly: Boolean(m[1]),
      from: m[2]!,
    }));
    expect(imports.filter((i) => i.from.startsWith("@langchain") || i.from.startsWith("node:"))).toEqual([]);
    // Store modules only for their row types.
    expect(imports.filter((i) => i.from.includes("/store/") && !i.typeOnly)).toEqual([]);
  });

  it("the state mirror's old builders are gone, and the inbox's thread page is the local view", () => {
    const all = files(src).map((f) => [rel(f), fs.readFileSync(f, "utf8")] as const);
    for (const name of ["function decisionOf(", "function invocationOf(", "function actionOutcomeOf("])
      expect(
        all.filter(([, text]) => text.includes(name)).map(([f]) => f),
        name,
      ).toEqual(["hitl/thread-view.ts"]);
    for (const name of ["mirrorOf", "unchangedLeftOut"])
      expect(
        all.filter(([, text]) => new RegExp(`\\b${name}\\b`).test(text)).map(([f]) => f),
        name,
      ).toEqual([]);
    const inbox = fs.readFileSync(path.join(src, "inbox/thread-routes.ts"), "utf8");
    expect(inbox).toMatch(/const view = await viewThread\(app, threadId\);/);
  });
});
