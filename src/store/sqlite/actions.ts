/** Action rows in SQLite through the state machine: registration, decisions, moves and refusals. */
import { type AuditEntry } from "../audit.js";
import type {
  ActionProgress,
  ActionRow,
  Phase,
  RegisteredAction,
  TransitionResult,
} from "../action-machine.js";
import { leaseIsFree } from "../action-machine.js";
import {
  actionRowOf,
  currentFrom,
  planDecision,
  planSealedMove,
  registrationRows,
  withRefusal,
  type ActionDbRow,
  type PlannedMove,
} from "../action-rows.js";
import { claimValues, toClaim, type ClaimRow } from "../journal/rows.js";
import type { DecideResult, DecisionClaim } from "../journal/api.js";
import type { ActionPart } from "../journal/composed.js";
import { SqliteBase } from "./base.js";

export class SqliteActions extends SqliteBase implements ActionPart {
  async registerActions(
    list: RegisteredAction[],
    at: string,
    records: AuditEntry[] = [],
  ): Promise<ActionRow[]> {
    if (list.length === 0) return [];
    const { threadId, rows } = registrationRows(this.key, list, at);
    const fresh = new Set(list.map((a) => a.envelopeHash));
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
      for (const values of rows)
        this.sql(
          `INSERT OR IGNORE INTO actions (envelope_hash, thread_id, revision, registered_json, mac, phase, progress_json, registered_at, due_at, due_reason)
             VALUES (?, ?, ?, ?, ?, 'registered', ?, ?, ?, ?)`,
        ).run(...values);
      this.append(records);
    });
    return Promise.all(list.map(async (a) => (await this.getAction(a.envelopeHash))!));
  }

  async getAction(envelopeHash: string): Promise<ActionRow | undefined> {
    return actionRowOf(this.actionDbRow(envelopeHash), this.key);
  }

  async currentAction(threadId: string): Promise<ActionRow | undefined> {
    const raw = this.sql("SELECT * FROM actions WHERE thread_id = ? ORDER BY rowid DESC LIMIT 1").get(
      threadId,
    ) as ActionDbRow | undefined;
    // A change set: every row carries the sealed set; the rows are read in the set's order.
    return currentFrom(actionRowOf(raw, this.key), (h) => this.getAction(h));
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
      const planned: PlannedMove[] = [];
      for (const { envelopeHash, decision } of decisions) {
        const raw = this.actionDbRow(envelopeHash);
        const plan = planDecision(this.key, actionRowOf(raw, this.key), envelopeHash, decision);
        if (!plan.ok) return { claimed: false, phase: plan.phase, reason: plan.reason };
        planned.push(plan);
      }
      this.sql(
        `INSERT INTO decision_claims (envelope_hash, nonce, thread_id, revision, decision_type, approver_id, decided_at, claimed_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(...claimValues(claim), new Date().toISOString());
      const moved = planned.map((p) => this.writeMove(p));
      // The approval's lease, when free, in this transaction rather than in one of its own before the pre-read.
      if (lease) {
        const now = Date.now();
        const holder = this.leaseOn(lease.objectKey);
        if (leaseIsFree(holder, claim.envelopeHash, now))
          this.putLease(lease.objectKey, claim, holder, now, lease.holdMs);
      }
      this.append(records);
      return { claimed: true, row: moved[0]! };
    });
  }

  async moveAction(
    envelopeHash: string,
    to: Phase,
    patch: Partial<ActionProgress>,
    records: (row: ActionRow) => AuditEntry[] = () => [],
    from?: Phase,
  ): Promise<TransitionResult> {
    return this.conn.write((): TransitionResult => {
      const raw = this.actionDbRow(envelopeHash);
      const plan = planSealedMove(this.key, actionRowOf(raw, this.key), envelopeHash, to, patch, from);
      if (!plan.ok) return plan;
      const moved = this.writeMove(plan);
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
      const raw = this.actionDbRow(envelopeHash);
      if (!raw) return undefined;
      const next = withRefusal(raw, this.key, refusal, counted);
      this.sql("UPDATE actions SET progress_json = ? WHERE envelope_hash = ?").run(next.text, envelopeHash);
      this.append(records(next.row));
      return next.row;
    });
  }
}
