/** The tool names and `_meta` keys our MCP server and its client agree on. */

/** Key in each tool's `_meta` naming the one Bitrix24 method the tool calls; the client checks it. */
export const BITRIX24_METHOD_META_KEY = "action-envelope/bitrix24-method";

/** Our server's tool name for each role (src/tools/tool-roles.ts). */
export const MCP_TOOL_NAMES = {
  getTask: "get_task_by_id",
  listTasks: "list_tasks",
  getHistory: "get_task_history",
  getUsers: "get_users",
  getDeal: "get_deal",
  listDeals: "search_deals",
  listTaskComments: "list_task_comments",
  getTaskComment: "get_task_comment",
  updateTask: "update_task",
  addTaskComment: "add_task_comment",
  addTask: "add_task",
  updateDeal: "update_deal",
  deleteTaskComment: "delete_task_comment",
  deleteTask: "delete_task",
} as const;

/** `_meta` key of an update answer that the portal replayed for a repeated Idempotency-Key. */
export const IDEMPOTENT_REPLAYED_META_KEY = "action-envelope/idempotentReplayed";
