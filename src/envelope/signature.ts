/**
 * Approver signatures (Ed25519, node:crypto). Private keys live with approvers, outside the agent
 * runtime; the runtime holds only public keys, registered as lines "approverId ed25519 <base64 SPKI DER>"
 * from a keys file, a directory of such files, or an environment variable.
 */
import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  sign,
  verify,
  type KeyObject,
} from "node:crypto";
import { canonicalJson } from "./canonical.js";
import { KeyRegistryError } from "./errors.js";

/**
 * The exact object an approver signs, serialised with RFC 8785. For an edit the edited action is part of
 * it, for a rejection its feedback message and for an override the gate and reason are, so a signature
 * cannot be moved to different content.
 */
export interface SignedDecisionPayload {
  envelopeHash: string;
  nonce: string;
  threadId: string;
  decision: "approve" | "reject" | "edit";
  approverId: string;
  decidedAt: string;
  editedAction?: {
    name: string;
    args: { taskId?: number | undefined; dealId?: number | undefined; fields: Record<string, unknown> };
  };
  override?: { gate: string; reason: string };
  /** A rejection's feedback, as sent: it goes to the model as the approver's words and into the audit log. */
  message?: string;
  /** For one action of a change set decided action by action. */
  actionId?: string;
}

/** Base64 Ed25519 signature over the canonical payload. For the approver's side (CLI), never the runtime. */
export function signDecision(payload: SignedDecisionPayload, privateKeyPem: string): string {
  return signCanonical(signingBytes(payload), privateKeyPem);
}

/** True only for a well-formed Ed25519 signature by this key over exactly this payload. Never throws. */
export function verifyDecisionSignature(
  payload: SignedDecisionPayload,
  signatureBase64: string,
  publicKey: KeyObject,
): boolean {
  return verifyCanonical(signingBytes(payload), signatureBase64, publicKey);
}

/**
 * The exact object a requester signs to start a run (`run --key`), serialised with RFC 8785. The
 * thread id binds the signature to one thread: a thread is registered once, so the signed request
 * cannot be replayed into another thread or change a registered one. `scope` is the run input's
 * scope, `{}` when none was given.
 */
export interface SignedRequestPayload {
  kind: "request";
  threadId: string;
  request: string;
  requestedBy: string;
  scope: Record<string, unknown>;
}

/** Base64 Ed25519 signature over the canonical request. For the requester's side (CLI), never the runtime. */
export function signRequest(payload: SignedRequestPayload, privateKeyPem: string): string {
  return signCanonical(signingBytes(payload), privateKeyPem);
}

/** The bytes a signature covers: the payload's RFC 8785 canonical JSON. */
function signingBytes(payload: SignedDecisionPayload | SignedRequestPayload): Buffer {
  return Buffer.from(canonicalJson(payload), "utf8");
}

function signCanonical(bytes: Buffer, privateKeyPem: string): string {
  const key = createPrivateKey(privateKeyPem);
  if (key.asymmetricKeyType !== "ed25519")
    throw new KeyRegistryError("an Ed25519 private key", `a ${key.asymmetricKeyType} key`);
  return sign(null, bytes, key).toString("base64");
}

/** True only for a well-formed Ed25519 signature by this key over exactly this request. Never throws. */
export function verifyRequestSignature(
  payload: SignedRequestPayload,
  signatureBase64: string,
  publicKey: KeyObject,
): boolean {
  return verifyCanonical(signingBytes(payload), signatureBase64, publicKey);
}

function verifyCanonical(bytesSigned: Buffer, signatureBase64: string, publicKey: KeyObject): boolean {
  try {
    if (publicKey.asymmetricKeyType !== "ed25519") return false;
    if (!/^[A-Za-z0-9+/]{86}==$/.test(signatureBase64)) return false; // 64 bytes, padded base64
    const bytes = Buffer.from(signatureBase64, "base64");
    // Canonical only: the last character's unused low bits must be zero (else another string decodes to the same bytes).
    if (bytes.toString("base64") !== signatureBase64) return false;
    return verify(null, bytesSigned, publicKey, bytes);
  } catch {
    return false;
  }
}

const APPROVER_ID = /^[A-Za-z0-9][A-Za-z0-9._@-]*$/;

export function generateApproverKeyPair(approverId: string): {
  publicKeyPem: string;
  privateKeyPem: string;
  publicKeyLine: string;
} {
  if (!APPROVER_ID.test(approverId)) {
    throw new KeyRegistryError(
      "an approver id of letters, digits, . _ @ - (no spaces)",
      JSON.stringify(approverId),
    );
  }
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  return {
    publicKeyPem: publicKey.export({ type: "spki", format: "pem" }).toString(),
    privateKeyPem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    publicKeyLine: publicKeyLine(approverId, publicKey),
  };
}

export function publicKeyLine(approverId: string, publicKey: KeyObject): string {
  const der = publicKey.export({ type: "spki", format: "der" });
  return `${approverId} ed25519 ${der.toString("base64")}`;
}

/**
 * Parses registry text: one "approverId ed25519 <base64 SPKI DER>" per line; blank lines and lines
 * starting with # are ignored. A malformed line, a key that is not Ed25519, or an approver listed twice
 * is an error naming the line, because silently skipping a key would lock an approver out and silently
 * keeping either of two keys would let the wrong one sign.
 */
export function parsePublicKeyLines(text: string): Map<string, KeyObject> {
  const keys = new Map<string, KeyObject>();
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    const where = `line ${i + 1}`;
    const parts = line.split(/\s+/);
    if (parts.length !== 3)
      throw new KeyRegistryError(
        `"approverId ed25519 <base64 SPKI DER>" on ${where}`,
        `${parts.length} fields`,
      );
    const [id, algorithm, b64] = parts as [string, string, string];
    if (!APPROVER_ID.test(id)) throw new KeyRegistryError(`an approver id on ${where}`, JSON.stringify(id));
    if (algorithm !== "ed25519")
      throw new KeyRegistryError(`algorithm "ed25519" on ${where}`, JSON.stringify(algorithm));
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64))
      throw new KeyRegistryError(`base64 key data on ${where}`, "other characters");
    let key: KeyObject;
    try {
      key = createPublicKey({ key: Buffer.from(b64, "base64"), format: "der", type: "spki" });
    } catch (e) {
      throw new KeyRegistryError(
        `an SPKI DER public key on ${where}`,
        `undecodable data (${(e as Error).message})`,
      );
    }
    if (key.asymmetricKeyType !== "ed25519")
      throw new KeyRegistryError(`an Ed25519 key on ${where}`, `a ${key.asymmetricKeyType} key`);
    if (keys.has(id)) throw new KeyRegistryError(`one key per approver (${where})`, `a second key for ${id}`);
    keys.set(id, key);
  });
  return keys;
}
