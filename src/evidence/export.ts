/**
 * Writes a run's evidence bundle to a directory: the case record, one file per evidence object (and
 * each approval card as plain text, exactly as shown), and a SHA256SUMS file in the format
 * `sha256sum -c` reads, so the bundle can be checked anywhere without this program.
 */
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { UsageError } from "../errors.js";
import type { CaseRecord } from "./bundle.js";
import type { EvidenceObject } from "./evidence-objects.js";

export const CHECKSUM_FILE = "SHA256SUMS";
export const CASE_RECORD_FILE = "case-record.json";

/** A file's text as SHA256SUMS lists it: the hex SHA-256 of its UTF-8 bytes. */
export const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");

export function exportBundle(
  dir: string,
  caseRecord: CaseRecord,
  evidence: EvidenceObject[],
): { dir: string; files: string[] } {
  const out = path.resolve(dir);
  // Refuse to mix a new bundle with files already there: SHA256SUMS would vouch for a mixture.
  if (fs.existsSync(out) && (!fs.statSync(out).isDirectory() || fs.readdirSync(out).length > 0)) {
    throw new UsageError(`${out} already exists and is not an empty directory; choose a new --out directory`);
  }
  const files = bundleFiles(caseRecord, evidence);
  fs.mkdirSync(out, { recursive: true });
  const names = [...files.keys()].sort();
  for (const name of names) fs.writeFileSync(path.join(out, name), files.get(name)!, "utf8");
  const sums = names.map((name) => `${sha256(files.get(name)!)}  ${name}\n`).join("");
  fs.writeFileSync(path.join(out, CHECKSUM_FILE), sums, "utf8");
  return { dir: out, files: [...names, CHECKSUM_FILE] };
}

/** The bundle's files but SHA256SUMS, by name: what `exportBundle` writes and `checkBundle` expects. */
export function bundleFiles(caseRecord: CaseRecord, evidence: EvidenceObject[]): Map<string, string> {
  const files = new Map<string, string>();
  files.set(CASE_RECORD_FILE, json(caseRecord));
  for (const item of evidence) {
    // The names may come from an API server's answer (`audit export --api`): each must be a file of
    // this directory, as buildEvidence names them, and none may stand in for another file.
    if (typeof item.name !== "string" || !EVIDENCE_NAME.test(item.name) || files.has(`${item.name}.json`))
      throw new Error(
        `expected evidence objects named like "01-pre-read" (digits, "-", then letters, digits, ".", "_" or "-"), each once; got ${JSON.stringify(item.name).slice(0, 120)}; nothing was written`,
      );
    files.set(`${item.name}.json`, json(item));
    const card = item.kind === "approval_request" ? item.data["card"] : undefined;
    if (typeof card === "string")
      files.set(`${item.name}.card.txt`, card.endsWith("\n") ? card : `${card}\n`);
  }
  return files;
}

const EVIDENCE_NAME = /^[0-9]+-[A-Za-z0-9._-]{1,200}$/;

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;
