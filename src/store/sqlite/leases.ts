/** Object leases and thread locks in SQLite; a lock held by a dead process on this host is taken over. */
import fs from "node:fs";
import { leaseIsFree, type ObjectLease } from "../action-machine.js";
import type { LeaseJournal, LeaseResult, LockJournal } from "../journal/api.js";
import { SqliteBase } from "./base.js";

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
  // A killed process whose parent has not reaped it yet (common for orphans in containers, where PID 1
  // may never reap) still answers signal 0; it is dead all the same.
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch {
    return true;
  }
}

export class SqliteLeases extends SqliteBase implements LeaseJournal {
  async acquireObjectLease(
    objectKey: string,
    owner: { envelopeHash: string; threadId: string },
    holdMs: number,
  ): Promise<LeaseResult> {
    return this.conn.write((): LeaseResult => {
      const now = Date.now();
      const holder = this.leaseOn(objectKey);
      if (!leaseIsFree(holder, owner.envelopeHash, now)) return { acquired: false, holder: holder! };
      return { acquired: true, expiresAt: this.putLease(objectKey, owner, holder, now, holdMs) };
    });
  }

  async objectLease(objectKey: string): Promise<ObjectLease | undefined> {
    return this.leaseOn(objectKey);
  }
}

export class SqliteLocks extends SqliteBase implements LockJournal {
  async acquireThreadLock(threadId: string, owner: string, leaseMs: number): Promise<boolean> {
    return this.conn.write(() => {
      const now = Date.now();
      const row = this.sql("SELECT owner, pid, expires_at FROM thread_locks WHERE thread_id = ?").get(
        threadId,
      ) as { owner: string; pid: number; expires_at: number } | undefined;
      // A lease held by a dead process on this host (killed mid-run) is taken over rather than waited out.
      const free = !row || row.expires_at < now || row.owner === owner || !processAlive(row.pid);
      if (!free) return false;
      this.sql(
        "INSERT OR REPLACE INTO thread_locks (thread_id, owner, pid, expires_at) VALUES (?, ?, ?, ?)",
      ).run(threadId, owner, process.pid, now + leaseMs);
      return true;
    });
  }

  async releaseThreadLock(threadId: string, owner: string): Promise<void> {
    this.conn.write(() =>
      this.sql("DELETE FROM thread_locks WHERE thread_id = ? AND owner = ?").run(threadId, owner),
    );
  }
}
