/**
 * The API token file (ACTION_ENVELOPE_API_TOKENS): who may call the LangGraph API and in which roles.
 * It holds the sha256 of each token, never the token, so the file can be read by anyone who may see
 * the configuration without handing out access:
 *
 *   {"tokens": [{"token_sha256": "<64 hex>", "identity": "alice", "roles": ["approver"]}]}
 *
 * `npm run cli -- api-token --identity alice --role approver` prints a fresh token and its entry.
 */
import crypto from "node:crypto";
import fs from "node:fs";
import { z } from "zod";
import { ConfigError } from "../errors.js";
import { WORLD_WRITABLE, refuseLooseMode } from "../config/file-mode.js";

export const API_ROLES = ["requester", "approver", "admin"] as const;
export type ApiRole = (typeof API_ROLES)[number];

const TokenEntrySchema = z
  .object({
    token_sha256: z
      .string()
      .regex(
        /^[0-9a-f]{64}$/,
        "must be 64 lower-case hex characters: the sha256 of the token (sha256sum), not the token itself",
      ),
    identity: z
      .string()
      .regex(
        /^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$/,
        "must be an id such as alice or alice@example.com (letters, digits, . _ @ -; at most 128)",
      ),
    roles: z
      .array(z.enum(API_ROLES, { message: `each role must be one of ${API_ROLES.join(", ")}` }))
      .min(1, "must name at least one role"),
  })
  .strict();

const TokenFileSchema = z
  .object({
    tokens: z
      .array(TokenEntrySchema)
      .min(
        1,
        "must list at least one token; leave ACTION_ENVELOPE_API_TOKENS unset for open development mode",
      ),
  })
  .strict();

export interface ApiPrincipal {
  identity: string;
  roles: ApiRole[];
}

export interface ApiTokenTable {
  /** The file it came from, for messages. */
  file: string;
  entries: Array<ApiPrincipal & { digest: Buffer }>;
}

export function sha256Hex(token: string): string {
  return crypto.createHash("sha256").update(token, "utf8").digest("hex");
}

const fail = (file: string, problem: string) =>
  new ConfigError("ACTION_ENVELOPE_API_TOKENS", `file ${file}: ${problem}`);

/** Parses the file's text; every problem names the file and the entry (tokens[i], with its identity when known). */
export function parseApiTokens(text: string, file: string): ApiTokenTable {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw fail(file, `is not JSON (${(e as Error).message})`);
  }
  const parsed = TokenFileSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const [top, index, ...rest] = issue.path;
    let where = issue.path.map(String).join(".") || "(file)";
    if (top === "tokens" && typeof index === "number") {
      const identity = (json as { tokens?: Array<{ identity?: unknown }> }).tokens?.[index]?.identity;
      where = `tokens[${index}]${typeof identity === "string" ? ` (identity ${JSON.stringify(identity)})` : ""}${rest.length ? `.${rest.map(String).join(".")}` : ""}`;
    }
    throw fail(file, `${where}: ${issue.message}`);
  }
  const seen = new Map<string, number>();
  parsed.data.tokens.forEach((t, i) => {
    const earlier = seen.get(t.token_sha256);
    if (earlier !== undefined)
      throw fail(
        file,
        `tokens[${i}] (identity "${t.identity}"): token_sha256 repeats tokens[${earlier}]; one token maps to one identity`,
      );
    seen.set(t.token_sha256, i);
  });
  return {
    file,
    entries: parsed.data.tokens.map((t) => ({
      identity: t.identity,
      roles: [...new Set(t.roles)],
      digest: Buffer.from(t.token_sha256, "hex"),
    })),
  };
}

export function loadApiTokens(file: string): ApiTokenTable {
  // The file holds hashes, so others may read it; whoever could write it could add a token of their own.
  refuseLooseMode(
    "ACTION_ENVELOPE_API_TOKENS",
    file,
    WORLD_WRITABLE,
    "whoever can write it can add a token of their own with any role",
  );
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (e) {
    throw fail(file, `cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  return parseApiTokens(text, file);
}

/**
 * The principal whose token this is, or undefined. Compares the token's sha256 with every entry in
 * constant time and does not stop at the first match, so timing tells nothing about the table.
 */
export function principalFor(table: ApiTokenTable, token: string): ApiPrincipal | undefined {
  const digest = crypto.createHash("sha256").update(token, "utf8").digest();
  let found: ApiPrincipal | undefined;
  for (const entry of table.entries) {
    if (crypto.timingSafeEqual(entry.digest, digest) && found === undefined)
      found = { identity: entry.identity, roles: entry.roles };
  }
  return found;
}

/** A fresh token (256 random bits) and the line to add to the token file for it. */
export function newApiToken(
  identity: string,
  roles: ApiRole[],
): { token: string; entry: { token_sha256: string; identity: string; roles: ApiRole[] } } {
  const token = `ae_${crypto.randomBytes(32).toString("base64url")}`;
  const entry = { token_sha256: sha256Hex(token), identity, roles: [...new Set(roles)] };
  const check = TokenEntrySchema.safeParse(entry);
  if (!check.success)
    throw new Error(`${check.error.issues[0]!.path.join(".")}: ${check.error.issues[0]!.message}`);
  return { token, entry };
}
