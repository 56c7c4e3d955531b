import type { CallLogEntry } from "./store.js";
import type { FaultSpec } from "./faults.js";

/** What `POST /_emulator/faults` accepts (defaults may be omitted). */
export type FaultRequest = { method: string; kind: FaultSpec["kind"]; times?: number } & Record<
  string,
  unknown
>;

/** Thin typed wrapper over the `/_emulator/*` control endpoints, for tests and demos. */
export class EmulatorControl {
  constructor(private readonly baseUrl: string) {}

  private async send(method: string, path: string, body?: unknown): Promise<unknown> {
    const res = await fetch(`${this.baseUrl}/_emulator${path}`, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json: unknown = await res.json();
    if (!res.ok)
      throw new Error(`emulator control ${method} ${path} answered ${res.status}: ${JSON.stringify(json)}`);
    return json;
  }

  async calls(filter: { method?: string; since?: number } = {}): Promise<CallLogEntry[]> {
    const q = new URLSearchParams();
    if (filter.method) q.set("method", filter.method);
    if (filter.since !== undefined) q.set("since", String(filter.since));
    const body = (await this.send("GET", `/calls${q.size > 0 ? `?${q}` : ""}`)) as { calls: CallLogEntry[] };
    return body.calls;
  }

  async armFault(fault: FaultRequest): Promise<Record<string, unknown>> {
    return ((await this.send("POST", "/faults", fault)) as { armed: Record<string, unknown> }).armed;
  }

  async clearFaults(): Promise<void> {
    await this.send("DELETE", "/faults");
  }

  /** Refuses these narrower rights of a task to every user (`[]` restores them). */
  async denyTaskRights(taskId: number, deny: string[]): Promise<void> {
    await this.send("POST", `/tasks/${taskId}/rights`, { deny });
  }

  async reset(): Promise<void> {
    await this.send("POST", "/reset");
  }
}
