/**
 * Capability arguments (cni-spec §2, CNI CONVENTIONS.md): the per-attachment
 * data a runtime hands over (port mappings, bandwidth, …) and that reaches a
 * plugin under `runtimeConfig` when the plugin declares the capability.
 *
 * Runtimes do not agree on spelling. containerd builds these values from Go
 * structs without JSON tags, so it sends `{"HostPort":8080,"ContainerPort":80,
 * "Protocol":"tcp","HostIP":""}`, `IngressRate`, `Servers`, `Subnet`, …; Go
 * plugins read them anyway because encoding/json matches keys ignoring case.
 * normalizeCapabilityArgs reads keys the same way and returns the spelling of
 * the conventions, so everything past it sees one shape.
 *
 * A value of the wrong type or out of range is code 7 (invalid network
 * configuration): these values become the `runtimeConfig` part of the
 * configuration the plugin receives. Code 2 (unsupported field) does not fit:
 * the key is known, its value is wrong; and the JSON itself decoded fine, so
 * it is not code 6 either.
 */
import { isObject } from "../common/json.js";
import { CniError, ErrorCode } from "./errors.js";

/** The capabilities of the conventions that the driver knows by shape. */
export const Capability = {
  portMappings: "portMappings",
  bandwidth: "bandwidth",
  ipRanges: "ipRanges",
  ips: "ips",
  mac: "mac",
  dns: "dns",
  aliases: "aliases",
  cgroupPath: "cgroupPath",
  podAnnotations: "io.kubernetes.cri.pod-annotations",
} as const;

export type CapabilityName = (typeof Capability)[keyof typeof Capability];

export const KNOWN_CAPABILITIES: readonly CapabilityName[] = Object.values(Capability);

export type PortProtocol = "tcp" | "udp" | "sctp";

/** One `portMappings` entry. Keys a runtime sends beyond these are kept as sent. */
export interface PortMapping {
  hostPort: number;
  containerPort: number;
  /** Lowercase; "tcp" when the runtime sent none (the Kubernetes default). */
  protocol: PortProtocol;
  /** Absent when the runtime sent none or "" (containerd always sends the key). */
  hostIP?: string;
}

/** `bandwidth`: rates in bits per second, bursts in bits. */
export interface Bandwidth {
  ingressRate?: number;
  ingressBurst?: number;
  egressRate?: number;
  egressBurst?: number;
}

/** One range of an `ipRanges` range set (host-local's range). Empty strings are dropped. */
export interface IPRange {
  subnet: string;
  rangeStart?: string;
  rangeEnd?: string;
  gateway?: string;
}

/** `dns` as the runtime asks for it (not the result's `dns`). */
export interface DnsCapability {
  servers?: string[];
  searches?: string[];
  options?: string[];
}

/**
 * `aliases`: the conventions give a list of names; podman sends a map of
 * network name to names (what its dnsname plugin reads). Both are accepted.
 */
export type Aliases = string[] | Record<string, string[]>;

export interface CapabilityArgs {
  portMappings?: PortMapping[];
  bandwidth?: Bandwidth;
  /** A list of range sets, each a list of ranges (host-local's `ranges`). */
  ipRanges?: IPRange[][];
  /** Addresses with or without a prefix length. */
  ips?: string[];
  mac?: string;
  dns?: DnsCapability;
  aliases?: Aliases;
  cgroupPath?: string;
  /** containerd sends the pod's annotations; null when it has none to give. */
  "io.kubernetes.cri.pod-annotations"?: Record<string, string> | null;
  /** Capabilities the driver does not know: passed on as they came. */
  [other: string]: unknown;
}

/**
 * The key of `obj` that names `key`: the exact spelling when present, else the
 * first key equal to it ignoring case (encoding/json's rule for struct fields).
 */
export function findKeyIgnoringCase(obj: object, key: string): string | undefined {
  if (Object.hasOwn(obj, key)) return key;
  const lower = key.toLowerCase();
  return Object.keys(obj).find((k) => k.toLowerCase() === lower);
}

function describe(value: unknown): string {
  const text = value === undefined ? "nothing" : (JSON.stringify(value) ?? String(value));
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

function fail(path: string, expected: string, value: unknown): never {
  throw new CniError(
    ErrorCode.InvalidNetworkConfig,
    `invalid capability argument ${path}: ${expected}, not ${describe(value)}`,
  );
}

/**
 * Splits an object into the values of `fields` (found ignoring case; null
 * counts as absent, as Go writes null for a nil slice or pointer) and the
 * other keys, kept as they are. A key that differs from a field only in case
 * is consumed by that field, so a plugin never sees both spellings.
 */
function readFields<F extends string>(
  value: unknown,
  path: string,
  fields: readonly F[],
): { known: Partial<Record<F, unknown>>; rest: Record<string, unknown> } {
  if (!isObject(value)) fail(path, "must be an object", value);
  const known: Partial<Record<F, unknown>> = {};
  const consumed = new Set<string>();
  for (const field of fields) {
    const key = findKeyIgnoringCase(value, field);
    if (key === undefined) continue;
    const lower = field.toLowerCase();
    for (const k of Object.keys(value)) if (k.toLowerCase() === lower) consumed.add(k);
    if (value[key] !== null) known[field] = value[key];
  }
  const rest: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) if (!consumed.has(k)) rest[k] = v;
  return { known, rest };
}

function readString(value: unknown, path: string): string {
  if (typeof value !== "string") fail(path, "must be a string", value);
  return value;
}

function readStringList(value: unknown, path: string): string[] {
  if (!Array.isArray(value)) fail(path, "must be a list of strings", value);
  return value.map((v, i) => readString(v, `${path}[${i}]`));
}

function readList<T>(value: unknown, path: string, item: (v: unknown, p: string) => T): T[] {
  if (!Array.isArray(value)) fail(path, "must be a list", value);
  return value.map((v, i) => item(v, `${path}[${i}]`));
}

function readPort(value: unknown, path: string): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > 65535) {
    fail(path, "must be an integer from 1 to 65535", value);
  }
  return value;
}

function readProtocol(value: unknown, path: string): PortProtocol {
  if (value === undefined || value === "") return "tcp";
  if (typeof value === "string") {
    const p = value.toLowerCase();
    if (p === "tcp" || p === "udp" || p === "sctp") return p;
  }
  return fail(path, "must be tcp, udp or sctp", value);
}

function readRate(value: unknown, path: string): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0) {
    fail(path, "must be a non-negative integer", value);
  }
  return value;
}

function portMapping(value: unknown, path: string): PortMapping {
  const { known, rest } = readFields(value, path, [
    "hostPort",
    "containerPort",
    "protocol",
    "hostIP",
  ] as const);
  const out: PortMapping = {
    hostPort: readPort(known.hostPort, `${path}.hostPort`),
    containerPort: readPort(known.containerPort, `${path}.containerPort`),
    protocol: readProtocol(known.protocol, `${path}.protocol`),
  };
  if (known.hostIP !== undefined) {
    const hostIP = readString(known.hostIP, `${path}.hostIP`);
    if (hostIP !== "") out.hostIP = hostIP;
  }
  return { ...out, ...rest };
}

function bandwidth(value: unknown, path: string): Bandwidth {
  const fields = ["ingressRate", "ingressBurst", "egressRate", "egressBurst"] as const;
  const { known, rest } = readFields(value, path, fields);
  const out: Bandwidth = {};
  for (const f of fields) {
    if (known[f] !== undefined) out[f] = readRate(known[f], `${path}.${f}`);
  }
  return { ...out, ...rest };
}

function ipRange(value: unknown, path: string): IPRange {
  const { known, rest } = readFields(value, path, [
    "subnet",
    "rangeStart",
    "rangeEnd",
    "gateway",
  ] as const);
  const subnet = known.subnet === undefined ? "" : readString(known.subnet, `${path}.subnet`);
  if (subnet === "") fail(`${path}.subnet`, "must be a subnet", known.subnet);
  const out: IPRange = { subnet };
  for (const f of ["rangeStart", "rangeEnd", "gateway"] as const) {
    if (known[f] === undefined) continue;
    const s = readString(known[f], `${path}.${f}`);
    if (s !== "") out[f] = s;
  }
  return { ...out, ...rest };
}

function dns(value: unknown, path: string): DnsCapability {
  const fields = ["servers", "searches", "options"] as const;
  const { known, rest } = readFields(value, path, fields);
  const out: DnsCapability = {};
  for (const f of fields) {
    if (known[f] !== undefined) out[f] = readStringList(known[f], `${path}.${f}`);
  }
  return { ...out, ...rest };
}

function aliases(value: unknown, path: string): Aliases {
  if (Array.isArray(value)) return readStringList(value, path);
  if (!isObject(value)) fail(path, "must be a list of names or a map of network to names", value);
  const out: Record<string, string[]> = {};
  for (const [network, names] of Object.entries(value)) {
    out[network] = readStringList(names, `${path}.${network}`);
  }
  return out;
}

function podAnnotations(value: unknown, path: string): Record<string, string> | null {
  if (value === null) return null;
  if (!isObject(value)) fail(path, "must be a map of strings or null", value);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value))
    out[k] = readString(v, `${path}.${JSON.stringify(k)}`);
  return out;
}

const readers: Record<CapabilityName, (value: unknown, path: string) => unknown> = {
  portMappings: (v, p) => readList(v, p, portMapping),
  bandwidth,
  ipRanges: (v, p) => readList(v, p, (set, sp) => readList(set, sp, ipRange)),
  ips: readStringList,
  mac: readString,
  dns,
  aliases,
  cgroupPath: readString,
  "io.kubernetes.cri.pod-annotations": podAnnotations,
};

/**
 * The capability arguments of a runtime, in the conventions' spelling and
 * checked by type: capability names and the keys inside their values are
 * matched ignoring case; ports are integers 1–65535; protocols tcp, udp or
 * sctp (any case, returned lowercase); rates and bursts non-negative
 * integers; addresses and names strings. Null (Go's nil slice or pointer)
 * means "not given" and drops the capability, except for pod annotations,
 * where null is kept. Capabilities the driver does not know, and unknown keys
 * inside known ones, pass through untouched. A wrong value is code 7.
 */
export function normalizeCapabilityArgs(raw: Readonly<Record<string, unknown>>): CapabilityArgs {
  const { known, rest } = readFields(raw, "capabilityArgs", KNOWN_CAPABILITIES);
  const out: Record<string, unknown> = {};
  for (const name of KNOWN_CAPABILITIES) {
    const value = known[name];
    if (value !== undefined) {
      out[name] = readers[name](value, name);
    } else if (name === Capability.podAnnotations) {
      const key = findKeyIgnoringCase(raw, name);
      if (key !== undefined && raw[key] === null) out[name] = null;
    }
  }
  return { ...out, ...rest } as CapabilityArgs;
}
