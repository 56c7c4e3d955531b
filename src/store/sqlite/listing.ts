/** The waiting-approvals listing in SQLite, and the older version's approvals index it adopts. */
import type { ActionRow } from "../action-machine.js";
import { toActionRow, type ActionDbRow } from "../action-rows.js";
import {
  countSql,
  pageSql,
  SQLITE,
  type RegisteredFilter,
  type RegisteredPageFilter,
} from "../waiting-list.js";
import { LEGACY_APPROVALS_SQL, toLegacyApproval, type LegacyApprovalRow } from "../journal/rows.js";
import type { ApprovalListing, LegacyApproval } from "../journal/api.js";
import { SqliteBase } from "./base.js";

export class SqliteListing extends SqliteBase implements ApprovalListing {
  async listRegistered(f: RegisteredPageFilter): Promise<ActionRow[]> {
    const q = pageSql(SQLITE, "actions", f);
    return (this.sql(q.text).all(...q.args) as ActionDbRow[]).map((r) => toActionRow(r, this.key, true));
  }

  async countRegistered(f: RegisteredFilter): Promise<number> {
    const q = countSql(SQLITE, "actions", f);
    return (this.sql(q.text).get(...q.args) as { n: number }).n;
  }

  private hasLegacyApprovals(): boolean {
    return (
      this.db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'approvals'").get() !==
      undefined
    );
  }

  async legacyApprovals(): Promise<LegacyApproval[] | null> {
    if (!this.hasLegacyApprovals()) return null;
    return this.db
      .prepare(LEGACY_APPROVALS_SQL(""))
      .all()
      .map((r) => toLegacyApproval(r as LegacyApprovalRow));
  }

  async retireLegacyApprovals(): Promise<void> {
    this.conn.write(
      () => this.hasLegacyApprovals() && this.db.exec("ALTER TABLE approvals RENAME TO approvals_adopted"),
    );
  }
}
