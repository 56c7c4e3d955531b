/**
 * Real Chromium for the inbox tests, driven by playwright-core: Debian's package (/usr/bin/chromium,
 * installed by .ci/run), never a downloaded build. Where none is installed the browser tests skip,
 * saying so.
 */
import fs from "node:fs";
import path from "node:path";
import { chromium, type Browser } from "playwright-core";
import { ROOT } from "./harness.js";

const CANDIDATES = [
  process.env["CHROMIUM_PATH"],
  "/usr/bin/chromium",
  "/usr/bin/chromium-browser",
  "/usr/bin/google-chrome",
].filter((p): p is string => !!p);

export const chromiumPath: string | undefined = CANDIDATES.find((p) => fs.existsSync(p));

export const noBrowserReason = chromiumPath
  ? undefined
  : `no Chromium found (looked at ${CANDIDATES.join(", ")}); install it with "apt-get install -y chromium" (.ci/run does) or set CHROMIUM_PATH`;

export async function launchBrowser(): Promise<Browser> {
  if (!chromiumPath) throw new Error(noBrowserReason);
  // --no-sandbox: CI runs as root, where Chromium's sandbox cannot start.
  return chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
}

/** Screenshots are test artifacts (test-results/ is git-ignored). */
export const SCREENSHOTS = path.join(ROOT, "test-results", "inbox");
export function screenshotPath(name: string): string {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  return path.join(SCREENSHOTS, `${name}.png`);
}
