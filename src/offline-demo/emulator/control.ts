import { Hono } from "hono";
import { FaultSpecSchema, type FaultRegistry } from "./faults.js";
import { jsonResponse } from "./respond.js";
import type { Store } from "./store.js";

const DENIABLE_RIGHTS = ["changeDeadline", "edit.plan", "edit.originator"];

const controlError = (code: string, description: string, status = 400) =>
  jsonResponse({ error: code, error_description: description }, status);

/** `/_emulator/*`: test and demo controls. Never rate limited, never written to the call log. */
export function createControlRoutes(store: Store, faults: FaultRegistry): Hono {
  const app = new Hono();

  app.get("/calls", (c) => {
    const method = c.req.query("method")?.toLowerCase();
    const since = Number(c.req.query("since") ?? 0);
    return jsonResponse({ calls: store.calls({ method, sinceSeq: Number.isFinite(since) ? since : 0 }) });
  });
  app.delete("/calls", () => {
    store.clearCalls();
    return jsonResponse({ cleared: true });
  });

  app.get("/faults", () => jsonResponse({ faults: faults.list() }));
  app.post("/faults", async (c) => {
    let body: unknown;
    try {
      body = await c.req.json();
    } catch {
      return controlError(
        "INVALID_FAULT",
        'expected a JSON body like {"method":"tasks.task.update","kind":"error"}',
      );
    }
    const parsed = FaultSpecSchema.safeParse(body);
    if (!parsed.success) {
      const detail = parsed.error.issues
        .map((i) => `${i.path.join(".") || "(body)"}: ${i.message}`)
        .join("; ");
      return controlError("INVALID_FAULT", `invalid fault: ${detail}`);
    }
    return jsonResponse({ armed: faults.arm(parsed.data) });
  });
  app.delete("/faults", (c) => {
    faults.clear(c.req.query("method")?.toLowerCase());
    return jsonResponse({ cleared: true });
  });

  // A task's narrower rights (changeDeadline, edit.plan, edit.originator) refused to every user, over
  // the seed: {"deny":["changeDeadline"]}; {"deny":[]} restores them. /reset drops it with the rest.
  app.post("/tasks/:id/rights", async (c) => {
    const task = store.getTask(Number(c.req.param("id")));
    if (!task) return controlError("NOT_FOUND", `no task ${c.req.param("id")}`, 404);
    const body = (await c.req.json().catch(() => null)) as { deny?: unknown } | null;
    const deny = body?.deny;
    if (!Array.isArray(deny) || !deny.every((r) => typeof r === "string" && DENIABLE_RIGHTS.includes(r))) {
      return controlError(
        "INVALID_RIGHTS",
        `expected a JSON body like {"deny":["changeDeadline"]}, each one of ${DENIABLE_RIGHTS.join(", ")}`,
      );
    }
    const { deniedRights: _old, ...rest } = task;
    store.putTask(deny.length > 0 ? { ...rest, deniedRights: deny as string[] } : rest);
    return jsonResponse({ taskId: task.id, denied: deny });
  });

  app.post("/reset", () => {
    store.reset();
    faults.clear();
    return jsonResponse({ reset: true });
  });

  app.notFound(() => controlError("NOT_FOUND", "unknown emulator control endpoint", 404));
  return app;
}
