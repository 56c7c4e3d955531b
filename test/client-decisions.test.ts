/**
 * The pure pieces behind agent-chat-ui and Agent Inbox support (the end-to-end replay is
 * test/clients.test.ts): text decisions, the head checkpoint, an empty input beside a resume, the
 * Markdown card, and the server config npm run dev derives for ACTION_ENVELOPE_API_ORIGINS.
 */
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { decisionFromClient, decisionOfText } from "../src/hitl/text-decision.js";
import { classifyRun, dropHeadCheckpoint, namedCheckpointId } from "../src/auth/rules.js";
import { approvalMarkdown } from "../src/hitl/approval-request.js";
import { DERIVED_CONFIG, serverConfig } from "../src/cli/dev-server.js";
import { UsageError } from "../src/errors.js";
import { tempDir } from "./support/harness.js";

const HASH = `sha256:${"ab".repeat(32)}`;
const NONCE = "0123456789abcdef0123456789abcdef";
const decision = {
  decisions: [{ type: "approve", envelopeHash: HASH, nonce: NONCE, approver: { id: "demo-approver" } }],
};

describe("a decision in text", () => {
  it("pasted JSON, bare or in a code fence, is parsed as it is (check_decision then judges it)", () => {
    expect(decisionOfText(JSON.stringify(decision), undefined)).toEqual({ value: decision });
    expect(decisionOfText(`\`\`\`json\n${JSON.stringify(decision, null, 2)}\n\`\`\``, undefined)).toEqual({
      value: decision,
    });
    expect(decisionOfText('{"decisions": [', undefined)).toMatchObject({
      refused: { code: "MALFORMED", reason: expect.stringMatching(/looks like JSON but is not/) },
    });
  });

  it("the one line names the authenticated caller as approver, and is refused without one", () => {
    expect(decisionOfText(`approve ${HASH} nonce ${NONCE}`, "alice")).toEqual({
      value: {
        decisions: [{ type: "approve", envelopeHash: HASH, nonce: NONCE, approver: { id: "alice" } }],
      },
    });
    expect(decisionOfText(`  reject ${HASH} nonce ${NONCE} wrong task, use 5 \n`, "alice")).toEqual({
      value: {
        decisions: [
          {
            type: "reject",
            envelopeHash: HASH,
            nonce: NONCE,
            approver: { id: "alice" },
            message: "wrong task, use 5",
          },
        ],
      },
    });
    expect(decisionOfText(`approve ${HASH} nonce ${NONCE}`, undefined)).toMatchObject({
      refused: { reason: expect.stringMatching(/does not authenticate callers/) },
    });
  });

  it("bare words are not decisions", () => {
    for (const text of ["approve", "Approve", "yes", "accept", `approve ${HASH}`, `approve nonce ${NONCE}`]) {
      expect(decisionOfText(text, "alice"), text).toMatchObject({
        refused: {
          code: "MALFORMED",
          reason: expect.stringMatching(/is not a decision: a decision names the envelope's hash and nonce/),
        },
      });
    }
  });

  it("Agent Inbox: a response's text is read; accept, ignore, edit and a response without text are refused; other values pass through", () => {
    expect(decisionFromClient([{ type: "response", args: JSON.stringify(decision) }], undefined)).toEqual({
      value: decision,
    });
    for (const r of [
      { type: "accept", args: null },
      { type: "ignore", args: null },
      { type: "edit", args: { action: "update_task", args: {} } },
      { type: "response", args: null },
    ]) {
      expect(decisionFromClient([r], "alice"), r.type).toMatchObject({
        refused: { code: "MALFORMED", reason: expect.stringMatching(/carries no envelope hash or nonce/) },
      });
    }
    expect(decisionFromClient({ chatDecision: `approve ${HASH} nonce ${NONCE}` }, "alice")).toMatchObject({
      value: { decisions: [{ approver: { id: "alice" } }] },
    });
    for (const v of [decision, [decision], { decisions: [{ type: "approve" }] }, "approve", null])
      expect(decisionFromClient(v, undefined)).toEqual({ value: v });
  });
});

describe("runs from the chat UI", () => {
  const head = (configurable: Record<string, unknown>) => ({
    command: { resume: decision },
    config: { configurable },
  });

  it("naming the head checkpoint: the selector is dropped and the run is accepted; another checkpoint stays and is refused", () => {
    const useStream = head({ checkpoint_id: "head-1", checkpoint_ns: "", checkpoint_map: {} });
    expect(namedCheckpointId(useStream)).toBe("head-1");
    expect(dropHeadCheckpoint(useStream, "head-1")).toBe(true);
    expect(useStream.config.configurable).toEqual({});
    expect(classifyRun(useStream, undefined)).toEqual({ kind: "resume" });

    const older = head({ checkpoint_id: "older", checkpoint_ns: "" });
    expect(dropHeadCheckpoint(older, "head-1")).toBe(false);
    expect(classifyRun(older, undefined)).toMatchObject({ refused: expect.stringMatching(/fork or replay/) });
    // Not a plain head reference: kept, and refused.
    for (const other of [
      { checkpoint_id: "head-1", checkpoint_ns: "sub" },
      { checkpoint_id: "head-1", checkpoint_map: { "": "x" } },
      { checkpoint_id: "head-1", __pregel_x: 1 },
    ]) {
      expect(namedCheckpointId(head(other)), JSON.stringify(other)).toBeUndefined();
      expect(dropHeadCheckpoint(head(other), "head-1")).toBe(false);
    }
    expect(dropHeadCheckpoint(head({ checkpoint_id: "head-1" }), undefined)).toBe(false);
  });

  it("an empty input beside command.resume is no input; a non-empty one is still refused", () => {
    expect(classifyRun({ input: {}, command: { resume: decision } }, undefined)).toEqual({ kind: "resume" });
    expect(classifyRun({ input: {}, command: undefined }, undefined)).toEqual({ kind: "input" });
    expect(classifyRun({ input: { messages: [] }, command: { resume: decision } }, undefined)).toMatchObject({
      refused: expect.stringMatching(/not both/),
    });
  });
});

describe("the card as Markdown", () => {
  it("keeps the card whole in a fence longer than any backtick run in it, with the hash, nonce and what to send", () => {
    const card = "Set TITLE:\n```\nx\n```\nend";
    const md = approvalMarkdown(card, HASH, NONCE, decision, undefined, false);
    expect(md).toContain(`\`\`\`\`\n${card}\n\`\`\`\``);
    expect(md).toContain(`**Hash:** \`${HASH}\``);
    expect(md).toContain(`**Nonce:** \`${NONCE}\``);
    expect(md).toContain(JSON.stringify(decision));
    expect(md).toMatch(/self-declared/);
    expect(
      approvalMarkdown("card", HASH, NONCE, decision, `approve ${HASH} nonce ${NONCE}`, false),
    ).toContain(`\`approve ${HASH} nonce ${NONCE}\``);
  });
});

describe("npm run dev and ACTION_ENVELOPE_API_ORIGINS", () => {
  const project = (config: Record<string, unknown>) => {
    const dir = tempDir("ae-dev-config-");
    const file = path.join(dir, "langgraph.json");
    fs.writeFileSync(file, JSON.stringify(config));
    return file;
  };
  const base = {
    graphs: { g: "./src/api/served-graph.ts:graph" },
    http: {
      app: "./src/inbox/mount.ts:app",
      cors: { allow_origins: ["https://smith.langchain.com"], expose_headers: ["content-location"] },
    },
  };

  it("starts from langgraph.json itself when no origin is listed, or every listed one is in http.cors already", () => {
    const file = project(base);
    expect(serverConfig(file, {})).toBe(file);
    expect(serverConfig(file, { ACTION_ENVELOPE_API_ORIGINS: "https://smith.langchain.com" })).toBe(file);
  });

  it("otherwise from a copy beside it whose http.cors.allow_origins adds them, everything else unchanged", () => {
    const file = project(base);
    const derived = serverConfig(file, {
      ACTION_ENVELOPE_API_ORIGINS: " http://localhost:3000/ , https://inbox.example",
    });
    expect(derived).toBe(path.join(path.dirname(file), DERIVED_CONFIG));
    expect(JSON.parse(fs.readFileSync(derived, "utf8"))).toEqual({
      ...base,
      http: {
        ...base.http,
        cors: {
          ...base.http.cors,
          allow_origins: ["https://smith.langchain.com", "http://localhost:3000", "https://inbox.example"],
        },
      },
    });
  });

  it("refuses a config whose allow_origin_regex would take the place of allow_origins", () => {
    const file = project({ ...base, http: { cors: { allow_origin_regex: "^https://.*" } } });
    expect(() => serverConfig(file, { ACTION_ENVELOPE_API_ORIGINS: "http://localhost:3000" })).toThrow(
      UsageError,
    );
  });
});
