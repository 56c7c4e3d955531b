/**
 * The one place that reads process.env. Every setting is validated here so a bad value stops the
 * program at start with the variable's name and the shape it must have, never deep inside a run.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { z } from "zod";
import { ConfigError } from "../errors.js";

const ROLES = [
  "getTask",
  "listTasks",
  "getHistory",
  "getUsers",
  "getDeal",
  "listDeals",
  "listTaskComments",
  "getTaskComment",
  "updateTask",
  "addTaskComment",
  "addTask",
  "updateDeal",
  "deleteTaskComment",
  "deleteTask",
] as const;
export type ToolRoleName = (typeof ROLES)[number];

/** Connections one process opens to PostgreSQL when ACTION_ENVELOPE_PG_POOL is unset. */
export const DEFAULT_PG_POOL = 10;
export const MIN_PG_POOL = 2;

// Messages leave out the variable's name: ConfigError puts it in front of every message.
const wholeNumber = () => z.string().regex(/^\d+$/, "must be a whole number").transform(Number);
const positiveInt = () => wholeNumber().refine((n) => n > 0, "must be greater than 0");

/** How long after an approved action enters a step a worker may take its run over (src/store/due.ts). */
export const DEFAULT_RESUME_GRACE_MS = 5_000;

const nonNegativeNumber = () =>
  z
    .string()
    .regex(/^\d+(\.\d+)?$/, "must be a number ≥ 0")
    .transform(Number);

/** http(s) only: a bare "localhost:3391" parses as a URL with the scheme "localhost:". */
const httpUrl = (message: string) => z.string().url({ protocol: /^https?$/, message });

/** A part of a URL, or "" when it does not parse. */
function urlPart(url: string, part: "pathname" | "host"): string {
  try {
    return new URL(url)[part];
  } catch {
    return "";
  }
}

const webhookUrl = httpUrl("must be a URL like https://your.bitrix24.com/rest/1/abcdef123456/")
  .refine((u) => /\/rest\/\d+\/[^/]+\/?$/.test(urlPart(u, "pathname")), {
    message: "must be an inbound webhook URL ending in /rest/<userId>/<code>/",
  })
  .transform((u) => (u.endsWith("/") ? u : `${u}/`));

/** postgres:// or postgresql:// with a host; the messages never repeat the value, which may hold a password. */
const databaseUrl = z.string().refine((u) => /^postgres(ql)?:\/\/[^/]/.test(u) && urlPart(u, "host") !== "", {
  message: "must be a PostgreSQL URL like postgres://user:password@host:5432/database",
});

const modelSetting = z
  .string()
  .regex(
    /^(offline|groq\/[\w.:/-]+)$/,
    'must be "offline" or "groq/<model-id>", e.g. groq/llama-3.3-70b-versatile',
  );

const toolMapping = z.string().transform((text, ctx) => {
  const mapping: Partial<Record<ToolRoleName, string>> = {};
  for (const pair of text
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean)) {
    const [role, name] = pair.split("=").map((s) => s.trim());
    if (!role || !name || !(ROLES as readonly string[]).includes(role)) {
      ctx.addIssue({
        code: "custom",
        message: `expected role=toolName pairs with roles ${ROLES.join(", ")}; got "${pair}"`,
      });
      return z.NEVER;
    }
    mapping[role as ToolRoleName] = name;
  }
  return mapping;
});

const EnvSchema = z.object({
  BITRIX24_WEBHOOK_URL: webhookUrl.optional(),
  BITRIX24_MCP_URL: httpUrl(
    "must be the http(s) URL of a Streamable HTTP MCP endpoint, e.g. http://127.0.0.1:3391/mcp",
  ).optional(),
  BITRIX24_MCP_TOOLS: toolMapping.optional(),
  BITRIX24_TIMEOUT_MS: positiveInt().optional(),
  BITRIX24_RATE: nonNegativeNumber().optional(),
  BITRIX24_BURST: positiveInt().optional(),
  BITRIX24_IDEMPOTENCY: z.enum(["auto", "on", "off"], { error: 'must be "auto", "on" or "off"' }).optional(),
  MODEL: modelSetting.optional(),
  GROQ_API_KEY: z.string().min(1).optional(),
  GROQ_BASE_URL: httpUrl("must be a URL such as https://api.groq.com").optional(),
  ACTION_ENVELOPE_DATA_DIR: z.string().min(1).optional(),
  DATABASE_URL: databaseUrl.optional(),
  // At least 2: one connection for queries and one for thread locks (src/store/postgres.ts, openPools).
  ACTION_ENVELOPE_PG_POOL: positiveInt()
    .refine(
      (n) => n >= MIN_PG_POOL,
      `must be at least ${MIN_PG_POOL} (one connection for queries, one for thread locks)`,
    )
    .optional(),
  ACTION_ENVELOPE_PG_PREPARE: z.enum(["on", "off"], { error: 'must be "on" or "off"' }).optional(),
  ACTION_ENVELOPE_DB_SCHEMA: z
    .string()
    .regex(
      /^[a-z_][a-z0-9_]{0,62}$/,
      "must be a lower-case SQL identifier (letters, digits, _), e.g. action_envelope",
    )
    .optional(),
  ACTION_ENVELOPE_POLICY: z.string().min(1).optional(),
  ACTION_ENVELOPE_APPROVER_KEYS: z.string().min(1).optional(),
  ACTION_ENVELOPE_API_TOKENS: z.string().min(1).optional(),
  ACTION_ENVELOPE_DEFAULT_REQUESTER: z.string().trim().min(1).max(128, "at most 128 characters").optional(),
  ACTION_ENVELOPE_DEFAULT_APPROVER: z.string().trim().min(1).max(128, "at most 128 characters").optional(),
  LANGGRAPH_API_URL: httpUrl(
    "must be the http(s) URL of a LangGraph API server, e.g. http://127.0.0.1:2024",
  ).optional(),
  LANGGRAPH_API_TOKEN: z.string().min(1).optional(),
  ACTION_ENVELOPE_INBOX_USERS: z.string().min(1).optional(),
  ACTION_ENVELOPE_TTL_SECONDS: positiveInt().optional(),
  ACTION_ENVELOPE_MAX_AGENT_STEPS: positiveInt().optional(),
  ACTION_ENVELOPE_MAX_INVALID_PROPOSALS: positiveInt().optional(),
  ACTION_ENVELOPE_MAX_REFUSED_DECISIONS: positiveInt().optional(),
  ACTION_ENVELOPE_MAX_REVISIONS: positiveInt().optional(),
  ACTION_ENVELOPE_OBJECT_LEASE_MS: positiveInt().optional(),
  ACTION_ENVELOPE_OBJECT_WAIT_MS: positiveInt().optional(),
  ACTION_ENVELOPE_RESUME_GRACE_MS: wholeNumber().optional(),
  ACTION_ENVELOPE_JOURNAL_KEY: z
    .string()
    .refine(
      (k) => Buffer.from(k, "base64").length >= 32 && /^[A-Za-z0-9+/]+={0,2}$/.test(k),
      "must be at least 32 bytes, base64-encoded (e.g. `openssl rand -base64 32`)",
    )
    .optional(),
  ACTION_ENVELOPE_JOURNAL_KEY_FILE: z.string().min(1).optional(),
  ACTION_ENVELOPE_WRITE_ANCHOR_FILE: z.string().min(1).optional(),
});

export interface AppConfig {
  /** Unset means: start the embedded emulator on the data directory's portal file. */
  webhookUrl?: string;
  mcp: { mode: "stdio" } | { mode: "url"; url: string; toolNames: Partial<Record<ToolRoleName, string>> };
  bitrix24: {
    timeoutMs: number;
    rate: number;
    burst: number;
    /**
     * Whether writes carry REST 3.0's Idempotency-Key (and a write whose answer was lost is re-sent with
     * the same key on recovery): "on", "off", or "auto" = on for the embedded emulator only. Unset = auto.
     */
    idempotency?: "auto" | "on" | "off";
  };
  model: {
    model: "offline" | `groq/${string}`;
    groqApiKey?: string;
    groqBaseUrl?: string;
    chosenBecause: string;
  };
  dataDir: string;
  /** Set by DATABASE_URL: checkpoints, journal and audit log live in PostgreSQL instead of files under dataDir. */
  database?: DatabaseConfig;
  policyPath?: string;
  approverKeysPath?: string;
  /** LangGraph API token file (src/auth/tokens.ts); unset means the API runs open, for development. */
  apiTokensPath?: string;
  /**
   * Open mode only: the requester recorded for a chat request that names none (agent-chat-ui sends only
   * {messages}). Self-declared like every id on an open server; with API tokens the requester is the caller.
   */
  defaultRequester?: string;
  /**
   * The approver id the CLI's decision commands use when --as is not given (approve, reject, edit,
   * decide). Unset: such a command stops with a usage error; no identity is invented.
   */
  defaultApprover?: string;
  /** Web inbox approver credentials (src/inbox/users.ts): scrypt hashes, never passwords. */
  inboxUsersPath?: string;
  /** The CLI's API mode (src/api/cli-api.ts): a LangGraph API server to talk to instead of the local stores, and its bearer token. */
  langgraphApi: { url?: string; token?: string };
  ttlSeconds?: number;
  limits: {
    maxAgentSteps: number;
    maxInvalidProposals: number;
    maxRefusedDecisions: number;
    maxRevisions: number;
  };
  /**
   * The per-object lease an approved action holds from its pre-read to its verification: how long one
   * lasts unless renewed (it must outlast a write's timeout), and how long a second action on the same
   * object waits for it before ending TARGET_BUSY with nothing sent.
   */
  objectLease: { holdMs: number; waitMs: number };
  /**
   * How long after an approved action enters a step a worker may take its run over (src/store/due.ts):
   * a run that is still going moves it on before then. Recorded with the step, by the process taking it.
   */
  resumeGraceMs: number;
  /**
   * The key that MACs the journal's registered rows, kept outside the data directory: given inline
   * (ACTION_ENVELOPE_JOURNAL_KEY), or a file created on first use.
   */
  journalKey: { source: "env"; key: Buffer } | { source: "file"; path: string };
  /**
   * The write anchor (src/store/write-anchor.ts), beside the journal key and like it outside the data
   * directory: ACTION_ENVELOPE_WRITE_ANCHOR_FILE, else `<key file>.anchor`, else (an inline key)
   * `write.anchor` in the key file's default folder.
   */
  writeAnchorPath: string;
}

export interface DatabaseConfig {
  url: string;
  /**
   * The most connections this process opens to the database (ACTION_ENVELOPE_PG_POOL), shared by the
   * journal, the audit log, the checkpointer and thread locks. Unset: DEFAULT_PG_POOL.
   */
  poolSize?: number;
  /**
   * Statements with parameters are prepared once per connection (ACTION_ENVELOPE_PG_PREPARE, default
   * on); false for a connection pooler that does not keep named statements per client.
   */
  prepare?: boolean;
  /** Every table (ours and the checkpointer's) lives in this schema; several deployments can share a database. */
  schema: string;
  /** postgres://user@host:port/database, for messages; never the password. */
  label: string;
}

/** The URL without its password (and without query options, which may carry secrets too). */
export function databaseLabel(url: string): string {
  try {
    const u = new URL(url);
    const user = u.username ? `${decodeURIComponent(u.username)}@` : "";
    return `${u.protocol}//${user}${u.host}${u.pathname === "/" ? "" : u.pathname}`;
  } catch {
    return "postgres://(unparseable URL)";
  }
}

/**
 * Loads `.env` from the working directory into process.env when the file exists; variables already
 * set in the environment win. Only command-line entry points call this.
 */
export function loadDotEnv(cwd = process.cwd()): void {
  const file = path.join(cwd, ".env");
  if (!fs.existsSync(file)) return;
  const before = { ...process.env };
  process.loadEnvFile(file);
  for (const [k, v] of Object.entries(before)) process.env[k] = v;
}

/** $XDG_CONFIG_HOME/action-envelope/journal.key, else ~/.config/action-envelope/journal.key: never the data directory. */
function journalKeyPath(env: NodeJS.ProcessEnv, given: string | undefined, cwd: string): string {
  if (given) return path.resolve(cwd, given);
  const base = env["XDG_CONFIG_HOME"] || path.join(env["HOME"] || os.homedir(), ".config");
  return path.join(base, "action-envelope", "journal.key");
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): AppConfig {
  // Empty strings count as unset: `.env` files often carry `NAME=` placeholders.
  // Empty means unset, except for the token file: an empty value there would silently open the API.
  const tokens = env["ACTION_ENVELOPE_API_TOKENS"];
  if (tokens !== undefined && tokens.trim() === "") {
    throw new ConfigError(
      "ACTION_ENVELOPE_API_TOKENS",
      "is set but empty, which would leave the LangGraph API open to every caller; set it to the API token file (npm run cli -- api-token …), or unset it (unset ACTION_ENVELOPE_API_TOKENS) for open development mode",
    );
  }
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const parsed = EnvSchema.safeParse(present);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const name = String(issue.path[0] ?? "environment");
    throw new ConfigError(name, issue.message);
  }
  const e = parsed.data;
  if (e.MODEL?.startsWith("groq/") && !e.GROQ_API_KEY) {
    throw new ConfigError("GROQ_API_KEY", `is required when MODEL=${e.MODEL}; set it or use MODEL=offline`);
  }
  const model: AppConfig["model"] = e.MODEL
    ? { model: e.MODEL as AppConfig["model"]["model"], chosenBecause: "MODEL is set" }
    : e.GROQ_API_KEY
      ? { model: "groq/llama-3.3-70b-versatile", chosenBecause: "GROQ_API_KEY is set and MODEL is not" }
      : { model: "offline", chosenBecause: "neither MODEL nor GROQ_API_KEY is set" };
  if (e.GROQ_API_KEY) model.groqApiKey = e.GROQ_API_KEY;
  if (e.GROQ_BASE_URL) model.groqBaseUrl = e.GROQ_BASE_URL;

  // Settings that refine another one mean nothing without it.
  const needs = [
    ["ACTION_ENVELOPE_DB_SCHEMA", "DATABASE_URL"],
    ["ACTION_ENVELOPE_PG_POOL", "DATABASE_URL"],
    ["ACTION_ENVELOPE_PG_PREPARE", "DATABASE_URL"],
    ["BITRIX24_MCP_TOOLS", "BITRIX24_MCP_URL"],
  ] as const;
  for (const [setting, base] of needs)
    if (e[setting] && !e[base])
      throw new ConfigError(setting, `only applies with ${base}; set that too or remove it`);
  return {
    ...(e.BITRIX24_WEBHOOK_URL ? { webhookUrl: e.BITRIX24_WEBHOOK_URL } : {}),
    mcp: e.BITRIX24_MCP_URL
      ? { mode: "url", url: e.BITRIX24_MCP_URL, toolNames: e.BITRIX24_MCP_TOOLS ?? {} }
      : { mode: "stdio" },
    bitrix24: {
      timeoutMs: e.BITRIX24_TIMEOUT_MS ?? 30_000,
      rate: e.BITRIX24_RATE ?? 2,
      burst: e.BITRIX24_BURST ?? 50,
      ...(e.BITRIX24_IDEMPOTENCY ? { idempotency: e.BITRIX24_IDEMPOTENCY } : {}),
    },
    model,
    dataDir: path.resolve(cwd, e.ACTION_ENVELOPE_DATA_DIR ?? ".data"),
    ...(e.DATABASE_URL
      ? {
          database: {
            url: e.DATABASE_URL,
            schema: e.ACTION_ENVELOPE_DB_SCHEMA ?? "public",
            label: databaseLabel(e.DATABASE_URL),
            poolSize: e.ACTION_ENVELOPE_PG_POOL ?? DEFAULT_PG_POOL,
            prepare: e.ACTION_ENVELOPE_PG_PREPARE !== "off",
          },
        }
      : {}),
    ...(e.ACTION_ENVELOPE_POLICY ? { policyPath: path.resolve(cwd, e.ACTION_ENVELOPE_POLICY) } : {}),
    ...(e.ACTION_ENVELOPE_APPROVER_KEYS
      ? { approverKeysPath: path.resolve(cwd, e.ACTION_ENVELOPE_APPROVER_KEYS) }
      : {}),
    ...(e.ACTION_ENVELOPE_API_TOKENS
      ? { apiTokensPath: path.resolve(cwd, e.ACTION_ENVELOPE_API_TOKENS) }
      : {}),
    ...(e.ACTION_ENVELOPE_DEFAULT_REQUESTER ? { defaultRequester: e.ACTION_ENVELOPE_DEFAULT_REQUESTER } : {}),
    ...(e.ACTION_ENVELOPE_DEFAULT_APPROVER ? { defaultApprover: e.ACTION_ENVELOPE_DEFAULT_APPROVER } : {}),
    ...(e.ACTION_ENVELOPE_INBOX_USERS
      ? { inboxUsersPath: path.resolve(cwd, e.ACTION_ENVELOPE_INBOX_USERS) }
      : {}),
    langgraphApi: {
      ...(e.LANGGRAPH_API_URL ? { url: e.LANGGRAPH_API_URL } : {}),
      ...(e.LANGGRAPH_API_TOKEN ? { token: e.LANGGRAPH_API_TOKEN } : {}),
    },
    ...(e.ACTION_ENVELOPE_TTL_SECONDS ? { ttlSeconds: e.ACTION_ENVELOPE_TTL_SECONDS } : {}),
    limits: {
      maxAgentSteps: e.ACTION_ENVELOPE_MAX_AGENT_STEPS ?? 12,
      maxInvalidProposals: e.ACTION_ENVELOPE_MAX_INVALID_PROPOSALS ?? 2,
      maxRefusedDecisions: e.ACTION_ENVELOPE_MAX_REFUSED_DECISIONS ?? 5,
      maxRevisions: e.ACTION_ENVELOPE_MAX_REVISIONS ?? 3,
    },
    objectLease: {
      holdMs: e.ACTION_ENVELOPE_OBJECT_LEASE_MS ?? 5 * 60_000,
      waitMs: e.ACTION_ENVELOPE_OBJECT_WAIT_MS ?? 60_000,
    },
    resumeGraceMs: e.ACTION_ENVELOPE_RESUME_GRACE_MS ?? DEFAULT_RESUME_GRACE_MS,
    journalKey: e.ACTION_ENVELOPE_JOURNAL_KEY
      ? { source: "env", key: Buffer.from(e.ACTION_ENVELOPE_JOURNAL_KEY, "base64") }
      : { source: "file", path: journalKeyPath(env, e.ACTION_ENVELOPE_JOURNAL_KEY_FILE, cwd) },
    writeAnchorPath: e.ACTION_ENVELOPE_WRITE_ANCHOR_FILE
      ? path.resolve(cwd, e.ACTION_ENVELOPE_WRITE_ANCHOR_FILE)
      : e.ACTION_ENVELOPE_JOURNAL_KEY
        ? path.join(path.dirname(journalKeyPath(env, undefined, cwd)), "write.anchor")
        : `${journalKeyPath(env, e.ACTION_ENVELOPE_JOURNAL_KEY_FILE, cwd)}.anchor`,
  };
}
