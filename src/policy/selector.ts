/**
 * metav1.LabelSelector matching, as apimachinery's LabelSelectorAsSelector
 * reads it: every matchLabels pair and every matchExpressions requirement must
 * hold; an empty selector matches everything. NotIn and DoesNotExist hold for
 * a missing key.
 */
import type { LabelSelector, LabelSelectorRequirement } from "./types.js";

function requirementHolds(req: LabelSelectorRequirement, labels: Record<string, string>): boolean {
  const has = Object.hasOwn(labels, req.key);
  const value = labels[req.key];
  switch (req.operator) {
    case "In":
      return has && (req.values ?? []).includes(value as string);
    case "NotIn":
      return !has || !(req.values ?? []).includes(value as string);
    case "Exists":
      return has;
    case "DoesNotExist":
      return !has;
    default:
      // The API server refuses any other operator; one that got here matches nothing.
      return false;
  }
}

export function selectorMatches(
  selector: LabelSelector | undefined,
  labels: Record<string, string>,
): boolean {
  if (!selector) return true;
  const wanted = selector.matchLabels;
  // for…in, not Object.entries: this runs for every pod a rule's peers may pick.
  for (const k in wanted) {
    if (labels[k] !== wanted[k]) return false;
  }
  const exprs = selector.matchExpressions;
  if (exprs) for (const r of exprs) if (!requirementHolds(r, labels)) return false;
  return true;
}

/** Why a selector can never be applied as written (an unknown operator, In without values). */
export function selectorProblem(selector: LabelSelector | undefined): string | undefined {
  for (const r of selector?.matchExpressions ?? []) {
    if (!["In", "NotIn", "Exists", "DoesNotExist"].includes(r.operator))
      return `matchExpressions key ${JSON.stringify(r.key)}: unknown operator ${JSON.stringify(r.operator)}`;
    if ((r.operator === "In" || r.operator === "NotIn") && !(r.values?.length ?? 0))
      return `matchExpressions key ${JSON.stringify(r.key)}: ${r.operator} needs values`;
  }
  return undefined;
}
