/** Action rows in SQLite through the state machine: registration, decisions, moves and refusals. */
import { type AuditEntry } from "../audit.js";
import type {
  ActionProgress,
  ActionRow,
  Phase,
  RegisteredAction,
  TransitionResult,
} from "../action-machine.js";
import { emptyProgress, leaseIsFree } from "../action-machine.js";
import {
  currentFrom,
  planMove,
  progressColumn,
  sealAction,
  toActionRow,
  type ActionDbRow,
} from "../action-rows.js";
import { toClaim, type ClaimRow } from "../journal/rows.js";
import type { ActionJournal, DecideResult, DecisionClaim } from "../journal/api.js";
import { SqliteBase } from "./base.js";
import { dueOnRegister } from "../due.js";

export class SqliteActions extends SqliteBase implements ActionJournal {
  async registerAction(a: RegisteredAction, at: string, records: AuditEntry[] = []): Promise<ActionRow> {
    return (await this.registerActions([a], at, records))[0]!;
  }

  async registerActions(
    list: RegisteredAction[],
    at: string,
    records: AuditEntry[] = [],
  ): Promise<ActionRow[]> {
    if (list.length === 0) return [];
    const threadId = list[0]!.threadId;
    if (list.some((a) => a.threadId !== threadId))
      throw new Error("registerActions: every action of one registration belongs to one thread");
    const fresh = new Set(list.map((a) => a.envelopeHash));
    const sealed = list.map((a) => sealAction(this.key, a));
    this.conn.write(() => {
      const open = this.sql(
        "SELECT * FROM actions WHERE thread_id = ? AND phase IN ('registered', 'decided')",
      ).all(threadId) as ActionDbRow[];
      for (const r of open) {
        if (!fresh.has(r.envelope_hash))
          this.sql(
            "UPDATE actions SET phase = 'superseded', due_at = NULL, due_reason = NULL, due_owner = NULL, due_lease_until = NULL WHERE envelope_hash = ?",
          ).run(r.envelope_hash);
      }
      list.forEach((a, i) => {
        const due = dueOnRegister(a)!;
        this.sql(
          `INSERT OR IGNORE INTO actions (envelope_hash, thread_id, revision, registered_json, mac, phase, progress_json, registered_at, due_at, due_reason)
             VALUES (?, ?, ?, ?, ?, 'registered', ?, ?, ?, ?)`,
        ).run(
          a.envelopeHash,
          a.threadId,
          a.revision,
          sealed[i]!.json,
          sealed[i]!.mac,
          JSON.stringify(emptyProgress()),
          at,
          due.at,
          due.reason,
        );
      });
      this.append(records);
    });
    return Promise.all(list.map(async (a) => (await this.getAction(a.envelopeHash))!));
  }

  async getAction(envelopeHash: string): Promise<ActionRow | undefined> {
    const row = this.sql("SELECT * FROM actions WHERE envelope_hash = ?").get(envelopeHash) as
      ActionDbRow | undefined;
    return row ? toActionRow(row, this.key) : undefined;
  }

  async currentAction(threadId: string): Promise<ActionRow | undefined> {
    const raw = this.sql("SELECT * FROM actions WHERE thread_id = ? ORDER BY rowid DESC LIMIT 1").get(
      threadId,
    ) as ActionDbRow | undefined;
    // A change set: every row carries the sealed set; the rows are read in the set's order.
    return currentFrom(raw ? toActionRow(raw, this.key) : undefined, (h) => this.getAction(h));
  }

  async decideAction(
    envelopeHash: string,
    claim: DecisionClaim,
    decision: NonNullable<ActionProgress["decision"]>,
    records: AuditEntry[] = [],
    lease?: { objectKey: string; holdMs: number },
  ): Promise<DecideResult> {
    return this.decideActions([{ envelopeHash, decision }], claim, records, lease);
  }

  async decideActions(
    decisions: Array<{ envelopeHash: string; decision: NonNullable<ActionProgress["decision"]> }>,
    claim: DecisionClaim,
    records: AuditEntry[] = [],
    lease?: { objectKey: string; holdMs: number },
  ): Promise<DecideResult> {
    return this.conn.write((): DecideResult => {
      const existing = this.sql("SELECT * FROM decision_claims WHERE nonce = ?").get(claim.nonce) as
        ClaimRow | undefined;
      if (existing) return { claimed: false, existing: toClaim(existing) };
      const planned: Array<{ row: ActionRow; progress: ActionProgress }> = [];
      for (const { envelopeHash, decision } of decisions) {
        const raw = this.sql("SELECT * FROM actions WHERE envelope_hash = ?").get(envelopeHash) as
          ActionDbRow | undefined;
        const row = raw ? toActionRow(raw, this.key) : undefined;
        const plan = planMove(row, envelopeHash, "decided", { decision });
        if (!plan.ok) return { claimed: false, phase: plan.phase, reason: plan.reason };
        planned.push({ row: row!, progress: plan.progress });
      }
      this.sql(
        `INSERT INTO decision_claims (envelope_hash, nonce, thread_id, revision, decision_type, approver_id, decided_at, claimed_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(
        claim.envelopeHash,
        claim.nonce,
        claim.threadId,
        claim.revision,
        claim.decisionType,
        claim.approverId,
        claim.decidedAt,
        new Date().toISOString(),
      );
      const stored = planned.map((p) =>
        this.writeMove(p.row.envelopeHash, "registered", "decided", p.progress),
      );
      // The approval's lease, when free, in this transaction rather than in one of its own before the pre-read.
      if (lease) {
        const now = Date.now();
        const holder = this.leaseOn(lease.objectKey);
        if (leaseIsFree(holder, claim.envelopeHash, now))
          this.putLease(lease.objectKey, claim, holder, now, lease.holdMs);
      }
      this.append(records);
      return { claimed: true, row: { ...planned[0]!.row, phase: "decided", progress: stored[0]! } };
    });
  }

  async moveAction(
    envelopeHash: string,
    to: Phase,
    patch: Partial<ActionProgress>,
    records: (row: ActionRow) => AuditEntry[] = () => [],
  ): Promise<TransitionResult> {
    return this.conn.write((): TransitionResult => {
      const raw = this.sql("SELECT * FROM actions WHERE envelope_hash = ?").get(envelopeHash) as
        ActionDbRow | undefined;
      const row = raw ? toActionRow(raw, this.key) : undefined;
      const plan = planMove(row, envelopeHash, to, patch);
      if (!plan.ok) return plan;
      const progress = this.writeMove(envelopeHash, row!.phase, to, plan.progress);
      const moved: ActionRow = { ...row!, phase: to, progress };
      this.append(records(moved));
      return { ok: true, row: moved };
    });
  }

  async noteRefusal(
    envelopeHash: string,
    refusal: { code: string; reason: string; at: string },
    counted: boolean,
    records: (row: ActionRow) => AuditEntry[] = () => [],
  ): Promise<ActionRow | undefined> {
    return this.conn.write((): ActionRow | undefined => {
      const raw = this.sql("SELECT * FROM actions WHERE envelope_hash = ?").get(envelopeHash) as
        ActionDbRow | undefined;
      if (!raw) return undefined;
      const p = toActionRow(raw, this.key).progress;
      const next = progressColumn(envelopeHash, {
        ...p,
        lastRefusal: refusal,
        refusalsSeen: p.refusalsSeen + 1,
        refusalsCounted: p.refusalsCounted + (counted ? 1 : 0),
      });
      this.sql("UPDATE actions SET progress_json = ? WHERE envelope_hash = ?").run(next.text, envelopeHash);
      const row = toActionRow({ ...raw, progress_json: next.text }, this.key);
      this.append(records(row));
      return row;
    });
  }
}
