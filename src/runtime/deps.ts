/**
 * Everything the nodes need that is not graph state: the MCP tools, the model, the journal, policy,
 * approver keys and the clock. Built from config by whoever starts runs: the CLI and tests open an app
 * with their own (src/app/threads.ts), the LangGraph API server builds one per process
 * (src/runtime/server-deps.ts); nodes read them from their run's config (src/runtime/run-deps.ts).
 */
import fs from "node:fs";
import { createHash } from "node:crypto";
import path from "node:path";
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { KeyObject } from "node:crypto";
import type { AppConfig } from "../config/env.js";
import { defaultPolicy, parsePublicKeyLines, type Policy } from "../envelope/index.js";
import { parsePolicyText } from "../envelope/policy.js";
import type { Journal } from "../store/journal.js";
import type { AuditLog } from "../store/audit.js";
import { openStores } from "../store/backends.js";
import type { Keeper } from "../store/keeper.js";
import type { Bitrix24Tools } from "../tools/bitrix24-tools.js";
import type { RunningEmulator } from "./offline-default.js";
import { ConfigError } from "../errors.js";
import { WORLD_WRITABLE, refuseLooseMode } from "../config/file-mode.js";

export interface Deps {
  config: AppConfig;
  tools: Bitrix24Tools;
  model: BaseChatModel;
  modelLabel: string;
  journal: Journal;
  /** Append-only, hash-chained record of every decision point (`<dataDir>/audit.sqlite`). */
  audit: AuditLog;
  policy: Policy;
  publicKeys: Map<string, KeyObject>;
  /** Host of the portal the writes go to; never the webhook's secret code. */
  portal: string;
  clock: () => Date;
  /** The embedded emulator, when no portal was configured. */
  emulator?: RunningEmulator;
  close(): Promise<void>;
}

/** A stable host-like name for the embedded emulator's portal, derived from its state file. */
export function embeddedPortalName(statePath: string): string {
  return `emulator-${createHash("sha256").update(path.resolve(statePath)).digest("hex").slice(0, 12)}.local`;
}

export function loadPolicyFile(config: AppConfig): Policy {
  if (!config.policyPath) return defaultPolicy();
  let text: string;
  try {
    text = fs.readFileSync(config.policyPath, "utf8");
  } catch {
    throw new ConfigError("ACTION_ENVELOPE_POLICY", `points to ${config.policyPath}, which cannot be read`);
  }
  try {
    // Problems are reported as file:line:column (src/envelope/policy.ts, checkPolicyText).
    return parsePolicyText(text, config.policyPath);
  } catch (e) {
    throw new ConfigError(
      "ACTION_ENVELOPE_POLICY",
      `file ${config.policyPath} is not a valid policy (check it with: npm run cli -- policy check ${config.policyPath}): ${(e as Error).message}`,
    );
  }
}

/** ACTION_ENVELOPE_TTL_SECONDS sets every operation's TTL; a stricter per-field TTL still wins. */
export function withTtl(policy: Policy, ttlSeconds: number | undefined): Policy {
  if (!ttlSeconds) return policy;
  const operations = Object.fromEntries(
    Object.entries(policy.operations).map(([name, op]) => [
      name,
      {
        ...op,
        ttlSeconds,
        fields: Object.fromEntries(
          Object.entries(op.fields).map(([f, rule]) => [
            f,
            rule.ttlSeconds !== undefined
              ? { ...rule, ttlSeconds: Math.min(rule.ttlSeconds, ttlSeconds) }
              : rule,
          ]),
        ),
      },
    ]),
  );
  return { ...policy, operations };
}

export function loadPublicKeys(config: AppConfig): Map<string, KeyObject> {
  if (!config.approverKeysPath) return new Map();
  const p = config.approverKeysPath;
  if (!fs.existsSync(p))
    throw new ConfigError("ACTION_ENVELOPE_APPROVER_KEYS", `points to ${p}, which does not exist`);
  const isDir = fs.statSync(p).isDirectory();
  const files = isDir
    ? fs
        .readdirSync(p)
        .filter((f) => f.endsWith(".pub"))
        .map((f) => path.join(p, f))
    : [p];
  // Public keys may be read by anyone; whoever could write one could register their own key for an approver.
  const why = "whoever can write it can put their own key in an approver's place and sign as that approver";
  if (isDir) refuseLooseMode("ACTION_ENVELOPE_APPROVER_KEYS", p, WORLD_WRITABLE, why);
  for (const f of files) refuseLooseMode("ACTION_ENVELOPE_APPROVER_KEYS", f, WORLD_WRITABLE, why);
  return parsePublicKeyLines(files.map((f) => fs.readFileSync(f, "utf8")).join("\n"));
}

/**
 * What reading threads and the pending list needs: the journal and audit log (SQLite files under the
 * data directory, or DATABASE_URL), the policy, approver keys and the clock. No portal, MCP server or
 * model, so `show` and `pending` start none of them; `createDeps` adds those on top of these.
 */
export type StoreDeps = Pick<
  Deps,
  "config" | "journal" | "audit" | "policy" | "publicKeys" | "clock" | "close"
>;

export async function createStoreDeps(
  config: AppConfig,
  /** `keeper`: which side keeps the checkpoints of the threads this process registers (src/store/keeper.ts); "local" unless said. */
  opts: { clock?: () => Date; keeper?: Keeper } = {},
): Promise<StoreDeps> {
  fs.mkdirSync(config.dataDir, { recursive: true });
  // Read before anything is opened: a bad policy or key file stops the start without leaving a store open.
  const policy = withTtl(loadPolicyFile(config), config.ttlSeconds);
  const publicKeys = loadPublicKeys(config);
  const clock = opts.clock ?? (() => new Date());
  // An unreachable database stops the start here.
  const { journal, audit } = await openStores(config, {
    clock,
    ...(opts.keeper ? { keeper: opts.keeper } : {}),
  });
  const close = async () => {
    await journal.close();
    await audit.close();
  };
  try {
    await (
      await import("../hitl/legacy-approvals.js")
    ).adoptLegacyApprovals(config, journal, policy, clock());
  } catch (e) {
    await close();
    throw e;
  }
  return { config, journal, audit, policy, publicKeys, clock, close };
}

export async function createDeps(
  config: AppConfig,
  overrides: Partial<Pick<Deps, "clock" | "model" | "modelLabel">> & { keeper?: Keeper } = {},
): Promise<Deps> {
  fs.mkdirSync(config.dataDir, { recursive: true });
  // Loaded here, not with this module: the nodes import it, and `show` / `pending` load the nodes
  // (to read a thread's state) without ever starting the portal, the MCP server or a model.
  const [{ startEmulator }, { createBitrix24Tools }, { createChatModel }] = await Promise.all([
    import("./offline-default.js").then((door) => door.loadEmulator()),
    import("../tools/bitrix24-tools.js"),
    import("../models/factory.js"),
  ]);
  let emulator: RunningEmulator | undefined;
  let webhookUrl = config.webhookUrl;
  if (!webhookUrl && config.mcp.mode === "stdio") {
    // The embedded portal persists under the data directory so a later process sees the same tasks.
    emulator = await startEmulator({ port: 0, statePath: path.join(config.dataDir, "emulator.sqlite") });
    webhookUrl = emulator.webhookUrl;
  }
  const tools = await createBitrix24Tools(
    config.mcp.mode === "url"
      ? { mode: "url", url: config.mcp.url, toolNames: config.mcp.toolNames }
      : {
          mode: "stdio",
          env: {
            BITRIX24_WEBHOOK_URL: webhookUrl!,
            BITRIX24_TIMEOUT_MS: String(config.bitrix24.timeoutMs),
            BITRIX24_RATE: String(config.bitrix24.rate),
            BITRIX24_BURST: String(config.bitrix24.burst),
          },
        },
  );
  const closePortal = async () => {
    await tools.close();
    await emulator?.close();
  };
  let built: Awaited<ReturnType<typeof createChatModel>> | undefined;
  let stores: StoreDeps;
  try {
    built = overrides.model ? undefined : await createChatModel(config.model);
    stores = await createStoreDeps(config, {
      ...(overrides.clock ? { clock: overrides.clock } : {}),
      ...(overrides.keeper ? { keeper: overrides.keeper } : {}),
    });
  } catch (e) {
    await closePortal();
    throw e;
  }
  // The embedded emulator listens on a new port in every process, so its identity is its state file,
  // not host:port; otherwise an approval given in one process would be WRONG_TARGET in the next.
  const portal = emulator
    ? embeddedPortalName(path.join(config.dataDir, "emulator.sqlite"))
    : new URL(webhookUrl ?? (config.mcp.mode === "url" ? config.mcp.url : "http://unknown")).host;
  return {
    ...stores,
    tools,
    model: overrides.model ?? built!.model,
    modelLabel: overrides.modelLabel ?? built?.label ?? "custom",
    portal,
    ...(emulator ? { emulator } : {}),
    async close() {
      await tools.close();
      await stores.close();
      await emulator?.close();
    },
  };
}
