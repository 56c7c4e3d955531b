import { z } from "zod";
import { TASK_FIELDS } from "./methods/task-fields.js";

const base = {
  method: z
    .string()
    .min(1)
    .transform((m) =>
      m
        .trim()
        .replace(/\.json$/i, "")
        .toLowerCase(),
    ),
  /** How many matching calls the fault fires for; 0 = until cleared. */
  times: z.number().int().min(0).default(1),
};

export const FaultSpecSchema = z.discriminatedUnion("kind", [
  z.object({ ...base, kind: z.literal("latency"), ms: z.number().int().min(0).max(120_000) }),
  z.object({
    ...base,
    kind: z.literal("error"),
    status: z.number().int().min(400).max(599).default(500),
    error: z.string().default("INTERNAL_SERVER_ERROR"),
    description: z.string().default("Internal server error"),
  }),
  z.object({ ...base, kind: z.literal("apply_then_timeout") }),
  /** 429 OPERATION_TIME_LIMIT, as Bitrix24 answers a method whose time budget is used up; the call is not carried out. */
  z.object({
    ...base,
    kind: z.literal("operation_time_limit"),
    resetInSeconds: z.number().int().min(0).max(86_400).default(600),
  }),
  z.object({ ...base, kind: z.literal("timeout_without_apply") }),
  z.object({ ...base, kind: z.literal("ack_without_apply") }),
  z.object({
    ...base,
    kind: z.literal("side_effect"),
    field: z
      .string()
      .transform((f) => f.toUpperCase())
      .refine((f) => f in TASK_FIELDS, {
        message: `field must be one of ${Object.keys(TASK_FIELDS).join(", ")}`,
      }),
    value: z.union([z.string(), z.number(), z.array(z.union([z.string(), z.number()])), z.null()]),
    /** Task to change; defaults to the call's own `taskId`. */
    taskId: z.number().int().positive().optional(),
    /** Who the automation acts as in history and changedBy; default user 1. */
    userId: z.number().int().positive().default(1),
  }),
  z.object({
    ...base,
    kind: z.literal("malformed"),
    body: z.string().optional(),
    /** Whether the call is carried out before the garbled answer is sent; default true. */
    apply: z.boolean().default(true),
  }),
]);

export type FaultSpec = z.output<typeof FaultSpecSchema>;
export type ArmedFault = FaultSpec & { id: number; remaining: number | null };

export const DEFAULT_MALFORMED_BODY =
  "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center></body></html>\n";

/**
 * Faults live in this process only (not in the shared state file). Latency faults add delay to every matching
 * call while armed and combine with at most one other fault, which fires per call in the order it was armed.
 */
export class FaultRegistry {
  private faults: ArmedFault[] = [];
  private nextId = 1;

  arm(spec: FaultSpec): ArmedFault {
    const fault: ArmedFault = { ...spec, id: this.nextId++, remaining: spec.times === 0 ? null : spec.times };
    this.faults.push(fault);
    return fault;
  }

  list(): ArmedFault[] {
    return [...this.faults];
  }

  clear(method?: string): void {
    this.faults = method ? this.faults.filter((f) => f.method !== method) : [];
  }

  /** Consumes one firing of the first latency fault and the first other fault armed for `method`. */
  take(method: string): { latency?: ArmedFault; action?: ArmedFault } {
    const latency = this.faults.find((f) => f.method === method && f.kind === "latency");
    const action = this.faults.find((f) => f.method === method && f.kind !== "latency");
    for (const f of [latency, action]) {
      if (f && f.remaining !== null && --f.remaining <= 0) this.faults = this.faults.filter((x) => x !== f);
    }
    return { latency, action };
  }
}
