/**
 * Builds resume values from CLI flags. An approval's hash comes from the person (what they saw on the
 * card); the CLI never fills it in from the thread, or the binding would prove nothing.
 */
import fs from "node:fs";
import {
  DecisionSchema,
  OPERATIONS,
  partialApprovalForecast,
  signDecision,
  signedPayloadOf,
} from "../envelope/index.js";
export { signRequest } from "../envelope/index.js";
import type { ResumeValue } from "../hitl/contract.js";
import type { ThreadView } from "../app/view-thread.js";
import { UsageError } from "../errors.js";
import { enumCodeOf } from "../envelope/fields.js";
import { PRIVATE } from "../config/file-mode.js";

interface Common {
  as: string;
  key?: string;
}

/** One decision item as sent: the approver and decidedAt added, signed over its own payload when a key is given. */
function signedItem(
  view: ThreadView,
  decision: Record<string, unknown> & { type: string; envelopeHash: string; nonce: string },
  opts: Common,
  decidedAt: string,
  pem?: string,
): Record<string, unknown> {
  const item: Record<string, unknown> = { ...decision, approver: { id: opts.as }, decidedAt };
  if (pem !== undefined) {
    // Sign exactly what the runtime will verify: the parsed decision's canonical signed payload (with its actionId, if any).
    const parsed = DecisionSchema.safeParse(item);
    if (!parsed.success)
      throw new UsageError(`cannot sign a malformed decision: ${parsed.error.issues[0]?.message}`);
    item["signature"] = signDecision(signedPayloadOf(parsed.data, view.threadId), pem);
  }
  return item;
}

/** The private key named by --key (refused when others may read or write it), or undefined without --key. */
export function readKey(opts: Pick<Common, "key">): string | undefined {
  if (!opts.key) return undefined;
  let pem: string;
  try {
    pem = fs.readFileSync(opts.key, "utf8");
  } catch {
    throw new UsageError(`cannot read the private key file ${opts.key}`);
  }
  const mode = process.platform === "win32" ? 0 : fs.statSync(opts.key).mode & 0o777;
  if (mode & PRIVATE) {
    throw new UsageError(
      `the private key file ${opts.key} is readable or writable by other users (mode ${mode.toString(8).padStart(4, "0")}): whoever can read it can sign as you; fix: chmod 600 ${opts.key}`,
    );
  }
  return pem;
}

function signed(
  view: ThreadView,
  decision: Record<string, unknown> & { type: string; envelopeHash: string; nonce: string },
  opts: Common,
): ResumeValue {
  return { decisions: [signedItem(view, decision, opts, new Date().toISOString(), readKey(opts))] };
}

function parseOverride(value: string | undefined): { gate: string; reason: string } | undefined {
  if (!value) return undefined;
  const [gate, ...rest] = value.split("=");
  if (!gate || rest.join("=").trim() === "")
    throw new UsageError(`--override must be gate=reason, got "${value}"`);
  return { gate, reason: rest.join("=") };
}

export function approveDecision(
  view: ThreadView,
  opts: Common & { hash: string; override?: string },
): ResumeValue {
  const a = view.approval!;
  const override = parseOverride(opts.override);
  const own = a.changeSet?.actions.find((x) => x.envelopeHash === opts.hash);
  // One action's hash (each action's section of the card shows one) never approves a set: refused here, before it uses up an attempt.
  if (own)
    throw new UsageError(
      `${opts.hash} is the envelope hash of action ${own.actionId}; a change set is approved with its set hash (the card's "Set hash:" line), or decided action by action with decide`,
    );
  return signed(
    view,
    { type: "approve", envelopeHash: opts.hash, nonce: a.nonce, ...(override ? { override } : {}) },
    opts,
  );
}

export function rejectDecision(view: ThreadView, opts: Common & { reason: string }): ResumeValue {
  const a = view.approval!;
  return signed(
    view,
    { type: "reject", envelopeHash: a.envelopeHash, nonce: a.nonce, message: opts.reason },
    opts,
  );
}

export function editDecision(view: ThreadView, opts: Common & { set: string[] }): ResumeValue {
  const a = view.approval!;
  if (a.changeSet) {
    const ids = a.changeSet.actions.map((x) => x.actionId);
    throw new UsageError(
      `thread ${view.threadId} waits for a change set of ${ids.length} actions (${ids.join(", ")}); an edit names the action it changes: ` +
        `decide ${view.threadId} --hash <set hash> --edit ${ids[0]} --set ${ids[0]}.FIELD=VALUE and --approve / --reject / --edit for every other action`,
    );
  }
  const set = opts.set.map((pair): [string, string] => {
    const eq = pair.indexOf("=");
    if (eq <= 0) throw new UsageError(`--set must be FIELD=VALUE, got "${pair}"`);
    return [pair.slice(0, eq), pair.slice(eq + 1)];
  });
  return signed(
    view,
    {
      type: "edit",
      envelopeHash: a.envelopeHash,
      nonce: a.nonce,
      editedAction: editedActionOf(a.envelope, set),
    },
    opts,
  );
}

/**
 * An edit's action: the envelope's operation on its object (named by the operation's id argument), with
 * its params and each FIELD=VALUE set; a create (add_task) names no object, so its args are {fields}, as
 * the approval shows them. PRIORITY=high, STATUS="in progress": a documented name becomes the exact code
 * before signing.
 */
function editedActionOf(
  e: { operation: keyof typeof OPERATIONS; object: { id: number }; params: Record<string, unknown> },
  set: Array<[field: string, value: string]>,
): { name: string; args: Record<string, unknown> } {
  const fields: Record<string, unknown> = { ...e.params };
  for (const [name, given] of set) {
    const field = name.trim().toUpperCase();
    fields[field] = enumCodeOf(field, given) ?? given;
  }
  if (OPERATIONS[e.operation].effect === "create") return { name: e.operation, args: { fields } };
  return { name: e.operation, args: { [OPERATIONS[e.operation].idArg]: e.object.id, fields } };
}

// ── Change sets decided action by action (`decide`) ──────────────────────────────────────────────

/** What `decide` was told, checked before anything is opened: every action named once, edits with their values. */
export interface SetDecisionPlan {
  /** In the order given; sent in the set's order. */
  byAction: Map<
    string,
    | { type: "approve" }
    | { type: "reject"; message?: string }
    | { type: "edit"; set: Array<[field: string, value: string]> }
  >;
}

export interface SetDecisionFlags {
  approve?: string[];
  reject?: string[];
  edit?: string[];
  set?: string[];
  reason?: string;
  override?: string;
}

const ACTION_ID = /^a[1-9][0-9]?$/;

/** "a1,a3" or "a1" → ["a1", "a3"], each an action id. */
function idsOf(flag: string, value: string): string[] {
  const ids = value.split(",").map((x) => x.trim());
  for (const id of ids)
    if (!ACTION_ID.test(id))
      throw new UsageError(
        `${flag} takes action ids as the card lists them (a1, a2, …; several as a1,a3), got "${id}"`,
      );
  return ids;
}

/**
 * Pure: the flags of `decide` as a plan, or a UsageError saying what is wrong. Whether the plan names
 * exactly the waiting set's actions is checked against the thread (`setDecisions`).
 */
export function planSetDecisions(flags: SetDecisionFlags): SetDecisionPlan {
  const byAction: SetDecisionPlan["byAction"] = new Map();
  const name = (flag: string, id: string, entry: Parameters<SetDecisionPlan["byAction"]["set"]>[1]) => {
    const earlier = byAction.get(id);
    if (earlier)
      throw new UsageError(
        `action ${id} is named twice (--${earlier.type} and ${flag}); name every action exactly once`,
      );
    byAction.set(id, entry);
  };
  for (const v of flags.approve ?? [])
    for (const id of idsOf("--approve", v)) name("--approve", id, { type: "approve" });
  for (const v of flags.reject ?? []) {
    // --reject a2="wrong person" gives that action its own reason; --reason is for the others.
    const eq = v.indexOf("=");
    if (eq >= 0) {
      const [id] = idsOf("--reject", v.slice(0, eq));
      const message = v.slice(eq + 1);
      if (message.trim() === "")
        throw new UsageError(`--reject ${id}= needs a reason after the "=" (or leave out the "=")`);
      name("--reject", id!, { type: "reject", message });
    } else
      for (const id of idsOf("--reject", v))
        name("--reject", id, {
          type: "reject",
          ...(flags.reason !== undefined ? { message: flags.reason } : {}),
        });
  }
  const edits = new Map<string, Array<[string, string]>>();
  for (const v of flags.edit ?? [])
    for (const id of idsOf("--edit", v)) {
      const set: Array<[string, string]> = [];
      edits.set(id, set);
      name("--edit", id, { type: "edit", set });
    }
  for (const pair of flags.set ?? []) {
    const m = /^(a[1-9][0-9]?)\.([^=]+)=([\s\S]*)$/.exec(pair);
    if (!m)
      throw new UsageError(
        `--set takes ACTION.FIELD=VALUE for a change set (e.g. --set a2.POST_MESSAGE="Shorter."), got "${pair}"`,
      );
    const [, id, field, value] = m;
    const set = edits.get(id!);
    if (!set)
      throw new UsageError(
        `--set ${id}.${field!.trim()}=… changes ${id}, which is not named with --edit; add --edit ${id}`,
      );
    set.push([field!.trim(), value!]);
  }
  for (const [id, set] of edits)
    if (set.length === 0) throw new UsageError(`--edit ${id} needs at least one --set ${id}.FIELD=VALUE`);
  if (byAction.size === 0)
    throw new UsageError(
      "name every action of the change set with --approve, --reject or --edit (e.g. --approve a1 --reject a2)",
    );
  if (flags.reason !== undefined && !(flags.reject ?? []).length)
    throw new UsageError("--reason is the reason for rejected actions; no action is named with --reject");
  if (flags.override !== undefined && !(flags.approve ?? []).length)
    throw new UsageError("--override passes a gate for approved actions; no action is named with --approve");
  parseOverride(flags.override);
  return { byAction };
}

/**
 * One decision per action of the waiting change set, in the set's order, each bound to the set hash
 * the person typed (`--hash`) and the set's nonce, and each signed on its own with `--key`.
 */
export function setDecisions(
  view: ThreadView,
  opts: Common & SetDecisionFlags & { hash: string },
): ResumeValue {
  const plan = planSetDecisions(opts);
  const a = view.approval!;
  const cs = a.changeSet;
  if (!cs) {
    throw new UsageError(
      `thread ${view.threadId} waits for a single envelope, not a change set: decide it with approve, reject or edit`,
    );
  }
  const ids = cs.actions.map((x) => x.actionId);
  const unknown = [...plan.byAction.keys()].filter((id) => !ids.includes(id));
  if (unknown.length)
    throw new UsageError(
      `the change set has no action ${unknown.join(", ")} (its actions: ${ids.join(", ")})`,
    );
  const missing = ids.filter((id) => !plan.byAction.has(id));
  if (missing.length) {
    throw new UsageError(
      `every action of the change set must be named once with --approve, --reject or --edit; not named: ${missing.join(", ")} (its actions: ${ids.join(", ")})`,
    );
  }
  const own = cs.actions.find((x) => x.envelopeHash === opts.hash);
  if (own) {
    throw new UsageError(
      `${opts.hash} is the envelope hash of action ${own.actionId}; a change set is decided with its set hash (the card's "Set hash:" line), also for one action`,
    );
  }
  const override = parseOverride(opts.override);
  const decidedAt = new Date().toISOString();
  const pem = readKey(opts);
  // Said before anything is sent: whether the approved actions run at once, and if not why and who approves next.
  const forecast = partialApprovalForecast(
    cs.actions,
    Object.fromEntries([...plan.byAction].map(([id, d]) => [id, d.type])),
    cs.partialExecution ?? [],
  );
  if (forecast.summary)
    process.stderr.write(
      `${forecast.summary}${cs.partialExecution ? "" : " (the server did not say which classes its policy lets run after a partial approval)"}\n`,
    );
  return {
    decisions: cs.actions.map(({ actionId, envelope }) => {
      const d = plan.byAction.get(actionId)!;
      const base = { type: d.type, envelopeHash: opts.hash, nonce: a.nonce, actionId };
      const decision =
        d.type === "approve"
          ? { ...base, ...(override ? { override } : {}) }
          : d.type === "reject"
            ? { ...base, ...(d.message !== undefined ? { message: d.message } : {}) }
            : { ...base, editedAction: editedActionOf(envelope, d.set) };
      return signedItem(view, decision, opts, decidedAt, pem);
    }),
  };
}
