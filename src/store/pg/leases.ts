/** Object leases as rows in PostgreSQL, and thread locks as session advisory locks on dedicated connections. */
import type pg from "pg";
import { leaseIsFree, type ObjectLease } from "../action-machine.js";
import { lockKey, storeError } from "../postgres.js";
import { toLease, type LeaseRow } from "../journal/rows.js";
import { PgBase } from "./base.js";
import type { LeaseJournal, LockJournal, LeaseResult } from "../journal/api.js";

export class PgLeases extends PgBase implements LeaseJournal {
  /**
   * A row in the journal's own table, not an advisory lock: the lease belongs to the action and must
   * outlive the session (and the process) that took it, so that another worker recovering the action
   * holds it, and it is released by the same transaction that moves the action to verified or closed.
   */
  async acquireObjectLease(
    objectKey: string,
    owner: { envelopeHash: string; threadId: string },
    holdMs: number,
  ): Promise<LeaseResult> {
    return this.tx(`taking the lease on ${objectKey}`, async (c): Promise<LeaseResult> => {
      const now = Date.now();
      // A second round only when another action inserted the missing row between our look and our insert.
      for (;;) {
        const holder = await this.lockLease(c, objectKey);
        if (!leaseIsFree(holder, owner.envelopeHash, now)) return { acquired: false, holder: holder! };
        if (await this.putLease(c, objectKey, owner, holder, now, holdMs))
          return { acquired: true, expiresAt: now + holdMs };
      }
    });
  }

  /** The lease on an object, if any (expired ones included). */
  async objectLease(objectKey: string): Promise<ObjectLease | undefined> {
    const rows = await this.read<LeaseRow>(
      `reading the lease on ${objectKey}`,
      `SELECT * FROM ${this.s}.object_leases WHERE object_key = $1`,
      [objectKey],
    );
    return rows[0] ? toLease(rows[0]) : undefined;
  }
}

export class PgLocks extends PgBase implements LockJournal {
  /** Connections holding a thread lock, by thread and owner. */
  private readonly held = new Map<string, pg.PoolClient>();

  async acquireThreadLock(threadId: string, owner: string, _leaseMs: number): Promise<boolean> {
    const id = `${threadId}\n${owner}`;
    if (this.held.has(id)) return true;
    const key = lockKey(this.db, `thread:${threadId}`);
    let client: pg.PoolClient;
    try {
      client = await this.pools.locks.connect();
    } catch (e) {
      throw storeError(this.db, `locking thread ${threadId}`, e);
    }
    try {
      const r = await client.query<{ locked: boolean }>(
        `SELECT pg_try_advisory_lock(${key.sql}) AS locked`,
        key.values,
      );
      if (r.rows[0]?.locked) {
        this.held.set(id, client);
        return true;
      }
      this.pools.locks.release(client);
      return false;
    } catch (e) {
      this.pools.locks.release(client, e as Error);
      throw storeError(this.db, `locking thread ${threadId}`, e);
    }
  }

  /** Never throws: a lock whose connection is gone was already released by the server. */
  async releaseThreadLock(threadId: string, owner: string): Promise<void> {
    const id = `${threadId}\n${owner}`;
    const client = this.held.get(id);
    if (!client) return;
    this.held.delete(id);
    const key = lockKey(this.db, `thread:${threadId}`);
    try {
      await client.query(`SELECT pg_advisory_unlock(${key.sql})`, key.values);
      this.pools.locks.release(client);
    } catch (e) {
      // Destroying the connection ends the session, which releases every lock it held.
      this.pools.locks.release(client, e as Error);
    }
  }

  /** Lets go of every lock connection this journal holds, ending their sessions (and so their locks). */
  dropAll(): void {
    for (const client of this.held.values()) this.pools.locks.release(client, true);
    this.held.clear();
  }
}
