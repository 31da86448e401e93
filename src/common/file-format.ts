/**
 * The format versions of the files the driver keeps across its own restarts
 * and across releases (docs/upgrades.md#compatibility). Each of our formats is
 * a JSON object that declares its version, either in a `version` field or in
 * its `kind` ("cniDriverDeletionV1"). Version 1 is the layout release 0.1.0
 * wrote, so a file that declares no version field is version 1, and a version-1
 * file stays readable by 0.1.0 (which ignores the field): a rollback reads what
 * an upgrade wrote.
 *
 * A reader takes every version up to the one it knows, bringing older ones up
 * through the format's upgrade steps; the next write stores the current one.
 * A file of a version it does not know (a newer driver wrote it) is refused
 * with a FileFormatError naming the file and both versions, and its caller
 * leaves it as it is: never read as something else, never replaced, never
 * removed.
 */
import { readFileSync } from "node:fs";
import { writeFileAtomic } from "./atomic-write.js";
import { isObject, type JsonObject } from "./json.js";

export interface FileFormat {
  /** What such a file holds, for messages: "deletion record". */
  what: string;
  /** The newest version this build reads, and the one it writes. */
  current: number;
  /**
   * Where a file declares its version: a `version` field (absent: 1), or its
   * `kind`, the prefix followed by the number ("cniDriverDeletionV" + 1).
   */
  declaredBy: { field: "version" } | { kindPrefix: string };
  /** `upgrades[n - 1]` turns a version-n document into a version n + 1 one. */
  upgrades?: ReadonlyArray<(doc: JsonObject) => JsonObject>;
}

/** A file in a format this build does not know: left where it is, for a build that does. */
export class FileFormatError extends Error {
  constructor(
    readonly path: string,
    readonly what: string,
    /** What the file declares: "version 2", `kind "cniDriverDeletionV2"`. */
    readonly found: string,
    /** The newest this build knows, in the same words. */
    readonly known: string,
  ) {
    super(
      `${path}: a ${what} of ${found}, which this cni-driver does not know (it knows up to ${known}); left as it is for a cni-driver that knows it`,
    );
    this.name = "FileFormatError";
  }
}

function describe(format: FileFormat, version: number): string {
  return "field" in format.declaredBy
    ? `version ${version}`
    : `kind ${JSON.stringify(`${format.declaredBy.kindPrefix}${version}`)}`;
}

/** A `version` field's number; absent is 1 (release 0.1.0 wrote none); undefined when not a version. */
function versionOfField(v: unknown): number | undefined {
  if (v === undefined) return 1;
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 1 ? v : undefined;
}

/** The number after `prefix` in a `kind`; undefined when there is none. */
function versionOfKind(kind: unknown, prefix: string): number | undefined {
  if (typeof kind !== "string" || !kind.startsWith(prefix)) return undefined;
  const digits = kind.slice(prefix.length);
  return /^[1-9]\d{0,8}$/.test(digits) ? Number(digits) : undefined;
}

/** The version `doc` declares, or the refusal of one this build does not know. */
function declaredVersion(
  format: FileFormat,
  path: string,
  doc: JsonObject,
): number | FileFormatError {
  const by = format.declaredBy;
  const [version, found] =
    "field" in by
      ? [versionOfField(doc[by.field]), `version ${JSON.stringify(doc[by.field])}`]
      : [
          versionOfKind(doc.kind, by.kindPrefix),
          doc.kind === undefined ? "no kind" : `kind ${JSON.stringify(doc.kind)}`,
        ];
  return version === undefined || version > format.current
    ? new FileFormatError(path, format.what, found, describe(format, format.current))
    : version;
}

/** The version `doc` declares; throws FileFormatError when this build does not know it. */
export function formatVersion(format: FileFormat, path: string, doc: JsonObject): number {
  const v = declaredVersion(format, path, doc);
  if (v instanceof FileFormatError) throw v;
  return v;
}

/** The refusal of `doc` when this build does not know its version; undefined when it does. */
export function formatRefusal(
  format: FileFormat,
  path: string,
  doc: JsonObject,
): FileFormatError | undefined {
  const v = declaredVersion(format, path, doc);
  return v instanceof FileFormatError ? v : undefined;
}

/** `doc` brought up to the current version; throws FileFormatError for one this build does not know. */
function toCurrentFormat(format: FileFormat, path: string, doc: JsonObject): JsonObject {
  let out = doc;
  for (let v = formatVersion(format, path, doc); v < format.current; v++) {
    const step = format.upgrades?.[v - 1];
    if (!step) throw new Error(`${format.what}: no upgrade from version ${v} to ${v + 1}`);
    out = step(out);
  }
  return out;
}

/** `doc` marked with the current version, the mark first. */
function withCurrentFormat(format: FileFormat, doc: JsonObject): JsonObject {
  const by = format.declaredBy;
  return "field" in by
    ? { [by.field]: format.current, ...doc }
    : { kind: `${by.kindPrefix}${format.current}`, ...doc };
}

/** What `path` holds as a JSON object, or undefined when it is missing or not one. */
function readJsonObject(path: string): JsonObject | undefined {
  try {
    const v: unknown = JSON.parse(readFileSync(path, "utf8"));
    return isObject(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The file at `path` in the current version; undefined when it is missing or
 * not a JSON object (none of our formats reads such a file). Throws
 * FileFormatError for a version this build does not know. Small files read at
 * start or by a command, hence synchronous.
 */
export function readVersionedFile(format: FileFormat, path: string): JsonObject | undefined {
  const doc = readJsonObject(path);
  return doc && toCurrentFormat(format, path, doc);
}

/**
 * Replaces `path` atomically with `doc` in the current version, unless the
 * file there is of a version this build does not know: then it is kept and
 * FileFormatError thrown. Answers whether anything was written.
 */
export async function writeVersionedFile(
  format: FileFormat,
  path: string,
  doc: JsonObject,
  mode?: number,
): Promise<boolean> {
  const there = readJsonObject(path);
  const refusal = there && formatRefusal(format, path, there);
  if (refusal) throw refusal;
  return writeFileAtomic(path, `${JSON.stringify(withCurrentFormat(format, doc))}\n`, mode);
}
