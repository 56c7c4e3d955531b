/**
 * Approver credentials for the web inbox: a JSON file (ACTION_ENVELOPE_INBOX_USERS) holding scrypt
 * hashes, never passwords: {"users": [{"id": "alice", "password": "scrypt$16384$8$1$<salt>$<hash>"}]}.
 * Entries are made with `npm run cli -- inbox-user --id alice` (node:crypto scrypt, no new package).
 */
import fs from "node:fs";
import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from "node:crypto";
import { z } from "zod";
import { ConfigError } from "../errors.js";

const scrypt = (password: string, salt: Buffer, keylen: number, opts: ScryptOptions) =>
  new Promise<Buffer>((resolve, reject) =>
    scryptCb(password, salt, keylen, opts, (err, key) => (err ? reject(err) : resolve(key))),
  );

const HASH = /^scrypt\$(\d+)\$(\d+)\$(\d+)\$([A-Za-z0-9+/]+={0,2})\$([A-Za-z0-9+/]+={0,2})$/;
const DEFAULT = { N: 16384, r: 8, p: 1 } as const;
const KEY_LENGTH = 32;
/** Longer passwords are refused unread: scrypt's cost must not be the caller's to choose. */
export const MAX_PASSWORD_LENGTH = 1024;

const UsersFileSchema = z.strictObject({
  users: z.array(
    z.strictObject({
      id: z
        .string()
        .min(1)
        .max(128)
        .regex(/^[A-Za-z0-9][A-Za-z0-9._@-]*$/, "ids are letters, digits, . _ @ -"),
      password: z
        .string()
        .regex(HASH, 'must be a "scrypt$N$r$p$salt$hash" entry made by `npm run cli -- inbox-user`'),
    }),
  ),
});

export interface InboxUsers {
  /** The approver id for these credentials, or undefined. Takes the same time whether or not the id exists. */
  verify(id: string, password: string): Promise<string | undefined>;
  ids(): string[];
}

export async function hashPassword(password: string): Promise<string> {
  if (password.length === 0) throw new Error("the password is empty");
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, KEY_LENGTH, { ...DEFAULT, maxmem: 64 * 1024 * 1024 });
  return `scrypt$${DEFAULT.N}$${DEFAULT.r}$${DEFAULT.p}$${salt.toString("base64")}$${key.toString("base64")}`;
}

export async function passwordMatches(password: string, entry: string): Promise<boolean> {
  const m = HASH.exec(entry);
  if (!m || password.length > MAX_PASSWORD_LENGTH) return false;
  const [, N, r, p, salt, hash] = m as unknown as [string, string, string, string, string, string];
  const expected = Buffer.from(hash, "base64");
  const key = await scrypt(password, Buffer.from(salt, "base64"), expected.length, {
    N: Number(N),
    r: Number(r),
    p: Number(p),
    maxmem: 256 * 1024 * 1024,
  });
  return key.length === expected.length && timingSafeEqual(key, expected);
}

export function parseInboxUsers(text: string, where: string): InboxUsers {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ConfigError("ACTION_ENVELOPE_INBOX_USERS", `${where} is not JSON: ${(e as Error).message}`);
  }
  const parsed = UsersFileSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(
      "ACTION_ENVELOPE_INBOX_USERS",
      `${where}: ${issue.path.join(".") || "file"} ${issue.message}`,
    );
  }
  const byId = new Map<string, string>();
  for (const u of parsed.data.users) {
    if (byId.has(u.id))
      throw new ConfigError("ACTION_ENVELOPE_INBOX_USERS", `${where}: user ${u.id} is listed twice`);
    byId.set(u.id, u.password);
  }
  // A well-formed hash of an unknown password, so an unknown id costs as much as a wrong password.
  const decoy = `scrypt$${DEFAULT.N}$${DEFAULT.r}$${DEFAULT.p}$${randomBytes(16).toString("base64")}$${randomBytes(KEY_LENGTH).toString("base64")}`;
  return {
    async verify(id, password) {
      const entry = byId.get(id);
      const ok = await passwordMatches(password, entry ?? decoy);
      return ok && entry ? id : undefined;
    },
    ids: () => [...byId.keys()],
  };
}

export function loadInboxUsers(file: string | undefined): InboxUsers {
  if (!file) {
    throw new ConfigError(
      "ACTION_ENVELOPE_INBOX_USERS",
      "is required for the web inbox: a JSON file of approver credentials; make one with `npm run cli -- inbox-user --id <approver> --file inbox-users.json`",
    );
  }
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch {
    throw new ConfigError("ACTION_ENVELOPE_INBOX_USERS", `points to ${file}, which cannot be read`);
  }
  return parseInboxUsers(text, file);
}
