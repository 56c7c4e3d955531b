import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { waitForExit } from "./support/processes.js";
import {
  defaultSeed,
  EmulatorControl,
  loadSeedFile,
  SeedError,
  startEmulator,
  type RunningEmulator,
} from "../src/offline-demo/emulator/index.js";
import { leak } from "../src/offline-demo/emulator/rate-limit.js";

let dir: string;
const started: RunningEmulator[] = [];
const children: ChildProcess[] = [];

async function start(opts: Parameters<typeof startEmulator>[0]) {
  const emu = await startEmulator(opts);
  started.push(emu);
  return emu;
}
async function call(emu: RunningEmulator | string, method: string, params: Record<string, unknown> = {}) {
  const base = typeof emu === "string" ? emu : emu.webhookUrl;
  const res = await fetch(base + method, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(params),
  });
  return { status: res.status, body: (await res.json()) as any };
}
const title = async (emu: RunningEmulator | string, taskId = 4) =>
  (await call(emu, "tasks.task.get", { taskId })).body.result.task.title;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "emulator-state-"));
});
afterEach(async () => {
  await Promise.all(started.splice(0).map((e) => e.close()));
  // Each emulator process is stopped and waited for, so none is left for the file's end to kill.
  await Promise.all(
    children.splice(0).map((child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = waitForExit(child, 10_000);
      child.kill("SIGTERM");
      return exited;
    }),
  );
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("rate limit", () => {
  it("drains the bucket by rate per second and refuses what would overflow it", () => {
    const full = { level: 5, updated: 0 };
    expect(leak(full, 2, 5, 0)).toEqual({ state: { level: 5, updated: 0 }, allowed: false });
    expect(leak(full, 2, 5, 1000)).toEqual({ state: { level: 4, updated: 1000 }, allowed: true });
    expect(leak(undefined, 2, 5, 0)).toEqual({ state: { level: 1, updated: 0 }, allowed: true });
    expect(leak({ level: 1, updated: 0 }, 2, 5, 60_000).state.level).toBe(1);
  });

  it("answers 503 QUERY_LIMIT_EXCEEDED once the burst is spent, logs it, and never limits /_emulator", async () => {
    const emu = await start({ rate: 1, burst: 5 });
    const statuses: number[] = [];
    let limited: unknown;
    for (let i = 0; i < 10; i++) {
      const r = await call(emu, "user.current");
      statuses.push(r.status);
      if (r.status === 503) limited = r.body;
    }
    expect(statuses.slice(0, 5)).toEqual([200, 200, 200, 200, 200]);
    expect(statuses).toContain(503);
    expect(limited).toEqual({ error: "QUERY_LIMIT_EXCEEDED", error_description: "Too many requests" });
    const control = new EmulatorControl(emu.baseUrl);
    const calls = await control.calls();
    expect(calls).toHaveLength(10);
    expect(calls.filter((c) => c.status === 503).length).toBe(statuses.filter((s) => s === 503).length);
    await control.reset(); // control endpoints pass even with an empty bucket, and reset refills it
    expect((await call(emu, "user.current")).status).toBe(200);
  });

  it("rate 0 disables limiting", async () => {
    const emu = await start({ rate: 0, burst: 1 });
    for (let i = 0; i < 5; i++) expect((await call(emu, "user.current")).status).toBe(200);
  });

  it("is one bucket per portal when instances share a state file", async () => {
    const file = join(dir, "bucket.sqlite");
    const a = await start({ statePath: file, rate: 1, burst: 3 });
    const b = await start({ statePath: file, rate: 1, burst: 3 });
    const statuses = [
      (await call(a, "user.current")).status,
      (await call(b, "user.current")).status,
      (await call(a, "user.current")).status,
      (await call(b, "user.current")).status,
    ];
    expect(statuses.slice(0, 3)).toEqual([200, 200, 200]);
    expect(statuses[3]).toBe(503);
  });
});

describe("state", () => {
  it("two instances on one file see one portal and one call log", async () => {
    const file = join(dir, "shared.sqlite");
    const a = await start({ statePath: file, rate: 0 });
    const b = await start({ statePath: file, rate: 0 });
    await call(a, "tasks.task.update", { taskId: 4, fields: { TITLE: "Written through A" } });
    expect(await title(b)).toBe("Written through A");
    const calls = await new EmulatorControl(b.baseUrl).calls();
    expect(calls.map((c) => c.method)).toEqual(["tasks.task.update", "tasks.task.get"]);
  });

  it("applies the seed only when the file is new", async () => {
    const file = join(dir, "persisted.sqlite");
    const first = await start({ statePath: file, rate: 0 });
    await call(first, "tasks.task.update", { taskId: 4, fields: { TITLE: "Survives restart" } });
    await first.close();
    const other = { ...defaultSeed(), tasks: [] };
    const second = await start({ statePath: file, rate: 0, seed: other });
    expect(await title(second)).toBe("Survives restart");
    // Reset goes back to the portal's original seed, not to the one this instance was handed.
    await new EmulatorControl(second.baseUrl).reset();
    expect(await title(second)).toBe("LAB-AGENT-EXEC-002 - BOUND ACTION TEST");
  });

  it("reset restores the seed and clears calls and faults", async () => {
    const emu = await start({ rate: 0 });
    const control = new EmulatorControl(emu.baseUrl);
    await call(emu, "tasks.task.update", { taskId: 4, fields: { TITLE: "Changed" } });
    await call(emu, "tasks.task.add", { fields: { TITLE: "Extra", RESPONSIBLE_ID: 1 } });
    await control.armFault({ method: "tasks.task.get", kind: "error", times: 0 });
    await control.reset();
    expect(await control.calls()).toEqual([]);
    expect(await title(emu)).toBe("LAB-AGENT-EXEC-002 - BOUND ACTION TEST");
    expect((await call(emu, "tasks.task.get", { taskId: 9 })).body.result).toEqual([]);
    expect((await call(emu, "tasks.task.history.list", { taskId: 4 })).body.result.list).toHaveLength(1);
  });

  it("processes sharing a file never lose an update", async () => {
    const file = join(dir, "processes.sqlite");
    const local = await start({ statePath: file, rate: 0 });
    const remote = await spawnEmulator(file);
    const targets = [local.webhookUrl, remote];
    const N = 30;
    const results = await Promise.all(
      Array.from({ length: N }, (_, i) =>
        call(targets[i % 2]!, "tasks.task.update", { taskId: 4, fields: { TITLE: `t${i}` } }),
      ),
    );
    expect(results.every((r) => r.status === 200)).toBe(true);
    const rows = (await call(local, "tasks.task.history.list", { taskId: 4, filter: { FIELD: "TITLE" } }))
      .body.result.list;
    expect(rows).toHaveLength(N);
    // Each write saw the one before it: the chain from -> to is unbroken.
    for (let i = 1; i < rows.length; i++) expect(rows[i].value.from).toBe(rows[i - 1].value.to);
    const calls = await new EmulatorControl(local.baseUrl).calls({ method: "tasks.task.update" });
    expect(calls).toHaveLength(N);
  });
});

describe("seed files", () => {
  it("loads a valid seed file and names the problem in an invalid one", () => {
    const good = join(dir, "seed.json");
    writeFileSync(good, JSON.stringify(defaultSeed()));
    expect(loadSeedFile(good).tasks).toHaveLength(8);
    const bad = join(dir, "bad-seed.json");
    const seed = defaultSeed();
    seed.tasks![0]!.responsibleId = 99;
    writeFileSync(bad, JSON.stringify(seed));
    expect(() => loadSeedFile(bad)).toThrow(SeedError);
    expect(() => loadSeedFile(bad)).toThrow(/unknown user 99/);
    writeFileSync(bad, "{oops");
    expect(() => loadSeedFile(bad)).toThrow(/not JSON/);
  });

  it("startEmulator refuses an invalid seed object", async () => {
    await expect(startEmulator({ seed: { users: [] } })).rejects.toThrow(SeedError);
  });
});

function spawnEmulator(statePath: string): Promise<string> {
  const child = spawn(process.execPath, ["--import", "tsx", "test/fixtures/emulator-process.ts", statePath], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const m = /webhook: (\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once("exit", (code) =>
      reject(new Error(`emulator process exited with ${code} before printing its webhook`)),
    );
  });
}
