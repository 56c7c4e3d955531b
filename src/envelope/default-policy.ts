/** The policy that ships in the repository (policy/default.json), validated on first use. */
import defaultPolicyJson from "../../policy/default.json" with { type: "json" };
import { parsePolicy, type Policy } from "./policy.js";

let cached: Policy | undefined;

/** A fresh copy each call, so a caller that mutates its policy cannot change anyone else's. */
export function defaultPolicy(): Policy {
  cached ??= parsePolicy(defaultPolicyJson);
  return structuredClone(cached);
}
