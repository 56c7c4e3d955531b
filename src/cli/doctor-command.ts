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
import { loadConfig, type AppConfig } from "../config/env.js";
import { allowedApprovers, type Policy } from "../envelope/index.js";
import { ConfigError } from "../errors.js";
import { stringifyJsonSafe } from "../text/escape.js";
import { renderDoctor, type AddCheck, type DoctorCheck } from "./doctor-check.js";
import { checkPortal } from "./doctor-portal.js";
import { checkModel } from "./doctor-model.js";

export interface DoctorOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Task to check the webhook user's edit right on; default: the first task the webhook can list. */
  taskId?: number;
}

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
  // Per-request budget for the network checks.
  const timeoutMs = Math.min(config.bitrix24.timeoutMs, 10_000);

  // The runtime is loaded here, not at the top, so `--help` and other commands do not pay for it.
  const inArea =
    (area: DoctorCheck["area"]): AddCheck =>
    (c) =>
      add({ area, ...c });
  const policy = checkPolicy(config, inArea("policy"), await import("../runtime/deps.js"));
  await checkPortal(config, timeoutMs, opts.taskId, inArea("portal"));
  await checkModel(config, timeoutMs, inArea("model"));
  await checkStores(config, inArea("stores"));
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
  add: AddCheck,
  { loadPolicyFile, loadPublicKeys }: typeof import("../runtime/deps.js"),
): Policy | undefined {
  let policy: Policy;
  try {
    policy = loadPolicyFile(config);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    add({
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
      name: "approver keys",
      status: "fail",
      detail: `the policy requires signatures, but ${missing.join(", ")} ha${missing.length === 1 ? "s" : "ve"} no public key`,
      fix: "run `keygen --approver <id>` for each and add the .pub files to ACTION_ENVELOPE_APPROVER_KEYS",
    });
  } else {
    add({
      name: "approver keys",
      status: "pass",
      detail: `${keys.size} public key(s)${config.approverKeysPath ? ` from ${config.approverKeysPath}` : ""}${policy.requireSignature ? "; signatures required" : "; signatures optional"}`,
    });
  }
  return policy;
}

async function checkStores(config: AppConfig, add: AddCheck): Promise<void> {
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
        name: "postgresql",
        status: "pass",
        detail: `${db.label} reachable; schema ${db.schema} ${migrated ? "migrated" : "not created yet (it is created on first use)"}`,
      });
    } catch (e) {
      add({
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
      add({ name: "sqlite", status: "pass", detail: `${config.dataDir} is writable` });
    } catch (e) {
      add({
        name: "sqlite",
        status: "fail",
        detail: `${config.dataDir}: ${(e as Error).message}`,
        fix: "set ACTION_ENVELOPE_DATA_DIR to a writable directory",
      });
    }
  }
  const key = config.journalKey;
  if (key.source === "env")
    add({ name: "journal key", status: "pass", detail: "ACTION_ENVELOPE_JOURNAL_KEY is set" });
  else {
    const inside = path.resolve(key.path).startsWith(path.resolve(config.dataDir) + path.sep);
    const exists = fs.existsSync(key.path);
    add({
      name: "journal key",
      status: inside ? "fail" : "pass",
      detail: `${key.path} ${exists ? "exists" : "will be created on first use"}${inside ? ", inside the data directory" : ""}`,
      ...(inside
        ? { fix: "keep the journal key outside the data directory (ACTION_ENVELOPE_JOURNAL_KEY_FILE)" }
        : {}),
    });
  }
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
