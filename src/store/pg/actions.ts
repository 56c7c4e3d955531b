/** Action rows in PostgreSQL through the state machine: registration, decisions, moves and refusals. */
import { claimValues, toClaim, type ClaimRow } from "../journal/rows.js";
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
import type { AuditEntry } from "../audit.js";
import { PgBase } from "./base.js";
import type { DecisionClaim, DecideResult } from "../journal/api.js";
import type { ActionPart } from "../journal/composed.js";

/** The actions a registration or decision is about, as its error message names them. */
const named = (hashes: string[]) =>
  hashes.length === 1 ? `action ${hashes[0]}` : `a change set of ${hashes.length} actions`;

export class PgActions extends PgBase implements ActionPart {
  async registerActions(
    list: RegisteredAction[],
    at: string,
    records: AuditEntry[] = [],
  ): Promise<ActionRow[]> {
    if (list.length === 0) return [];
    const { threadId, rows } = registrationRows(this.key, list, at);
    const fresh = list.map((a) => a.envelopeHash);
    await this.tx(`registering ${named(fresh)}`, async (c) => {
      const open = await c.query<ActionDbRow>(
        `SELECT * FROM ${this.s}.actions WHERE thread_id = $1 AND phase IN ('registered', 'decided') AND NOT (envelope_hash = ANY($2::text[])) FOR UPDATE`,
        [threadId, fresh],
      );
      for (const r of open.rows)
        await c.query(
          `UPDATE ${this.s}.actions SET phase = 'superseded', due_at = NULL, due_reason = NULL, due_owner = NULL, due_lease_until = NULL WHERE envelope_hash = $1`,
          [r.envelope_hash],
        );
      for (const values of rows)
        await c.query(
          `INSERT INTO ${this.s}.actions (envelope_hash, thread_id, revision, registered_json, mac, phase, progress_json, registered_at, due_at, due_reason)
           VALUES ($1, $2, $3, $4, $5, 'registered', $6, $7, $8, $9) ON CONFLICT (envelope_hash) DO NOTHING`,
          values,
        );
      // The chain-head lock is taken here, after the thread's rows are locked, as in every transition.
      await this.append(c, records);
    });
    return Promise.all(list.map(async (a) => (await this.getAction(a.envelopeHash))!));
  }

  async getAction(envelopeHash: string): Promise<ActionRow | undefined> {
    const rows = await this.read<ActionDbRow>(
      `reading action ${envelopeHash}`,
      `SELECT * FROM ${this.s}.actions WHERE envelope_hash = $1`,
      [envelopeHash],
    );
    return actionRowOf(rows[0], this.key);
  }

  async currentAction(threadId: string): Promise<ActionRow | undefined> {
    const rows = await this.read<ActionDbRow>(
      `reading the current action of thread ${threadId}`,
      `SELECT * FROM ${this.s}.actions WHERE thread_id = $1 ORDER BY id DESC LIMIT 1`,
      [threadId],
    );
    // A change set: every row carries the sealed set; the rows are read in the set's order.
    return currentFrom(actionRowOf(rows[0], this.key), (h) => this.getAction(h));
  }

  async decideActions(
    decisions: Array<{ envelopeHash: string; decision: NonNullable<ActionProgress["decision"]> }>,
    claim: DecisionClaim,
    records: AuditEntry[] = [],
    lease?: { objectKey: string; holdMs: number },
  ): Promise<DecideResult> {
    return this.tx(
      `deciding ${named(decisions.map((d) => d.envelopeHash))}`,
      async (c): Promise<DecideResult> => {
        const planned: PlannedMove[] = [];
        const refusals: Array<{ phase: Phase | null; reason: string }> = [];
        for (const { envelopeHash, decision } of decisions) {
          const raw = await this.lockAction(c, envelopeHash);
          const plan = planDecision(this.key, actionRowOf(raw, this.key), envelopeHash, decision);
          if (!plan.ok) refusals.push(plan);
          else planned.push(plan);
        }
        const inserted = await c.query(
          `INSERT INTO ${this.s}.decision_claims (envelope_hash, nonce, thread_id, revision, decision_type, approver_id, decided_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING RETURNING nonce`,
          claimValues(claim),
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
        const moved: ActionRow[] = [];
        for (const p of planned) moved.push(await this.writeMove(c, p));
        // The approval's lease, when free, in this transaction rather than in one of its own before the
        // pre-read; one another action inserted meanwhile is left to it (putLease takes nothing then).
        if (lease) {
          const now = Date.now();
          const holder = await this.lockLease(c, lease.objectKey);
          if (leaseIsFree(holder, claim.envelopeHash, now))
            await this.putLease(c, lease.objectKey, claim, holder, now, lease.holdMs);
        }
        await this.append(c, records);
        return { claimed: true, row: moved[0]! };
      },
    );
  }

  async moveAction(
    envelopeHash: string,
    to: Phase,
    patch: Partial<ActionProgress>,
    records: (row: ActionRow) => AuditEntry[] = () => [],
    from?: Phase,
  ): Promise<TransitionResult> {
    return this.tx(`moving action ${envelopeHash} to ${to}`, async (c): Promise<TransitionResult> => {
      const raw = await this.lockAction(c, envelopeHash);
      const plan = planSealedMove(this.key, actionRowOf(raw, this.key), envelopeHash, to, patch, from);
      if (!plan.ok) return plan;
      const moved = await this.writeMove(c, plan);
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
        const raw = await this.lockAction(c, envelopeHash);
        if (!raw) return undefined;
        const next = withRefusal(raw, this.key, refusal, counted);
        await c.query(`UPDATE ${this.s}.actions SET progress_json = $1 WHERE envelope_hash = $2`, [
          next.text,
          envelopeHash,
        ]);
        await this.append(c, records(next.row));
        return next.row;
      },
    );
  }
}
