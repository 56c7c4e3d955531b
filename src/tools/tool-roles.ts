/** The roles a Bitrix24 tool can serve, the Bitrix24 method behind each, and the checks that keep write tools off the read path. */
import type { StructuredToolInterface } from "@langchain/core/tools";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { BITRIX24_METHOD_META_KEY, MCP_TOOL_NAMES } from "./mcp-contract.js";

export const READ_ROLES = [
  "getTask",
  "listTasks",
  "getHistory",
  "getUsers",
  "getDeal",
  "listDeals",
  "listTaskComments",
  "getTaskComment",
] as const;
/** Roles that change the portal: never handed to the model, called only through writeHandle. */
export const WRITE_ROLES = [
  "updateTask",
  "addTaskComment",
  "addTask",
  "updateDeal",
  "deleteTaskComment",
  "deleteTask",
] as const;
export type ReadRole = (typeof READ_ROLES)[number];
export type WriteRole = (typeof WRITE_ROLES)[number];
export type ToolRole = ReadRole | WriteRole;

/** How a role is served: which tool, which Bitrix24 method that tool calls, and whether it may be handed to the model. */
export interface RoleBinding {
  toolName: string;
  method: string;
  readOnly: boolean;
}

/**
 * The one place deciding what is a read. A method is a read only if it is listed here; anything else
 * (tasks.task.update, tasks.task.add, tasks.task.delete, batch, ...) counts as a write.
 */
export const READ_METHODS: ReadonlySet<string> = new Set([
  "tasks.task.get",
  "tasks.task.list",
  "tasks.task.history.list",
  "user.current",
  "user.get",
  "crm.deal.get",
  "crm.deal.list",
  "task.commentitem.get",
  "task.commentitem.getlist",
]);

export function isReadMethod(method: string): boolean {
  return READ_METHODS.has(method.toLowerCase());
}

/** Role → Bitrix24 method; fixed, whatever server or tool names are configured. */
export const ROLE_METHODS: Readonly<Record<ToolRole, string>> = {
  getTask: "tasks.task.get",
  listTasks: "tasks.task.list",
  getHistory: "tasks.task.history.list",
  getUsers: "user.get",
  getDeal: "crm.deal.get",
  listDeals: "crm.deal.list",
  listTaskComments: "task.commentitem.getlist",
  getTaskComment: "task.commentitem.get",
  updateTask: "tasks.task.update",
  addTaskComment: "task.commentitem.add",
  addTask: "tasks.task.add",
  updateDeal: "crm.deal.update",
  deleteTaskComment: "task.commentitem.delete",
  deleteTask: "tasks.task.delete",
};

/**
 * Read roles an external server may lack without failing the connection (unless its tool is named
 * explicitly): people's names on the card and in edits are then unavailable, nothing else changes.
 */
export const OPTIONAL_ROLES: ReadonlySet<ToolRole> = new Set<ToolRole>([
  "getUsers",
  "getDeal",
  "listDeals",
  "listTaskComments",
  "getTaskComment",
  // Write roles beyond updateTask: a server without them still serves task renames.
  "addTaskComment",
  "addTask",
  "updateDeal",
  "deleteTaskComment",
  "deleteTask",
]);
export const ALL_ROLES: readonly ToolRole[] = [...READ_ROLES, ...WRITE_ROLES];
export const isWriteRole = (role: string): role is WriteRole =>
  (WRITE_ROLES as readonly string[]).includes(role);

/** Each role's tool name (ours, or the external server's where `toolNames` names one) and method; a read role may not name a write tool. */
export function resolveRoles(toolNames: Partial<Record<ToolRole, string>>): Record<ToolRole, RoleBinding> {
  const roles = {} as Record<ToolRole, RoleBinding>;
  for (const role of ALL_ROLES) {
    const method = ROLE_METHODS[role];
    const toolName = toolNames[role] !== undefined ? toolNames[role] : MCP_TOOL_NAMES[role];
    roles[role] = { toolName, method, readOnly: !isWriteRole(role) && isReadMethod(method) };
  }
  for (const role of READ_ROLES) {
    for (const writeRole of WRITE_ROLES) {
      if (roles[role].toolName === roles[writeRole].toolName) {
        throw new Error(
          `MCP tool mapping: ${role} must name a read tool, but it names "${roles[role].toolName}", the ${writeRole} tool; refusing to hand a write tool to the read path`,
        );
      }
    }
  }
  return roles;
}

/**
 * The server's own description of each mapped tool must not contradict the role: a read role must not
 * point at a tool the server marks as writing, or whose declared Bitrix24 method is not a read.
 * Names and hints can only take a tool out of the read path, never put one in.
 */
export function checkServerTools(
  tools: Tool[],
  roles: Record<ToolRole, RoleBinding>,
  missing: ReadonlySet<ToolRole>,
): void {
  const byName = new Map(tools.map((t) => [t.name, t]));
  for (const role of ALL_ROLES) {
    if (missing.has(role)) continue;
    const binding = roles[role];
    const tool = byName.get(binding.toolName);
    if (!tool) {
      throw new Error(
        `MCP tool mapping: ${role} → "${binding.toolName}", but the server has no such tool (it has: ${[...byName.keys()].join(", ") || "none"})`,
      );
    }
    const declared = tool._meta?.[BITRIX24_METHOD_META_KEY];
    if (
      declared !== undefined &&
      (typeof declared !== "string" || declared.toLowerCase() !== binding.method)
    ) {
      throw new Error(
        `MCP tool mapping: ${role} expects a tool calling ${binding.method}, but "${tool.name}" declares ${JSON.stringify(declared)}`,
      );
    }
    if (binding.readOnly) {
      const hints = tool.annotations;
      if (hints?.readOnlyHint === false || hints?.destructiveHint === true) {
        throw new Error(
          `MCP tool mapping: ${role} must be a read tool, but the server marks "${tool.name}" as writing (readOnlyHint false or destructiveHint true)`,
        );
      }
    }
  }
}

export function assertReadToolsOnly(
  readTools: StructuredToolInterface[],
  roles: Record<ToolRole, RoleBinding>,
  missing: ReadonlySet<ToolRole>,
): void {
  // Read tools carry our names for their roles; each is bound to the server's tool of that role.
  const allowed = new Map<string, RoleBinding>(
    READ_ROLES.filter((role) => !missing.has(role)).map((role) => [MCP_TOOL_NAMES[role], roles[role]]),
  );
  const writeNames = new Set(WRITE_ROLES.map((role) => roles[role].toolName));
  for (const tool of readTools) {
    const binding = allowed.get(tool.name);
    if (!binding || !binding.readOnly || !isReadMethod(binding.method) || writeNames.has(binding.toolName)) {
      throw new Error(`readTools: "${tool.name}" is not an allowlisted read tool`);
    }
  }
  for (const [name] of allowed) {
    if (!readTools.some((t) => t.name === name))
      throw new Error(`readTools: the MCP adapter did not load read tool "${name}"`);
  }
}
