/** The waiting-approvals listing in PostgreSQL, and the older version's approvals index it adopts. */
import { LEGACY_APPROVALS_SQL, toLegacyApproval, type LegacyApprovalRow } from "../journal/rows.js";
import type { ActionRow } from "../action-machine.js";
import { toActionRow, type ActionDbRow } from "../action-rows.js";
import {
  countSql,
  pageSql,
  POSTGRES,
  type RegisteredFilter,
  type RegisteredPageFilter,
} from "../waiting-list.js";
import { PgBase } from "./base.js";
import type { ApprovalListing, LegacyApproval } from "../journal/api.js";

export class PgListing extends PgBase implements ApprovalListing {
  async listRegistered(f: RegisteredPageFilter): Promise<ActionRow[]> {
    const q = pageSql(POSTGRES, `${this.s}.actions`, f);
    const rows = await this.read<ActionDbRow>("listing waiting approvals", q.text, q.args);
    return rows.map((r) => toActionRow(r, this.key, true));
  }

  async countRegistered(f: RegisteredFilter): Promise<number> {
    const q = countSql(POSTGRES, `${this.s}.actions`, f);
    const rows = await this.read<{ n: string }>("counting waiting approvals", q.text, q.args);
    return Number(rows[0]?.n ?? 0);
  }

  private async hasLegacyApprovals(): Promise<boolean> {
    const rows = await this.read<{ t: string | null }>(
      "looking for an older version's approvals table",
      "SELECT to_regclass($1) AS t",
      [`${this.s}.approvals`],
    );
    return rows[0]?.t != null;
  }

  async legacyApprovals(): Promise<LegacyApproval[] | null> {
    if (!(await this.hasLegacyApprovals())) return null;
    const rows = await this.read<LegacyApprovalRow>(
      "listing approvals an older version indexed",
      LEGACY_APPROVALS_SQL(`${this.s}.`),
    );
    return rows.map(toLegacyApproval);
  }

  async retireLegacyApprovals(): Promise<void> {
    await this.run(
      "retiring the older version's approvals table",
      `ALTER TABLE IF EXISTS ${this.s}.approvals RENAME TO approvals_adopted`,
    );
  }
}
