/**
 * The portal checks of `doctor`: the webhook reachable, its scopes (task needed, crm for deals, user for
 * names), who it acts as, and its right to edit a sample task.
 */
import type { Bitrix24Client as Bitrix24ClientType } from "../bitrix24/client.js";
import { Bitrix24Error } from "../bitrix24/errors.js";
import type { AppConfig } from "../config/env.js";
import type { AddCheck } from "./doctor-check.js";

export async function checkPortal(
  config: AppConfig,
  timeoutMs: number,
  taskId: number | undefined,
  add: AddCheck,
): Promise<void> {
  if (!config.webhookUrl) {
    add({
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
    add({ name: "reachable", status: "pass", detail: `${host} answered the webhook` });
  } catch (e) {
    add({ name: "reachable", status: "fail", detail: portalProblem(e), fix: portalFix(e) });
    return;
  }
  const list = Array.isArray(scopes) ? scopes.map(String) : [];
  if (!list.includes("task")) {
    add({
      name: "scopes",
      status: "fail",
      detail: `the webhook's scopes are ${list.length ? list.join(", ") : "(none)"}; it needs task`,
      fix: "edit the inbound webhook in Bitrix24 (Developer resources) and add Tasks (task)",
    });
  } else {
    add({ name: "scopes", status: "pass", detail: `scopes: ${list.join(", ")}` });
  }
  // Deals need crm (crm.deal.get / crm.deal.update). A portal used only for tasks does not: a warning.
  if (!list.includes("crm")) {
    add({
      name: "deal scope",
      status: "warn",
      detail:
        "the webhook has no crm scope: deal operations (update_deal) will fail, every deal read (crm.deal.get) is refused and the proposal ends BASELINE_READ_FAILED",
      fix: "edit the inbound webhook in Bitrix24 (Developer resources) and add CRM (crm); a portal used only for tasks does not need it",
    });
  } else {
    add({
      name: "deal scope",
      status: "pass",
      detail: "crm scope: deal operations (update_deal) may read and update deals",
    });
  }
  try {
    const me = (await client.currentUser()).result as Record<string, unknown>;
    add({
      name: "identity",
      status: "pass",
      detail:
        `acting as user ${String(me["ID"])} ${[me["NAME"], me["LAST_NAME"]].filter(Boolean).join(" ")}`.trim(),
    });
  } catch (e) {
    add({
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
      add({ name: "edit right", status: "pass", detail: `the webhook user may edit task ${id}` });
    else {
      add({
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
    add({ name: "edit right", status: "fail", detail: portalProblem(e), fix: portalFix(e) });
  }
}

/**
 * People's names on the card and in edits come from user.get, which needs the user (or user_brief /
 * user_basic) scope. Without it nothing fails: cards show ids with "name unavailable", edits need ids.
 */
async function checkNames(client: Bitrix24ClientType, scopes: string[], add: AddCheck): Promise<void> {
  const scope = ["user", "user_brief", "user_basic"].find((s) => scopes.includes(s));
  const without = 'cards will show user ids with "name unavailable", and edits must give user ids, not names';
  if (!scope) {
    add({
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
      name: "people's names",
      status: "pass",
      detail: `user.get answers (scope ${scope}): cards show names next to user ids, and edits may name a person`,
    });
  } catch (e) {
    add({
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
