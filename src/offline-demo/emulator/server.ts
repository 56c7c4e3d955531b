import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { serve, type HttpBindings } from "@hono/node-server";
import { Hono, type Context } from "hono";
import { createControlRoutes } from "./control.js";
import { FaultRegistry } from "./faults.js";
import { createRestHandler, type Lifecycle } from "./rest-handler.js";
import { jsonResponse } from "./respond.js";
import { defaultSeed } from "./seed.js";
import { Store } from "./store.js";
import { DEFAULT_SCOPES, type EmulatorOptions, type RunningEmulator } from "./types.js";

export const DEFAULTS = {
  host: "127.0.0.1",
  userId: 1,
  code: "emulator-secret-code",
  rate: 2,
  burst: 50,
  maxBodyBytes: 1_048_576,
} as const;

export async function startEmulator(opts: EmulatorOptions = {}): Promise<RunningEmulator> {
  const host = opts.host ?? DEFAULTS.host;
  const settings = {
    userId: opts.userId ?? DEFAULTS.userId,
    code: opts.code ?? DEFAULTS.code,
    rate: opts.rate ?? DEFAULTS.rate,
    burst: opts.burst ?? DEFAULTS.burst,
    maxBodyBytes: opts.maxBodyBytes ?? DEFAULTS.maxBodyBytes,
    scopes: opts.scopes ?? [...DEFAULT_SCOPES],
  };
  const store = new Store(opts.statePath ?? ":memory:", opts.seed ?? defaultSeed());
  const faults = new FaultRegistry();

  // Requests held open by timeout faults, and sleeping latency faults: both end when the emulator closes.
  const releases = new Set<() => void>();
  let closed = false;
  const life: Lifecycle = {
    hold: (c: Context<{ Bindings: HttpBindings }>) =>
      new Promise<Response>((resolve) => {
        const socket = c.env.incoming.socket;
        const release = () => {
          releases.delete(release);
          socket.destroy();
          resolve(new Response(null, { status: 504 }));
        };
        if (closed || c.req.raw.signal.aborted) return release();
        releases.add(release);
        c.req.raw.signal.addEventListener("abort", release, { once: true });
      }),
    sleep: (ms) =>
      new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          releases.delete(done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        releases.add(done);
      }),
  };

  const app = new Hono<{ Bindings: HttpBindings }>();
  app.route("/_emulator", createControlRoutes(store, faults));
  const rest = createRestHandler(store, faults, settings, life);
  app.on(["GET", "POST"], "/rest/*", async (c) => {
    if (closed)
      return jsonResponse(
        { error: "INTERNAL_SERVER_ERROR", error_description: "Emulator is shutting down" },
        503,
      );
    return rest(c);
  });
  app.all("/rest/*", () =>
    jsonResponse({ error: "INVALID_REQUEST", error_description: "Only GET and POST are accepted" }, 405),
  );
  app.notFound(() => jsonResponse({ error: "NOT_FOUND", error_description: "Not found" }, 404));
  app.onError((err) =>
    jsonResponse(
      { error: "INTERNAL_SERVER_ERROR", error_description: `emulator failure: ${err.message}` },
      500,
    ),
  );

  const server = await new Promise<Server>((resolve, reject) => {
    const s = serve({ fetch: app.fetch, port: opts.port ?? 0, hostname: host }, () =>
      resolve(s as Server),
    ) as Server;
    s.once("error", reject);
  });
  const port = (server.address() as AddressInfo).port;
  const baseUrl = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;

  return {
    port,
    baseUrl,
    webhookUrl: `${baseUrl}/rest/${settings.userId}/${settings.code}/`,
    async close() {
      if (closed) return;
      closed = true;
      for (const release of [...releases]) release();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      store.close();
    },
  };
}
