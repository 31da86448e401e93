/**
 * JSON text as Go's encoding/json.Marshal writes it, for the few places where
 * the bytes themselves matter: libcni's cache file and the list bytes that
 * libcni's ConfListFromConf produces; and how its Unmarshal finds a struct
 * field's key (goField), for configs a Go plugin would decode.
 *
 * What differs from JSON.stringify: a Go `map[string]interface{}` is written
 * with its keys sorted (byte order of their UTF-8), `<`, `>`, `&`, U+2028 and
 * U+2029 inside strings are escaped as \u003c, \u003e, \u0026, \u2028, \u2029,
 * a `[]byte` is a base64 string, and -0 stays "-0". Numbers otherwise print
 * alike: both languages use the shortest round-trip form and switch to an
 * exponent below 1e-6 and from 1e21 up.
 */

const HTML_UNSAFE = /[<>&\u2028\u2029]/g;

function escapeHtml(jsonText: string): string {
  return jsonText.replace(
    HTML_UNSAFE,
    (c) => `\\u${(c.codePointAt(0) as number).toString(16).padStart(4, "0")}`,
  );
}

/**
 * Go's string order (sort.Strings, map keys): bytes of the UTF-8 encoding,
 * which is code point order. JavaScript's default sort compares UTF-16 units,
 * which puts astral characters before U+E000..U+FFFF.
 */
export function compareGoStrings(a: string, b: string): number {
  const ca = [...a];
  const cb = [...b];
  const n = Math.min(ca.length, cb.length);
  for (let i = 0; i < n; i++) {
    const d = (ca[i] as string).codePointAt(0)! - (cb[i] as string).codePointAt(0)!;
    if (d !== 0) return d;
  }
  return ca.length - cb.length;
}

function marshalString(s: string): string {
  return escapeHtml(JSON.stringify(s));
}

function marshalNumber(n: number): string {
  if (!Number.isFinite(n)) {
    throw new TypeError(`json: unsupported value: ${n}`);
  }
  return Object.is(n, -0) ? "-0" : String(n);
}

/**
 * A value decoded from JSON (or built of plain objects, arrays, strings,
 * numbers, booleans, null and Uint8Array) written as Go writes an
 * `interface{}` holding it: every object is a map, so keys come out sorted.
 * Keys whose value is `undefined` are left out, as JSON.stringify does.
 */
// Exported for its tests only (unit/go-json.test.ts).
export function marshalGoValue(value: unknown): string {
  if (value === null || value === undefined) return "null";
  switch (typeof value) {
    case "string":
      return marshalString(value);
    case "number":
      return marshalNumber(value);
    case "boolean":
      return value ? "true" : "false";
    case "object":
      break;
    default:
      throw new TypeError(`json: unsupported type: ${typeof value}`);
  }
  if (value instanceof Uint8Array) {
    return `"${Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64")}"`;
  }
  if (Array.isArray(value)) {
    return `[${value.map((v) => marshalGoValue(v)).join(",")}]`;
  }
  const obj = value as Record<string, unknown>;
  const keys = Object.keys(obj)
    .filter((k) => obj[k] !== undefined)
    .sort(compareGoStrings);
  return `{${keys.map((k) => `${marshalString(k)}:${marshalGoValue(obj[k])}`).join(",")}}`;
}

/**
 * A Go struct: fields in declaration order, each value written as
 * marshalGoValue does. A field whose value is `undefined` is left out, which
 * is how callers express `omitempty`.
 */
export function marshalGoStruct(fields: ReadonlyArray<readonly [string, unknown]>): string {
  const parts: string[] = [];
  for (const [key, value] of fields) {
    if (value === undefined) continue;
    parts.push(`${marshalString(key)}:${marshalGoValue(value)}`);
  }
  return `{${parts.join(",")}}`;
}

/**
 * The text of JSON input given as bytes or as a string. The bytes are read as
 * Go reads them: a UTF-8 byte order mark is kept (so JSON.parse rejects it, as
 * encoding/json does) and invalid sequences become U+FFFD.
 */
export function utf8Text(input: Uint8Array | string): string {
  if (typeof input === "string") return input;
  return new TextDecoder("utf-8", { ignoreBOM: true }).decode(input);
}

/** The bytes of JSON input given as bytes or as a string (UTF-8). */
export function utf8Bytes(input: Uint8Array | string): Uint8Array {
  return typeof input === "string" ? new TextEncoder().encode(input) : input;
}

/**
 * Go's %T of a value decoded into an `interface{}`, for messages that mirror
 * libcni's ("invalid type float64 for disableCheck").
 */
export function goTypeName(value: unknown): string {
  if (value === null || value === undefined) return "<nil>";
  if (Array.isArray(value)) return "[]interface {}";
  switch (typeof value) {
    case "string":
      return "string";
    case "number":
      return "float64";
    case "boolean":
      return "bool";
    default:
      return "map[string]interface {}";
  }
}

/** Go's encoding/json folds case as it matches a key to a field: ASCII letters, and ſ and K (Kelvin) for s and k. */
const foldKey = (key: string): string =>
  key
    .replace(/\u017f/g, "s")
    .replace(/\u212a/g, "k")
    .replace(/[A-Z]/g, (c) => c.toLowerCase());

/**
 * The value Go's encoding/json decodes into the field `key` of a struct: that
 * of the last key matching it whatever its case ("datadir", "Ranges" and
 * "RANGESTART" are host-local's keys too); undefined when none does. (The
 * capability args keep their own rule, findKeyIgnoringCase: the conventions'
 * exact spelling wins over a runtime's.)
 */
export function goField(obj: Record<string, unknown>, key: string): unknown {
  const want = foldKey(key);
  let value: unknown;
  for (const k of Object.keys(obj)) {
    // Folding keeps the length (ſ and K are one UTF-16 unit, as s and k): only keys of the same length can match.
    if (k.length === want.length && (k === key || foldKey(k) === want)) value = obj[k];
  }
  return value;
}
