import { pathToFileURL } from "node:url";
import { runMcpServerCli, type McpServerCliOptions } from "./mcp-server.js";

/**
 * Standalone stdio entry (`node dist/tools/mcp-stdio.js`, or `tsx src/tools/mcp-stdio.ts` from source), spawned by the MCP client. Besides the
 * config module this is the one place that reads the environment.
 */
export function readMcpServerEnv(env: NodeJS.ProcessEnv): McpServerCliOptions {
  const webhookUrl = env.BITRIX24_WEBHOOK_URL?.trim();
  if (!webhookUrl) {
    throw new Error(
      "BITRIX24_WEBHOOK_URL is required: the inbound webhook URL, e.g. https://portal.bitrix24.com/rest/1/<code>/",
    );
  }
  const opts: McpServerCliOptions = { webhookUrl };
  const rate = optionalNumber(env, "BITRIX24_RATE", 0);
  const burst = optionalNumber(env, "BITRIX24_BURST", 1);
  const timeoutMs = optionalNumber(env, "BITRIX24_TIMEOUT_MS", 1);
  if (rate !== undefined) opts.rate = rate;
  if (burst !== undefined) opts.burst = burst;
  if (timeoutMs !== undefined) opts.timeoutMs = timeoutMs;
  return opts;
}

function optionalNumber(env: NodeJS.ProcessEnv, name: string, min: number): number | undefined {
  const raw = env[name]?.trim();
  if (!raw) return undefined;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min)
    throw new Error(`${name}: expected a number >= ${min}, got ${JSON.stringify(raw)}`);
  return value;
}

async function main(): Promise<void> {
  let opts: McpServerCliOptions;
  try {
    opts = readMcpServerEnv(process.env);
  } catch (err) {
    process.stderr.write(`mcp-stdio: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(2);
  }
  const handle = await runMcpServerCli(opts);
  // The client closing our stdin is the shutdown signal; idle keep-alive sockets must not keep us alive.
  const stop = () => {
    void handle.close().finally(() => process.exit(0));
  };
  process.stdin.once("end", stop);
  process.stdin.once("close", stop);
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err) => {
    // One line, like every other startup failure; the stack only when asked for (ACTION_ENVELOPE_DEBUG=1).
    const debug = process.env["ACTION_ENVELOPE_DEBUG"] === "1";
    const text =
      err instanceof Error
        ? debug
          ? (err.stack ?? err.message)
          : err.message.replace(/\s*\n\s*/g, " ")
        : String(err);
    process.stderr.write(`mcp-stdio: ${text}\n`);
    process.exit(1);
  });
}
