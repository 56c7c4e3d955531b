/** Action rows in PostgreSQL through the state machine: registration, decisions, moves and refusals. */
import { toClaim, type ClaimRow } from "../journal/rows.js";
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
import { query } from "../postgres.js";
import type { AuditEntry } from "../audit.js";
import { PgBase } from "./base.js";
import { dueOnRegister } from "../due.js";
import type { ActionJournal, DecisionClaim, DecideResult } from "../journal/api.js";

export class PgActions extends PgBase implements ActionJournal {
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
    const fresh = list.map((a) => a.envelopeHash);
    await this.tx(
      `registering ${list.length === 1 ? `action ${list[0]!.envelopeHash}` : `a change set of ${list.length} actions`}`,
      async (c) => {
        const open = await c.query<ActionDbRow>(
          `SELECT * FROM ${this.s}.actions WHERE thread_id = $1 AND phase IN ('registered', 'decided') AND NOT (envelope_hash = ANY($2::text[])) FOR UPDATE`,
          [threadId, fresh],
        );
        for (const r of open.rows)
          await c.query(
            `UPDATE ${this.s}.actions SET phase = 'superseded', due_at = NULL, due_reason = NULL, due_owner = NULL, due_lease_until = NULL WHERE envelope_hash = $1`,
            [r.envelope_hash],
          );
        for (const a of list) {
          const sealed = sealAction(this.key, a);
          const due = dueOnRegister(a)!;
          await c.query(
            `INSERT INTO ${this.s}.actions (envelope_hash, thread_id, revision, registered_json, mac, phase, progress_json, registered_at, due_at, due_reason)
           VALUES ($1, $2, $3, $4, $5, 'registered', $6, $7, $8, $9) ON CONFLICT (envelope_hash) DO NOTHING`,
            [
              a.envelopeHash,
              a.threadId,
              a.revision,
              sealed.json,
              sealed.mac,
              JSON.stringify(emptyProgress()),
              at,
              due.at,
              due.reason,
            ],
          );
        }
        // The chain-head lock is taken here, after the thread's rows are locked, as in every transition.
        await this.append(c, records);
      },
    );
    return Promise.all(list.map(async (a) => (await this.getAction(a.envelopeHash))!));
  }

  async getAction(envelopeHash: string): Promise<ActionRow | undefined> {
    const rows = await query<ActionDbRow>(
      this.pool,
      this.db,
      `reading action ${envelopeHash}`,
      `SELECT * FROM ${this.s}.actions WHERE envelope_hash = $1`,
      [envelopeHash],
    );
    return rows[0] ? toActionRow(rows[0], this.key) : undefined;
  }

  async currentAction(threadId: string): Promise<ActionRow | undefined> {
    const rows = await query<ActionDbRow>(
      this.pool,
      this.db,
      `reading the current action of thread ${threadId}`,
      `SELECT * FROM ${this.s}.actions WHERE thread_id = $1 ORDER BY id DESC LIMIT 1`,
      [threadId],
    );
    // A change set: every row carries the sealed set; the rows are read in the set's order.
    return currentFrom(rows[0] ? toActionRow(rows[0], this.key) : undefined, (h) => this.getAction(h));
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
    return this.tx(
      `deciding ${decisions.length === 1 ? `action ${decisions[0]!.envelopeHash}` : `a change set of ${decisions.length} actions`}`,
      async (c): Promise<DecideResult> => {
        const planned: Array<{ row: ActionRow; progress: ActionProgress }> = [];
        const refusals: Array<{ phase: Phase | null; reason: string }> = [];
        for (const { envelopeHash, decision } of decisions) {
          const r = await c.query<ActionDbRow>(
            `SELECT * FROM ${this.s}.actions WHERE envelope_hash = $1 FOR UPDATE`,
            [envelopeHash],
          );
          const row = r.rows[0] ? toActionRow(r.rows[0], this.key) : undefined;
          const plan = planMove(row, envelopeHash, "decided", { decision });
          if (!plan.ok) refusals.push({ phase: plan.phase, reason: plan.reason });
          else planned.push({ row: row!, progress: plan.progress });
        }
        const inserted = await c.query(
          `INSERT INTO ${this.s}.decision_claims (envelope_hash, nonce, thread_id, revision, decision_type, approver_id, decided_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING RETURNING nonce`,
          [
            claim.envelopeHash,
            claim.nonce,
            claim.threadId,
            claim.revision,
            claim.decisionType,
            claim.approverId,
            claim.decidedAt,
          ],
        );
        if (inserted.rowCount !== 1) {
          const existing = await c.query<ClaimRow>(
            `SELECT * FROM ${this.s}.decision_claims WHERE nonce = $1`,
            [claim.nonce],
          );
          if (!existing.rows[0])
            throw new Error(
              `decision claim for nonce ${claim.nonce} conflicted but no claim with that nonce exists`,
            );
          return { claimed: false, existing: toClaim(existing.rows[0]) };
        }
        if (refusals.length > 0) {
          // Undo the claim: nothing may be decided for an action that is not waiting.
          await c.query(`DELETE FROM ${this.s}.decision_claims WHERE nonce = $1`, [claim.nonce]);
          return { claimed: false, phase: refusals[0]!.phase, reason: refusals[0]!.reason };
        }
        const stored: ActionProgress[] = [];
        for (const p of planned)
          stored.push(await this.writeMove(c, p.row.envelopeHash, "registered", "decided", p.progress));
        // The approval's lease, when free, in this transaction rather than in one of its own before the
        // pre-read; one another action inserted meanwhile is left to it (putLease takes nothing then).
        if (lease) {
          const now = Date.now();
          const holder = await this.lockLease(c, lease.objectKey);
          if (leaseIsFree(holder, claim.envelopeHash, now))
            await this.putLease(c, lease.objectKey, claim, holder, now, lease.holdMs);
        }
        await this.append(c, records);
        return { claimed: true, row: { ...planned[0]!.row, phase: "decided", progress: stored[0]! } };
      },
    );
  }

  async moveAction(
    envelopeHash: string,
    to: Phase,
    patch: Partial<ActionProgress>,
    records: (row: ActionRow) => AuditEntry[] = () => [],
  ): Promise<TransitionResult> {
    return this.tx(`moving action ${envelopeHash} to ${to}`, async (c): Promise<TransitionResult> => {
      const r = await c.query<ActionDbRow>(
        `SELECT * FROM ${this.s}.actions WHERE envelope_hash = $1 FOR UPDATE`,
        [envelopeHash],
      );
      const row = r.rows[0] ? toActionRow(r.rows[0], this.key) : undefined;
      const plan = planMove(row, envelopeHash, to, patch);
      if (!plan.ok) return plan;
      const progress = await this.writeMove(c, envelopeHash, row!.phase, to, plan.progress);
      const moved: ActionRow = { ...row!, phase: to, progress };
      await this.append(c, records(moved));
      return { ok: true, row: moved };
    });
  }

  async noteRefusal(
    envelopeHash: string,
    refusal: { code: string; reason: string; at: string },
    counted: boolean,
    records: (row: ActionRow) => AuditEntry[] = () => [],
  ): Promise<ActionRow | undefined> {
    return this.tx(
      `recording a refused decision for ${envelopeHash}`,
      async (c): Promise<ActionRow | undefined> => {
        const r = await c.query<ActionDbRow>(
          `SELECT * FROM ${this.s}.actions WHERE envelope_hash = $1 FOR UPDATE`,
          [envelopeHash],
        );
        const raw = r.rows[0];
        if (!raw) return undefined;
        const p = toActionRow(raw, this.key).progress;
        const next = progressColumn(envelopeHash, {
          ...p,
          lastRefusal: refusal,
          refusalsSeen: p.refusalsSeen + 1,
          refusalsCounted: p.refusalsCounted + (counted ? 1 : 0),
        });
        await c.query(`UPDATE ${this.s}.actions SET progress_json = $1 WHERE envelope_hash = $2`, [
          next.text,
          envelopeHash,
        ]);
        const row = toActionRow({ ...raw, progress_json: next.text }, this.key);
        await this.append(c, records(row));
        return row;
      },
    );
  }
}
