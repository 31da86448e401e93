/**
 * Deterministic MidoNet identities, the scheme of the original midonet-kubernetes
 * integration (pkg/converter/id.go), so a cluster moving from it keeps every id:
 *
 *   tenantSpace(tenant)      = uuid5(3978567E-91C4-465C-A0D1-67575F6B4C7F, "<version>/<tenant>")
 *   idForKey(t, kind, key)   = uuid5(tenantSpace(t), "<version>/<kind>/<key>")
 *   subId(id, label)         = uuid5(id, label)
 *   macForKey(s)             = ac:ca:ba (Midokura's OUI) + the first 3 bytes of sha256(s)
 *
 * Version "4" is the translation version the original wrote last. A name-based
 * UUID is RFC 4122 §4.3 version 5: SHA-1 over the namespace's 16 bytes and the
 * name, version nibble 5, variant 10xx, printed lowercase.
 */
import { createHash } from "node:crypto";

// Exported for its tests only (unit/midonet-ids.test.ts).
export const MIDONET_TENANT_SPACE = "3978567e-91c4-465c-a0d1-67575f6b4c7f";
export const TRANSLATION_VERSION = "4";

const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * True for a name-based (version 5) UUID: every id this integration gives is
 * one. MidoNet gives an object created without an id a random (version 4) one,
 * so such an object in one of our routers, bridges or chains (an operator's
 * uplink port and its default route, say) was made by someone else.
 */
export function isNameBasedUuid(id: string): boolean {
  return UUID_TEXT.test(id) && id[14] === "5";
}

/** True for the 8-4-4-4-12 hex form (any case); what MidoNet accepts as an id. */
export function isUuid(text: string): boolean {
  return UUID_TEXT.test(text);
}

/** The 16 bytes of a UUID in text form; throws on anything else (a caller's bug, not data). */
function uuidBytes(uuid: string): Buffer {
  if (!UUID_TEXT.test(uuid)) throw new TypeError(`not a UUID: ${JSON.stringify(uuid)}`);
  return Buffer.from(uuid.replace(/-/g, ""), "hex");
}

// subId is mostly called several times in a row on one id (a node's sub-resources,
// a chain's rules): keep the last namespace parsed.
let lastNamespace = "";
let lastNamespaceBytes: Buffer = Buffer.alloc(16);

function namespaceBytes(namespace: string): Buffer {
  if (namespace !== lastNamespace) {
    lastNamespaceBytes = uuidBytes(namespace);
    lastNamespace = namespace;
  }
  return lastNamespaceBytes;
}

const HEX_DIGITS = Buffer.from("0123456789abcdef", "latin1");
const uuidText = Buffer.alloc(36);

/**
 * The 8-4-4-4-12 lowercase text of 16 bytes, written through one buffer so the
 * result is a flat string (ids are map keys by the hundred thousand; a string
 * pieced together by concatenation costs more to hash and to keep).
 */
function formatUuid(bytes: Buffer): string {
  let o = 0;
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) uuidText[o++] = 0x2d;
    const b = bytes[i] as number;
    uuidText[o++] = HEX_DIGITS[b >> 4] as number;
    uuidText[o++] = HEX_DIGITS[b & 0x0f] as number;
  }
  return uuidText.toString("latin1", 0, 36);
}

function uuid5FromBytes(namespace: Buffer, name: string): string {
  const h = createHash("sha1").update(namespace).update(name, "utf8").digest();
  h[6] = ((h[6] as number) & 0x0f) | 0x50;
  h[8] = ((h[8] as number) & 0x3f) | 0x80;
  return formatUuid(h);
}

/** RFC 4122 name-based UUID, version 5 (SHA-1), of `name` (UTF-8) in `namespace`. */
export function uuid5(namespace: string, name: string): string {
  return uuid5FromBytes(namespaceBytes(namespace), name);
}

// The tenant space is the namespace of every idForKey; parsed once per tenant and version.
const tenantSpaces = new Map<string, { text: string; bytes: Buffer }>();

let lastTenant: { tenant: string; version: string; text: string; bytes: Buffer } = {
  tenant: "",
  version: "",
  text: "",
  bytes: Buffer.alloc(16),
};

function tenantSpaceEntry(tenant: string, version: string): { text: string; bytes: Buffer } {
  if (tenant === lastTenant.tenant && version === lastTenant.version) return lastTenant;
  const cacheKey = `${version}/${tenant}`;
  let entry = tenantSpaces.get(cacheKey);
  if (!entry) {
    const text = uuid5(MIDONET_TENANT_SPACE, cacheKey);
    entry = { text, bytes: uuidBytes(text) };
    tenantSpaces.set(cacheKey, entry);
  }
  lastTenant = { tenant, version, ...entry };
  return entry;
}

/** The namespace UUID of one tenant's Kubernetes keys. */
// Exported for its tests only (unit/midonet-ids.test.ts).
export function tenantSpace(tenant: string, version: string = TRANSLATION_VERSION): string {
  return tenantSpaceEntry(tenant, version).text;
}

/**
 * The id of a Kubernetes object (kind "Node", key "node1"; kind "Pod", key
 * "<ns>/<name>") or of one of the mapping's own pseudo objects ("ServicePort", …).
 */
export function idForKey(
  tenant: string,
  kind: string,
  key: string,
  version: string = TRANSLATION_VERSION,
): string {
  return uuid5FromBytes(tenantSpaceEntry(tenant, version).bytes, `${version}/${kind}/${key}`);
}

/** A further id belonging to the resource `id` ("Bridge Port" of a node, …). */
export function subId(id: string, label: string): string {
  return uuid5(id, label);
}

/**
 * A deterministic MAC for a key. Only 24 bits vary, so two keys may collide:
 * use it where MidoNet needs some stable MAC (a router port), not as an identity.
 */
export function macForKey(key: string): string {
  const h = createHash("sha256").update(key, "utf8").digest();
  return `ac:ca:ba:${h.toString("hex", 0, 1)}:${h.toString("hex", 1, 2)}:${h.toString("hex", 2, 3)}`;
}
