import { formatPortalDate } from "../dates.js";
import { errors } from "../errors.js";
import { canRead, historyUser } from "../shapes.js";
import { isRecord, requireTaskId, type MethodHandler } from "./context.js";

/**
 * `result.list[]` with numeric ids, oldest first like the recorded portal answer; `filter.FIELD` narrows by field,
 * `order` on ID/CREATED_DATE may reverse it. A missing task gives an empty list, an unreadable one an access error.
 */
export const listHistory: MethodHandler = (params, ctx) => {
  const id = requireTaskId(params, () => errors.missingParam("taskId"));
  const task = ctx.store.getTask(id);
  if (!task) return { result: { list: [] } };
  if (!canRead(task, ctx.userId)) throw errors.accessDenied();
  let rows = ctx.store.history(id);
  if (isRecord(params.filter)) {
    const field = Object.entries(params.filter).find(([k]) => k.toUpperCase() === "FIELD")?.[1];
    if (typeof field === "string") rows = rows.filter((r) => r.field === field.toUpperCase());
  }
  if (isRecord(params.order)) {
    const dir = Object.entries(params.order).find(([k]) => /^(id|created_?date)$/i.test(k))?.[1];
    if (typeof dir === "string" && dir.toLowerCase() === "desc") rows = [...rows].reverse();
  }
  const users = new Map<number, ReturnType<typeof historyUser>>();
  const list = rows.map((r) => {
    if (!users.has(r.userId)) users.set(r.userId, historyUser(ctx.store.getUser(r.userId), r.userId));
    return {
      id: r.id,
      createdDate: formatPortalDate(r.createdDate),
      field: r.field,
      value: { from: r.from, to: r.to },
      user: users.get(r.userId),
    };
  });
  return { result: { list } };
};
