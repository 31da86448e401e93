/**
 * Label and field selectors of the fake Kubernetes API server
 * (fake-kube-apiserver.ts), parsed and matched as kube-apiserver does for the
 * forms the product sends (=, ==, !=, in, notin, exists, !exists; the field
 * labels a kind supports, Go's "false" for an unset boolean), with the real
 * 400 messages for what does not parse. A list and a watch select the same
 * way, so both take their Selection from here.
 */
import { getPath } from "./fake-kube-json.js";
import type { ResourceDef } from "./fake-kube-resources.js";
import { badRequest } from "./fake-kube-status.js";
import type { KubeObject } from "./fake-kube-types.js";

type LabelRequirement =
  | { op: "=" | "!="; key: string; value: string }
  | { op: "in" | "notin"; key: string; values: string[] }
  | { op: "exists" | "!exists"; key: string };

/** Splits on commas outside parentheses. */
function splitTopLevel(selector: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < selector.length; i++) {
    const c = selector[i];
    if (c === "(") depth++;
    else if (c === ")") depth--;
    else if (c === "," && depth === 0) {
      parts.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(selector.slice(start));
  return parts.map((p) => p.trim()).filter((p) => p !== "");
}

const LABEL_KEY = /^([a-zA-Z0-9.\-_/]+)$/;

export function parseLabelSelector(selector: string): LabelRequirement[] {
  return splitTopLevel(selector).map((part) => {
    let m = /^(\S+?)\s+(in|notin)\s*\(([^)]*)\)$/.exec(part);
    if (m) {
      const values = m[3]!.split(",").map((v) => v.trim());
      return { op: m[2] as "in" | "notin", key: m[1]!, values };
    }
    m = /^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(part);
    if (m) return { op: m[2] === "!=" ? "!=" : "=", key: m[1]!, value: m[3]! };
    m = /^!\s*(\S+)$/.exec(part);
    if (m && LABEL_KEY.test(m[1]!)) return { op: "!exists", key: m[1]! };
    if (LABEL_KEY.test(part)) return { op: "exists", key: part };
    throw badRequest(
      `unable to parse requirement: found '${part}', expected: !, identifier, or 'end of string'`,
    );
  });
}

function requirementHolds(r: LabelRequirement, labels: Record<string, string>): boolean {
  const has = Object.hasOwn(labels, r.key);
  const value = labels[r.key];
  if (r.op === "=") return has && value === r.value;
  if (r.op === "!=") return !has || value !== r.value;
  if (r.op === "in") return has && r.values.includes(value!);
  if (r.op === "notin") return !has || !r.values.includes(value!);
  return r.op === "exists" ? has : !has;
}

function labelsMatch(
  reqs: LabelRequirement[],
  labels: Record<string, string> | undefined,
): boolean {
  return reqs.every((r) => requirementHolds(r, labels ?? {}));
}

interface FieldRequirement {
  field: string;
  op: "=" | "!=";
  value: string;
}

// Field values that read "false" when unset (Go booleans).
const BOOLEAN_FIELDS = new Set(["spec.hostNetwork", "spec.unschedulable"]);

function parseFieldSelector(def: ResourceDef, selector: string): FieldRequirement[] {
  return splitTopLevel(selector).map((part) => {
    const m = /^([^=!]+?)\s*(==|=|!=)\s*(.*)$/.exec(part);
    if (!m) throw badRequest(`invalid selector: '${selector}'; can't understand '${part}'`);
    const label = m[1]!;
    const field =
      label === "metadata.name" || label === "metadata.namespace" ? label : def.fieldLabels[label];
    if (field === undefined) throw badRequest(`field label not supported: ${label}`);
    return { field, op: m[2] === "!=" ? "!=" : "=", value: m[3]! };
  });
}

function fieldValue(stored: KubeObject, field: string): string {
  const v = getPath(stored, field.split("."));
  if (v === undefined || v === null) return BOOLEAN_FIELDS.has(field) ? "false" : "";
  return String(v);
}

function fieldsMatch(reqs: FieldRequirement[], stored: KubeObject): boolean {
  return reqs.every((r) => (fieldValue(stored, r.field) === r.value) === (r.op === "="));
}

/** What a list or a watch selects: one namespace (all when undefined), labels and fields. */
export interface Selection {
  namespace?: string;
  labels: LabelRequirement[];
  fields: FieldRequirement[];
}

/** The selection of a request's labelSelector and fieldSelector (400 when one does not parse). */
export function parseSelection(
  def: ResourceDef,
  namespace: string | undefined,
  query: URLSearchParams,
): Selection {
  const labels = parseLabelSelector(query.get("labelSelector") ?? "");
  const fields = parseFieldSelector(def, query.get("fieldSelector") ?? "");
  return { labels, fields, ...(namespace !== undefined ? { namespace } : {}) };
}

/** Whether a selection selects no more than a namespace. */
export function selectsAll(selection: Selection): boolean {
  return selection.labels.length === 0 && selection.fields.length === 0;
}

export function selects(selection: Selection, stored: KubeObject): boolean {
  if (selection.namespace !== undefined && stored.metadata?.namespace !== selection.namespace)
    return false;
  return (
    labelsMatch(selection.labels, stored.metadata?.labels) && fieldsMatch(selection.fields, stored)
  );
}
