/** Parsed JSON, looked at before its shape is known. */

/** A JSON object as parsed: its keys known, its values not yet checked. */
export type JsonObject = Record<string, unknown>;

/** A JSON object: not null, not an array. */
export function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
