/**
 * `doctor`: checks a setup the way a new user needs it checked, one line per check with the fix:
 * the configuration, the portal (reachable, the webhook's scopes — task needed, crm for deals, a
 * warning without it — who it acts as, and its right to edit a sample task), the model (key,
 * endpoint, model name), the policy and approver keys, and the stores. Nothing is written anywhere except a probe file in the data directory. Exit 0 only when
 * every check passes (a warning does not fail).
 */
import fs from "node:fs";
import path from "node:path";
import { Command } from "commander";
import type { Bitrix24Client as Bitrix24ClientType } from "../bitrix24/client.js";
import { Bitrix24Error } from "../bitrix24/errors.js";
import { loadConfig, type AppConfig } from "../config/env.js";
import { allowedApprovers, type Policy } from "../envelope/index.js";
import { ConfigError } from "../errors.js";
import { escapeForTerminal, stringifyJsonSafe } from "../text/escape.js";

export type CheckStatus = "pass" | "warn" | "fail" | "skip";

export interface DoctorCheck {
  area: "config" | "portal" | "model" | "policy" | "stores";
  name: string;
  status: CheckStatus;
  detail: string;
  /** What to do about a failure or warning. */
  fix?: string;
}

export interface DoctorOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Task to check the webhook user's edit right on; default: the first task the webhook can list. */
  taskId?: number;
  /** Per-request budget for the network checks. */
  timeoutMs?: number;
}

const GROQ_DEFAULT_BASE = "https://api.groq.com";

export async function runDoctor(opts: DoctorOptions = {}): Promise<DoctorCheck[]> {
  const checks: DoctorCheck[] = [];
  const add = (c: DoctorCheck) => checks.push(c);
  let config: AppConfig;
  try {
    config = loadConfig(opts.env ?? process.env, opts.cwd ?? process.cwd());
    add({
      area: "config",
      name: "settings",
      status: "pass",
      detail: `variables valid; model ${config.model.model} (${config.model.chosenBecause})`,
    });
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    add({
      area: "config",
      name: "settings",
      status: "fail",
      detail: e.message,
      fix: "see .env.example for the variable's form",
    });
    return checks;
  }
  const timeoutMs = opts.timeoutMs ?? Math.min(config.bitrix24.timeoutMs, 10_000);

  // The runtime is loaded here, not at the top, so `--help` and other commands do not pay for it.
  const policy = checkPolicy(config, add, await import("../runtime/deps.js"));
  await checkPortal(config, timeoutMs, opts.taskId, add);
  await checkModel(config, timeoutMs, add);
  await checkStores(config, add);
  if (policy && config.webhookUrl && policy.approvers.allowUnauthenticated) {
    add({
      area: "policy",
      name: "approver identity",
      status: "warn",
      detail: `policy ${policy.id}@${policy.version} accepts self-declared approver ids, and a real portal is configured`,
      fix: 'set "allowUnauthenticated": false and "requireSignature": true in the policy (ACTION_ENVELOPE_POLICY)',
    });
  }
  return checks;
}

function checkPolicy(
  config: AppConfig,
  add: (c: DoctorCheck) => void,
  { loadPolicyFile, loadPublicKeys }: typeof import("../runtime/deps.js"),
): Policy | undefined {
  let policy: Policy;
  try {
    policy = loadPolicyFile(config);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    add({
      area: "policy",
      name: "policy file",
      status: "fail",
      detail: e.message,
      fix: "fix the file named by ACTION_ENVELOPE_POLICY (start from policy/default.json)",
    });
    return undefined;
  }
  const approvers = [...allowedApprovers(policy, "update_task")];
  // Deals (update_deal) are approved by their own list, found the same way; a policy that does not
  // allow update_deal says so instead.
  const dealApprovers = policy.operations["update_deal"]?.allowed
    ? `update_deal approvers: ${[...allowedApprovers(policy, "update_deal")].join(", ") || "none"}`
    : "update_deal: not allowed by the policy";
  add({
    area: "policy",
    name: "policy file",
    status: approvers.length ? "pass" : "fail",
    detail: `${config.policyPath ?? "built-in default policy"}: ${policy.id}@${policy.version}; update_task approvers: ${approvers.join(", ") || "none"}; ${dealApprovers}`,
    ...(approvers.length
      ? {}
      : { fix: "add approver ids to approvers.groups / approverGroups in the policy" }),
  });
  let keys: Map<string, unknown>;
  try {
    keys = loadPublicKeys(config);
  } catch (e) {
    add({
      area: "policy",
      name: "approver keys",
      status: "fail",
      detail: (e as Error).message,
      fix: "point ACTION_ENVELOPE_APPROVER_KEYS at a key file or a directory of *.pub files from `keygen`",
    });
    return policy;
  }
  // With signatures required, every approver of every operation the policy allows needs a key (a deal's too).
  const everyApprover = [
    ...new Set(
      Object.entries(policy.operations)
        .filter(([, rule]) => rule.allowed)
        .flatMap(([op]) => [...allowedApprovers(policy, op)]),
    ),
  ];
  const missing = everyApprover.filter((id) => !keys.has(id));
  if (policy.requireSignature && missing.length) {
    add({
      area: "policy",
      name: "approver keys",
      status: "fail",
      detail: `the policy requires signatures, but ${missing.join(", ")} ha${missing.length === 1 ? "s" : "ve"} no public key`,
      fix: "run `keygen --approver <id>` for each and add the .pub files to ACTION_ENVELOPE_APPROVER_KEYS",
    });
  } else {
    add({
      area: "policy",
      name: "approver keys",
      status: "pass",
      detail: `${keys.size} public key(s)${config.approverKeysPath ? ` from ${config.approverKeysPath}` : ""}${policy.requireSignature ? "; signatures required" : "; signatures optional"}`,
    });
  }
  return policy;
}

async function checkPortal(
  config: AppConfig,
  timeoutMs: number,
  taskId: number | undefined,
  add: (c: DoctorCheck) => void,
): Promise<void> {
  if (!config.webhookUrl) {
    add({
      area: "portal",
      name: "webhook",
      status: "skip",
      detail: "BITRIX24_WEBHOOK_URL is unset: the embedded emulator is used (offline demo)",
    });
    return;
  }
  const { Bitrix24Client } = await import("../bitrix24/client.js");
  const client = new Bitrix24Client({
    webhookUrl: config.webhookUrl,
    timeoutMs,
    rate: 0,
    maxReadRetries: 0,
    retryBaseMs: 0,
  });
  const host = new URL(config.webhookUrl).host;
  let scopes: unknown;
  try {
    scopes = (await client.call("scope", {}, "read")).result;
    add({ area: "portal", name: "reachable", status: "pass", detail: `${host} answered the webhook` });
  } catch (e) {
    add({ area: "portal", name: "reachable", status: "fail", detail: portalProblem(e), fix: portalFix(e) });
    return;
  }
  const list = Array.isArray(scopes) ? scopes.map(String) : [];
  if (!list.includes("task")) {
    add({
      area: "portal",
      name: "scopes",
      status: "fail",
      detail: `the webhook's scopes are ${list.length ? list.join(", ") : "(none)"}; it needs task`,
      fix: "edit the inbound webhook in Bitrix24 (Developer resources) and add Tasks (task)",
    });
  } else {
    add({ area: "portal", name: "scopes", status: "pass", detail: `scopes: ${list.join(", ")}` });
  }
  // Deals need crm (crm.deal.get / crm.deal.update). A portal used only for tasks does not: a warning.
  if (!list.includes("crm")) {
    add({
      area: "portal",
      name: "deal scope",
      status: "warn",
      detail:
        "the webhook has no crm scope: deal operations (update_deal) will fail, every deal read (crm.deal.get) is refused and the proposal ends BASELINE_READ_FAILED",
      fix: "edit the inbound webhook in Bitrix24 (Developer resources) and add CRM (crm); a portal used only for tasks does not need it",
    });
  } else {
    add({
      area: "portal",
      name: "deal scope",
      status: "pass",
      detail: "crm scope: deal operations (update_deal) may read and update deals",
    });
  }
  try {
    const me = (await client.currentUser()).result as Record<string, unknown>;
    add({
      area: "portal",
      name: "identity",
      status: "pass",
      detail:
        `acting as user ${String(me["ID"])} ${[me["NAME"], me["LAST_NAME"]].filter(Boolean).join(" ")}`.trim(),
    });
  } catch (e) {
    add({
      area: "portal",
      name: "identity",
      status: "warn",
      detail: `user.current: ${portalProblem(e)}`,
      fix: "add the user scope to the webhook to see who it acts as",
    });
  }
  await checkNames(client, list, add);
  if (!list.includes("task")) return;
  try {
    let id = taskId;
    if (id === undefined) {
      const tasks = (await client.listTasks({ select: ["ID"] })).result as {
        tasks?: Array<{ id?: unknown }>;
      };
      const first = tasks.tasks?.[0]?.id;
      if (first === undefined) {
        add({
          area: "portal",
          name: "edit right",
          status: "warn",
          detail: "the webhook user sees no task to check",
          fix: "pass --task <id> with a task the agent should change",
        });
        return;
      }
      id = Number(first);
    }
    const task = (await client.getTask(id)).result.task as { action?: Record<string, unknown> };
    const edit = task.action?.["edit"];
    if (edit === true)
      add({
        area: "portal",
        name: "edit right",
        status: "pass",
        detail: `the webhook user may edit task ${id}`,
      });
    else {
      add({
        area: "portal",
        name: "edit right",
        status: "fail",
        detail:
          edit === false
            ? `the webhook user may not edit task ${id} (action.edit=false)`
            : `task ${id}'s answer does not say whether the webhook user may edit it`,
        fix: "create the webhook as a user who may edit the tasks in scope, or give this user that right",
      });
    }
  } catch (e) {
    add({ area: "portal", name: "edit right", status: "fail", detail: portalProblem(e), fix: portalFix(e) });
  }
}

/**
 * People's names on the card and in edits come from user.get, which needs the user (or user_brief /
 * user_basic) scope. Without it nothing fails: cards show ids with "name unavailable", edits need ids.
 */
async function checkNames(
  client: Bitrix24ClientType,
  scopes: string[],
  add: (c: DoctorCheck) => void,
): Promise<void> {
  const scope = ["user", "user_brief", "user_basic"].find((s) => scopes.includes(s));
  const without = 'cards will show user ids with "name unavailable", and edits must give user ids, not names';
  if (!scope) {
    add({
      area: "portal",
      name: "people's names",
      status: "warn",
      detail: `the webhook has no user scope (user, user_brief or user_basic): ${without}`,
      fix: "edit the inbound webhook in Bitrix24 (Developer resources) and add Users (user, or user_brief)",
    });
    return;
  }
  try {
    await client.getUsers({ filter: { ACTIVE: true } });
    add({
      area: "portal",
      name: "people's names",
      status: "pass",
      detail: `user.get answers (scope ${scope}): cards show names next to user ids, and edits may name a person`,
    });
  } catch (e) {
    add({
      area: "portal",
      name: "people's names",
      status: "warn",
      detail: `user.get: ${portalProblem(e)}; ${without}`,
      fix: portalFix(e),
    });
  }
}

function portalProblem(e: unknown): string {
  if (e instanceof Bitrix24Error)
    return `${e.kind}${e.httpStatus !== undefined ? ` (HTTP ${e.httpStatus}${e.code !== undefined ? ` ${e.code}` : ""})` : ""}: ${e.description}`;
  return e instanceof Error ? e.message : String(e);
}

function portalFix(e: unknown): string {
  if (!(e instanceof Bitrix24Error)) return "check BITRIX24_WEBHOOK_URL";
  switch (e.kind) {
    case "auth":
      return "the webhook code or user id in BITRIX24_WEBHOOK_URL is wrong, or the webhook was deleted: copy the URL of the inbound webhook again";
    case "transport_timeout":
      return "check the host and port in BITRIX24_WEBHOOK_URL and that the portal is reachable from this machine";
    case "not_found":
      return "pass --task <id> with a task the webhook user can see";
    case "rate_limited":
    case "operation_time_limit":
      return "the portal is limiting requests; try again later";
    default:
      return "check BITRIX24_WEBHOOK_URL: it must be https://<portal>/rest/<userId>/<code>/";
  }
}

async function checkModel(
  config: AppConfig,
  timeoutMs: number,
  add: (c: DoctorCheck) => void,
): Promise<void> {
  const m = config.model;
  if (m.model === "offline") {
    add({
      area: "model",
      name: "model",
      status: "pass",
      detail: "offline model: deterministic, no network, no key",
    });
    return;
  }
  const id = m.model.slice("groq/".length);
  const base = (m.groqBaseUrl ?? GROQ_DEFAULT_BASE).replace(/\/+$/, "");
  add({
    area: "model",
    name: "key",
    status: m.groqApiKey ? "pass" : "fail",
    detail: m.groqApiKey ? "GROQ_API_KEY is set" : "GROQ_API_KEY is not set",
    ...(m.groqApiKey ? {} : { fix: "set GROQ_API_KEY or use MODEL=offline" }),
  });
  let res: Response;
  try {
    res = await fetch(`${base}/openai/v1/models`, {
      headers: { authorization: `Bearer ${m.groqApiKey ?? ""}` },
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (e) {
    const cause = (e as { cause?: { code?: unknown } }).cause?.code;
    add({
      area: "model",
      name: "endpoint",
      status: "fail",
      detail: `cannot reach ${base} (${typeof cause === "string" ? cause : (e as Error).message}) [MODEL_UNREACHABLE]`,
      fix: "check the network and GROQ_BASE_URL, or use MODEL=offline",
    });
    return;
  }
  const text = await res.text();
  if (res.status === 401 || res.status === 403) {
    add({
      area: "model",
      name: "endpoint",
      status: "fail",
      detail: `${base} refused the key (HTTP ${res.status}) [MODEL_AUTH_FAILED]`,
      fix: "check GROQ_API_KEY",
    });
    return;
  }
  if (res.status === 429) {
    add({
      area: "model",
      name: "endpoint",
      status: "warn",
      detail: `${base} is rate limiting this key (HTTP 429) [MODEL_RATE_LIMITED]${res.headers.get("retry-after") ? `; retry after ${res.headers.get("retry-after")} s` : ""}`,
    });
    return;
  }
  if (!res.ok) {
    add({
      area: "model",
      name: "endpoint",
      status: "warn",
      detail: `${base} answered HTTP ${res.status} to the models list; the model name ${id} could not be checked`,
    });
    return;
  }
  add({ area: "model", name: "endpoint", status: "pass", detail: `${base} accepted the key` });
  let ids: string[] = [];
  try {
    ids = ((JSON.parse(text) as { data?: Array<{ id?: unknown }> }).data ?? []).map((d) => String(d.id));
  } catch {
    // an endpoint that lists models in another form: the name stays unchecked
  }
  if (ids.length === 0)
    add({
      area: "model",
      name: "model name",
      status: "warn",
      detail: `the models list could not be read; ${id} unchecked`,
    });
  else if (ids.includes(id))
    add({ area: "model", name: "model name", status: "pass", detail: `${id} is offered to this key` });
  else
    add({
      area: "model",
      name: "model name",
      status: "fail",
      detail: `${id} is not among the ${ids.length} models offered to this key`,
      fix: `set MODEL=groq/<one of: ${ids.slice(0, 8).join(", ")}${ids.length > 8 ? ", …" : ""}>`,
    });
}

async function checkStores(config: AppConfig, add: (c: DoctorCheck) => void): Promise<void> {
  if (config.database) {
    const db = config.database;
    const { createPool } = await import("../store/postgres.js");
    const pool = createPool(db, { max: 1, name: "doctor" });
    try {
      const rows = (
        await pool.query<{ t: string | null }>("SELECT to_regclass($1) AS t", [
          `${db.schema}.schema_migrations`,
        ])
      ).rows;
      const migrated = rows[0]?.t != null;
      add({
        area: "stores",
        name: "postgresql",
        status: "pass",
        detail: `${db.label} reachable; schema ${db.schema} ${migrated ? "migrated" : "not created yet (it is created on first use)"}`,
      });
    } catch (e) {
      add({
        area: "stores",
        name: "postgresql",
        status: "fail",
        detail: `${db.label}: ${(e as Error).message}`,
        fix: "check DATABASE_URL (host, port, user, password, database) and that PostgreSQL accepts connections",
      });
    } finally {
      await pool.end().catch(() => {});
    }
  } else {
    try {
      fs.mkdirSync(config.dataDir, { recursive: true });
      const probe = path.join(config.dataDir, `.doctor-${process.pid}`);
      fs.writeFileSync(probe, "");
      fs.rmSync(probe);
      add({ area: "stores", name: "sqlite", status: "pass", detail: `${config.dataDir} is writable` });
    } catch (e) {
      add({
        area: "stores",
        name: "sqlite",
        status: "fail",
        detail: `${config.dataDir}: ${(e as Error).message}`,
        fix: "set ACTION_ENVELOPE_DATA_DIR to a writable directory",
      });
    }
  }
  const key = config.journalKey;
  if (key.source === "env")
    add({
      area: "stores",
      name: "journal key",
      status: "pass",
      detail: "ACTION_ENVELOPE_JOURNAL_KEY is set",
    });
  else {
    const inside = path.resolve(key.path).startsWith(path.resolve(config.dataDir) + path.sep);
    const exists = fs.existsSync(key.path);
    add({
      area: "stores",
      name: "journal key",
      status: inside ? "fail" : "pass",
      detail: `${key.path} ${exists ? "exists" : "will be created on first use"}${inside ? ", inside the data directory" : ""}`,
      ...(inside
        ? { fix: "keep the journal key outside the data directory (ACTION_ENVELOPE_JOURNAL_KEY_FILE)" }
        : {}),
    });
  }
}

/** One line per check: status, area and name, what was found, and the fix. */
export function renderDoctor(checks: DoctorCheck[]): string {
  const lines = checks.map((c) => {
    const head = `${c.status.toUpperCase().padEnd(4)}  ${`${c.area}/${c.name}`.padEnd(22)} ${escapeForTerminal(c.detail)}`;
    return c.fix ? `${head} — fix: ${escapeForTerminal(c.fix)}` : head;
  });
  const failed = checks.filter((c) => c.status === "fail").length;
  lines.push(failed ? `${failed} check${failed === 1 ? "" : "s"} failed` : "all checks passed");
  return `${lines.join("\n")}\n`;
}

export function doctorCommand(): Command {
  return new Command("doctor")
    .description(
      "Check the portal, model, policy, keys and stores; one line per check with the fix; exit 0 only when all pass",
    )
    .option(
      "--task <id>",
      "task to check the webhook user's edit right on (default: the first task it can list)",
    )
    .option("--json", "print JSON")
    .action(async (opts: { task?: string; json?: boolean }) => {
      const taskId =
        opts.task !== undefined && /^[1-9]\d{0,15}$/.test(opts.task) ? Number(opts.task) : undefined;
      const checks = await runDoctor(taskId !== undefined ? { taskId } : {});
      if (opts.json)
        process.stdout.write(
          `${stringifyJsonSafe({ ok: !checks.some((c) => c.status === "fail"), checks })}\n`,
        );
      else process.stdout.write(renderDoctor(checks));
      process.exitCode = checks.some((c) => c.status === "fail") ? 2 : 0;
    });
}
