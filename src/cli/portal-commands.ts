/**
 * The portal commands: `emulator` serves the offline demo's Bitrix24 emulator, and `mcp` serves the Bitrix24
 * MCP tools against BITRIX24_WEBHOOK_URL. Each loads what it serves inside its action.
 */
import path from "node:path";
import { Command } from "commander";
import { loadConfig } from "../config/env.js";
import { ConfigError } from "../errors.js";
import { esc } from "../text/escape.js";

/** `emulator`: a local Bitrix24-compatible REST emulator, until Ctrl-C. */
export function emulatorCommand(): Command {
  return new Command("emulator")
    .description("Serve a local Bitrix24-compatible REST emulator")
    .option("--port <n>", "port (0 = free port)", "0")
    .option("--seed <file>", "seed JSON with users and tasks")
    .option("--rate <n>", "leaky bucket drain per second (0 disables)", "2")
    .option("--burst <n>", "leaky bucket size", "50")
    .option("--state <file>", "persist portal state in this SQLite file")
    .action(async (opts: { port: string; seed?: string; rate: string; burst: string; state?: string }) => {
      const { startEmulator, loadSeedFile } = await (
        await import("../runtime/offline-default.js")
      ).loadEmulator();
      const emu = await startEmulator({
        port: Number(opts.port),
        rate: Number(opts.rate),
        burst: Number(opts.burst),
        ...(opts.seed ? { seed: loadSeedFile(opts.seed) } : {}),
        ...(opts.state ? { statePath: path.resolve(opts.state) } : {}),
      });
      process.stdout.write(esc`webhook: ${emu.webhookUrl}\n`);
      await waitForSignal();
      await emu.close();
    });
}

/** `mcp`: the Bitrix24 MCP tools over stdio, or Streamable HTTP with --http. */
export function mcpCommand(): Command {
  return new Command("mcp")
    .description("Serve the Bitrix24 MCP tools (stdio by default) against BITRIX24_WEBHOOK_URL")
    .option("--http", "serve Streamable HTTP on 127.0.0.1 instead of stdio")
    .option("--port <n>", "HTTP port (0 = free port)", "0")
    .action(async (opts: { http?: boolean; port: string }) => {
      const { runMcpServerCli } = await import("../tools/mcp-server.js");
      const config = loadConfig();
      if (!config.webhookUrl)
        throw new ConfigError(
          "BITRIX24_WEBHOOK_URL",
          "is required for the MCP server (e.g. from `npm run cli -- emulator`)",
        );
      await runMcpServerCli({
        http: Boolean(opts.http),
        port: Number(opts.port),
        webhookUrl: config.webhookUrl,
        timeoutMs: config.bitrix24.timeoutMs,
        rate: config.bitrix24.rate,
        burst: config.bitrix24.burst,
      });
    });
}

function waitForSignal(): Promise<void> {
  return new Promise((resolve) => {
    process.once("SIGINT", () => resolve());
    process.once("SIGTERM", () => resolve());
  });
}
