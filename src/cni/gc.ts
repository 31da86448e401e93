/**
 * GC (cni-spec §2, §5, §6): the set of attachments the runtime still holds
 * valid, which cached attachments are stale, and what libcni sends each plugin
 * on GC (api.go: GCNetworkList).
 *
 * The valid set travels under `cni.dev/valid-attachments`. The spec first
 * named the key `cni.dev/attachments` while libcni sent
 * `cni.dev/valid-attachments`; the spec was changed to libcni's name and
 * libcni now sends both (containernetworking/cni#1101, #1103). Both are read
 * and both are written.
 */
import { isObject } from "../common/json.js";
import { findKeyIgnoringCase } from "./capabilities.js";
import type { NetworkConfigList } from "./conflist.js";
import { CniError, ErrorCode } from "./errors.js";
import { goTypeName } from "./go-json.js";
import { injectConf, pluginAt } from "./plugin-config.js";

const VALID_ATTACHMENTS_KEY = "cni.dev/valid-attachments";
/** The spec's first name for the same list; libcni sends it too. */
const LEGACY_ATTACHMENTS_KEY = "cni.dev/attachments";

/** One attachment the runtime still uses (libcni's types.GCAttachment). */
export interface GcAttachment {
  containerID: string;
  ifname: string;
}

/** What GC needs to know of a cached attachment. */
export interface AttachmentRef {
  containerId: string;
  ifName: string;
  networkName: string;
}

function decodeFailure(msg: string): CniError {
  return new CniError(ErrorCode.DecodingFailure, msg);
}

/**
 * One entry's field: read like Go's decode into GCAttachment (key matched
 * ignoring case, JSON null as ""), then required to be non-empty.
 */
function readEntryField(entry: Record<string, unknown>, field: string, where: string): string {
  const key = findKeyIgnoringCase(entry, field);
  const value = key === undefined ? null : entry[key];
  if (value !== null && typeof value !== "string") {
    throw decodeFailure(`${where}.${field} must be a string, not ${goTypeName(value)}`);
  }
  if (!value) {
    throw new CniError(
      ErrorCode.InvalidNetworkConfig,
      `${where} has no ${field}: an entry must name a container and an interface`,
    );
  }
  return value;
}

function readAttachmentList(value: unknown, key: string): GcAttachment[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) {
    throw decodeFailure(`${key} must be a list of {containerID, ifname}, not ${goTypeName(value)}`);
  }
  return value.map((entry: unknown, i) => {
    const where = `${key}[${i}]`;
    if (!isObject(entry)) {
      throw decodeFailure(
        `${where} must be an object {containerID, ifname}, not ${goTypeName(entry)}`,
      );
    }
    return {
      containerID: readEntryField(entry, "containerID", where),
      ifname: readEntryField(entry, "ifname", where),
    };
  });
}

const attachmentKey = (containerId: string, ifName: string): string =>
  JSON.stringify([containerId, ifName]);

/**
 * The valid attachments of a GC call, from its decoded stdin object.
 *
 * - Absent or JSON `null` (what libcni sends for an empty Go slice): the empty
 *   set, so nothing is valid and every cached attachment is stale.
 * - Both keys present: the union. GC deletes what is not valid, so a union
 *   never deletes an attachment that either list protects; libcni sends the
 *   same list under both keys, so normally the union is that list.
 * - Not a list, an entry not an object, or a field not a string: code 6, the
 *   decoding failure Go's decoder reports. An entry without a container ID or
 *   an interface name cannot name an attachment: code 7. The call fails
 *   rather than running GC on a set it could not read.
 *
 * Duplicates are dropped; order is kept.
 */
export function parseGcValidAttachments(stdin: unknown): GcAttachment[] {
  if (!isObject(stdin)) {
    throw decodeFailure(`GC configuration must be a JSON object, not ${goTypeName(stdin)}`);
  }
  const all = [
    ...readAttachmentList(stdin[VALID_ATTACHMENTS_KEY], VALID_ATTACHMENTS_KEY),
    ...readAttachmentList(stdin[LEGACY_ATTACHMENTS_KEY], LEGACY_ATTACHMENTS_KEY),
  ];
  const seen = new Set<string>();
  return all.filter((a) => {
    const k = attachmentKey(a.containerID, a.ifname);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/** Whether the attachment (containerID + ifname, compared exactly) is in the valid set. */
// Exported for its tests only (unit/gc.test.ts).
export function isValidAttachment(
  valid: readonly GcAttachment[],
  containerId: string,
  ifName: string,
): boolean {
  return valid.some((a) => a.containerID === containerId && a.ifname === ifName);
}

/**
 * The first half of libcni's GCNetworkList: the cached attachments of this
 * network that the valid set does not name, each of which gets a full list
 * DEL. Attachments of other networks are never touched.
 */
export function staleAttachments<T extends AttachmentRef>(
  cached: readonly T[],
  networkName: string,
  valid: readonly GcAttachment[],
): T[] {
  const keep = new Set(valid.map((a) => attachmentKey(a.containerID, a.ifname)));
  return cached.filter(
    (c) => c.networkName === networkName && !keep.has(attachmentKey(c.containerId, c.ifName)),
  );
}

/**
 * The stdin of one plugin for GC (1.1.0), as libcni builds it: the plugin's
 * own object with the list's `name` and `cniVersion` and the valid set under
 * both keys. An empty set is written as `[]` (libcni writes `null` for a nil
 * slice; a plugin reads both as empty).
 */
export function buildGcStdin(
  list: NetworkConfigList,
  pluginIndex: number,
  valid: readonly GcAttachment[],
): string {
  const plugin = pluginAt(list, pluginIndex);
  const attachments = valid.map((a) => ({ containerID: a.containerID, ifname: a.ifname }));
  return JSON.stringify(
    injectConf(plugin.raw, {
      name: list.name,
      cniVersion: list.cniVersion,
      [VALID_ATTACHMENTS_KEY]: attachments,
      [LEGACY_ATTACHMENTS_KEY]: attachments,
    }),
  );
}
