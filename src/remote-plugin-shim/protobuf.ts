/**
 * A minimal protobuf wire codec for the messages of proto/cni_driver.proto, so the
 * shim speaks the driver's protocol without protobufjs (which costs tens of
 * milliseconds to load at every exec).
 *
 * It produces and accepts objects of the shape @grpc/proto-loader gives the driver
 * with the options in the .proto header (src/wire/types.ts): snake_case names,
 * 64-bit integers as numbers, an absent message as null, an absent repeated field
 * as [], an absent map as {}, an absent plain scalar as its zero, and an absent
 * proto3 `optional` field left out of the object.
 *
 * Wire rules (proto3): a plain scalar that is zero is not written, and reads the
 * same whether left out or sent (protobufjs sends it); an `optional` field is
 * written whenever it is set, zero included; a map is a repeated entry message
 * with key = 1 and value = 2; unknown fields, and known fields arriving with an
 * unexpected wire type, are skipped, as protobuf's own parsers do. Fields are
 * written in field-number order, so for the same data the bytes equal those of
 * protoc's and protobufjs's encoders.
 *
 * The schema below is written in the .proto's own syntax, one string per field;
 * test/unit/shim-protobuf.test.ts checks it against proto/cni_driver.proto.
 */
import type {
  ActiveConfig,
  Attachment,
  Bandwidth,
  Capabilities,
  CniStatusRequest,
  CniStatusResponse,
  ErrorOnlyResponse,
  GarbageCollectRequest,
  GarbageCollectResponse,
  IPRange,
  KeyValue,
  NetworkAttachments,
  PodIdentity,
  PodRequest,
  PodResponse,
  PortMapping,
  WireCniError,
  WireConfigError,
  WireDNS,
  WireInterface,
  WireIPConfig,
  WireResult,
  WireRoute,
} from "../wire/types.js";

/** The fields of every message of the contract, as the .proto declares them, by number. */
export const PROTO_SCHEMA = {
  CniError: ["uint32 code = 1", "string msg = 2", "string details = 3"],
  KeyValue: ["string key = 1", "string value = 2"],
  PodIdentity: ["string namespace = 1", "string name = 2", "string uid = 3"],
  PodRequest: [
    "uint32 api_version = 1",
    "PodIdentity pod = 2",
    "string container_id = 3",
    "string netns = 4",
    "string ifname = 5",
    "string network = 6",
    "string cni_version = 7",
    "repeated KeyValue cni_args = 8",
    "Capabilities capabilities = 9",
    "bytes stdin_config = 10",
  ],
  Capabilities: [
    "repeated PortMapping port_mappings = 1",
    "Bandwidth bandwidth = 2",
    "repeated IPRangeSet ip_ranges = 3",
    "repeated string ips = 4",
    "string mac = 5",
    "DNSCapability dns = 6",
    "map<string, AliasList> aliases = 7",
    "string cgroup_path = 8",
    "map<string, string> pod_annotations = 9",
    "string extra_json = 10",
  ],
  PortMapping: [
    "uint32 host_port = 1",
    "uint32 container_port = 2",
    "string protocol = 3",
    "string host_ip = 4",
  ],
  Bandwidth: [
    "uint64 ingress_rate = 1",
    "uint64 ingress_burst = 2",
    "uint64 egress_rate = 3",
    "uint64 egress_burst = 4",
  ],
  IPRangeSet: ["repeated IPRange ranges = 1"],
  IPRange: [
    "string subnet = 1",
    "string range_start = 2",
    "string range_end = 3",
    "string gateway = 4",
  ],
  DNSCapability: [
    "repeated string servers = 1",
    "repeated string searches = 2",
    "repeated string options = 3",
  ],
  AliasList: ["repeated string names = 1"],
  PodResponse: [
    "CniError error = 1",
    "string cni_version = 2",
    "string result_json = 3",
    "Result result = 4",
  ],
  Result: [
    "repeated Interface interfaces = 1",
    "repeated IPConfig ips = 2",
    "repeated Route routes = 3",
    "DNS dns = 4",
  ],
  Interface: [
    "string name = 1",
    "string mac = 2",
    "string sandbox = 3",
    "optional uint32 mtu = 4",
    "string socket_path = 5",
    "string pci_id = 6",
  ],
  IPConfig: ["string address = 1", "string gateway = 2", "optional int32 interface = 3"],
  Route: [
    "string dst = 1",
    "string gw = 2",
    "optional uint32 mtu = 3",
    "optional uint32 advmss = 4",
    "optional uint32 priority = 5",
    "optional uint32 table = 6",
    "optional uint32 scope = 7",
  ],
  DNS: [
    "repeated string nameservers = 1",
    "string domain = 2",
    "repeated string search = 3",
    "repeated string options = 4",
  ],
  TearDownPodResponse: ["CniError error = 1"],
  CheckPodResponse: ["CniError error = 1"],
  CniStatusRequest: ["uint32 api_version = 1", "string network = 2", "string cni_version = 3"],
  CniStatusResponse: [
    "CniError error = 1",
    "bool ready = 2",
    "repeated string not_ready_reasons = 3",
    "ActiveConfig config = 4",
    "ConfigError last_config_error = 5",
    "repeated string supported_cni_versions = 6",
    "string driver_version = 7",
    "uint32 attachments = 8",
    "uint32 api_version = 9",
  ],
  ActiveConfig: [
    "repeated string networks = 1",
    "string default_network = 2",
    "string source = 3",
    "string content_hash = 4",
    "uint64 generation = 5",
    "int64 loaded_at_unix_ms = 6",
  ],
  ConfigError: ["string message = 1", "int64 at_unix_ms = 2", "string source = 3"],
  GarbageCollectRequest: [
    "uint32 api_version = 1",
    "repeated NetworkAttachments networks = 2",
    "string cni_version = 3",
  ],
  NetworkAttachments: ["string network = 1", "repeated Attachment valid_attachments = 2"],
  Attachment: ["string container_id = 1", "string ifname = 2"],
  GarbageCollectResponse: [
    "CniError error = 1",
    "repeated CniError errors = 2",
    "uint32 removed_attachments = 3",
  ],
} as const satisfies Record<string, readonly string[]>;

export type MessageName = keyof typeof PROTO_SCHEMA;

/** The TypeScript shape of each message (src/wire/types.ts). */
export interface WireMessages {
  CniError: WireCniError;
  KeyValue: KeyValue;
  PodIdentity: PodIdentity;
  PodRequest: PodRequest;
  Capabilities: Capabilities;
  PortMapping: PortMapping;
  Bandwidth: Bandwidth;
  IPRangeSet: Capabilities["ip_ranges"][number];
  IPRange: IPRange;
  DNSCapability: NonNullable<Capabilities["dns"]>;
  AliasList: Capabilities["aliases"][string];
  PodResponse: PodResponse;
  Result: WireResult;
  Interface: WireInterface;
  IPConfig: WireIPConfig;
  Route: WireRoute;
  DNS: WireDNS;
  TearDownPodResponse: ErrorOnlyResponse;
  CheckPodResponse: ErrorOnlyResponse;
  CniStatusRequest: CniStatusRequest;
  CniStatusResponse: CniStatusResponse;
  ActiveConfig: ActiveConfig;
  ConfigError: WireConfigError;
  GarbageCollectRequest: GarbageCollectRequest;
  NetworkAttachments: NetworkAttachments;
  Attachment: Attachment;
  GarbageCollectResponse: GarbageCollectResponse;
}

const SCALAR_TYPES = ["uint32", "int32", "uint64", "int64", "bool", "string", "bytes"] as const;
type ScalarType = (typeof SCALAR_TYPES)[number];

/** One field of the schema, parsed from its line. */
export interface FieldSchema {
  readonly number: number;
  readonly name: string;
  /** "plain": proto3 implicit presence; "optional": explicit presence (zero still written). */
  readonly label: "plain" | "optional" | "repeated" | "map";
  /** A scalar type or a message name; for a map, the value type (keys are always strings). */
  readonly type: ScalarType | MessageName;
}

const FIELD_LINE = /^(optional |repeated )?(?:map<string, (\w+)>|(\w+)) (\w+) = (\d+)$/;

function isScalar(type: string): type is ScalarType {
  return (SCALAR_TYPES as readonly string[]).includes(type);
}

/** Parses one schema line ("optional uint32 mtu = 4", "map<string, AliasList> aliases = 7"). */
export function parseFieldLine(line: string): FieldSchema {
  const m = FIELD_LINE.exec(line);
  if (!m) throw new Error(`protobuf schema: cannot read field ${JSON.stringify(line)}`);
  const [, modifier, mapValue, type, name, number] = m;
  const label = mapValue
    ? "map"
    : modifier === "optional "
      ? "optional"
      : modifier
        ? "repeated"
        : "plain";
  const fieldType = (mapValue ?? type) as string;
  if (!isScalar(fieldType) && !Object.hasOwn(PROTO_SCHEMA, fieldType)) {
    throw new Error(`protobuf schema: unknown type ${fieldType} in ${JSON.stringify(line)}`);
  }
  return {
    number: Number(number),
    name: name as string,
    label,
    type: fieldType as ScalarType | MessageName,
  };
}

interface MessageSchema {
  readonly fields: readonly FieldSchema[];
  readonly byNumber: ReadonlyMap<number, FieldSchema>;
}

const schemas = new Map<string, MessageSchema>();

function schemaOf(name: string): MessageSchema {
  let s = schemas.get(name);
  if (!s) {
    const fields = (PROTO_SCHEMA[name as MessageName] as readonly string[])
      .map(parseFieldLine)
      .sort((a, b) => a.number - b.number);
    s = { fields, byNumber: new Map(fields.map((f) => [f.number, f])) };
    schemas.set(name, s);
  }
  return s;
}

/** The fields of a message, in field-number order. */
export function messageFields(name: MessageName): readonly FieldSchema[] {
  return schemaOf(name).fields;
}

// Wire types.
const VARINT = 0;
const FIXED64 = 1;
const LEN = 2;
const START_GROUP = 3;
const END_GROUP = 4;
const FIXED32 = 5;

function wireTypeOf(type: ScalarType | MessageName): number {
  return type === "string" || type === "bytes" || !isScalar(type) ? LEN : VARINT;
}

const TWO_32 = 2 ** 32;

// ---------------------------------------------------------------------------
// Encoding

class Writer {
  private buf = new Uint8Array(256);
  private len = 0;

  private reserve(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }

  /** A non-negative integer below 2^53 as a varint. */
  varint(value: number): void {
    this.reserve(10);
    let v = value;
    while (v >= 0x80) {
      this.buf[this.len++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buf[this.len++] = v;
  }

  /** Any integer as its 64-bit two's complement varint (negative numbers take 10 bytes). */
  signedVarint(value: number): void {
    if (value >= 0) {
      this.varint(value);
      return;
    }
    const u = BigInt.asUintN(64, BigInt(value));
    let lo = Number(u & 0xffffffffn);
    let hi = Number(u >> 32n);
    this.reserve(10);
    while (hi > 0 || lo > 0x7f) {
      this.buf[this.len++] = (lo & 0x7f) | 0x80;
      lo = ((lo >>> 7) | (hi << 25)) >>> 0;
      hi >>>= 7;
    }
    this.buf[this.len++] = lo;
  }

  tag(number: number, wireType: number): void {
    this.varint(number * 8 + wireType);
  }

  bytes(data: Uint8Array): void {
    this.varint(data.length);
    this.reserve(data.length);
    this.buf.set(data, this.len);
    this.len += data.length;
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}

const textEncoder = new TextEncoder();

/** Whether a plain (implicit-presence) scalar holds its zero and so stays off the wire. */
function isZero(type: ScalarType, value: unknown): boolean {
  switch (type) {
    case "string":
      return value === "";
    case "bytes":
      return (value as Uint8Array).length === 0;
    case "bool":
      return value === false;
    default:
      return value === 0;
  }
}

function writeScalar(w: Writer, type: ScalarType, value: unknown): void {
  switch (type) {
    case "string":
      w.bytes(textEncoder.encode(value as string));
      return;
    case "bytes":
      w.bytes(value as Uint8Array);
      return;
    case "bool":
      w.varint(value ? 1 : 0);
      return;
    case "uint32":
      w.varint(Number(value) >>> 0);
      return;
    case "int32":
      w.signedVarint(Number(value) | 0);
      return;
    case "uint64": {
      const n = Math.trunc(Number(value));
      if (n >= 0) w.varint(n);
      else w.signedVarint(n);
      return;
    }
    case "int64":
      w.signedVarint(Math.trunc(Number(value)));
      return;
  }
}

function writeValue(
  w: Writer,
  number: number,
  type: ScalarType | MessageName,
  value: unknown,
): void {
  w.tag(number, wireTypeOf(type));
  if (isScalar(type)) writeScalar(w, type, value);
  else w.bytes(encodeFields(type, value as Record<string, unknown>));
}

function encodeFields(name: string, msg: Record<string, unknown>): Uint8Array {
  const w = new Writer();
  for (const f of schemaOf(name).fields) {
    const value = msg[f.name];
    if (value === undefined || value === null) continue;
    switch (f.label) {
      case "plain":
        if (isScalar(f.type) && isZero(f.type, value)) continue;
        writeValue(w, f.number, f.type, value);
        break;
      case "optional":
        writeValue(w, f.number, f.type, value);
        break;
      case "repeated":
        for (const item of value as unknown[]) writeValue(w, f.number, f.type, item);
        break;
      case "map":
        for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
          const entry = new Writer();
          writeValue(entry, 1, "string", key);
          writeValue(entry, 2, f.type, item);
          w.tag(f.number, LEN);
          w.bytes(entry.finish());
        }
        break;
    }
  }
  return w.finish();
}

/** Encodes a message; fields missing from the object are left off the wire. */
export function encodeMessage<K extends MessageName>(name: K, value: WireMessages[K]): Uint8Array {
  return encodeFields(name, value as unknown as Record<string, unknown>);
}

// ---------------------------------------------------------------------------
// Decoding

export class ProtobufDecodeError extends Error {
  override name = "ProtobufDecodeError";
}

const textDecoder = new TextDecoder("utf-8");

class Reader {
  pos: number;
  constructor(
    readonly buf: Uint8Array,
    start: number,
    readonly end: number,
  ) {
    this.pos = start;
  }

  private byte(): number {
    if (this.pos >= this.end) throw new ProtobufDecodeError("truncated message");
    return this.buf[this.pos++] as number;
  }

  /** A varint as its low and high 32 bits (unsigned). */
  varint(): [lo: number, hi: number] {
    let lo = 0;
    let hi = 0;
    for (let shift = 0; shift < 70; shift += 7) {
      const b = this.byte();
      const bits = b & 0x7f;
      if (shift < 28) lo |= bits << shift;
      else if (shift === 28) {
        lo |= bits << 28;
        hi |= bits >>> 4;
      } else hi |= bits << (shift - 32);
      if ((b & 0x80) === 0) return [lo >>> 0, hi >>> 0];
    }
    throw new ProtobufDecodeError("varint longer than 10 bytes");
  }

  /** A varint that must fit in 32 bits unsigned (tags, lengths). */
  uint32(): number {
    return this.varint()[0];
  }

  skip(n: number): void {
    if (n > this.end - this.pos) throw new ProtobufDecodeError("truncated message");
    this.pos += n;
  }

  lengthDelimited(): [start: number, end: number] {
    const n = this.uint32();
    const start = this.pos;
    this.skip(n);
    return [start, this.pos];
  }

  skipField(wireType: number, number: number): void {
    switch (wireType) {
      case VARINT:
        this.varint();
        return;
      case FIXED64:
        this.skip(8);
        return;
      case LEN:
        this.lengthDelimited();
        return;
      case FIXED32:
        this.skip(4);
        return;
      case START_GROUP:
        for (;;) {
          const tag = this.uint32();
          const wt = tag & 7;
          if (wt === END_GROUP) {
            if (tag >>> 3 !== number) throw new ProtobufDecodeError("mismatched end of group");
            return;
          }
          this.skipField(wt, tag >>> 3);
        }
      default:
        throw new ProtobufDecodeError(`invalid wire type ${wireType} (field ${number})`);
    }
  }
}

function zeroOf(f: FieldSchema): unknown {
  switch (f.label) {
    case "repeated":
      return [];
    case "map":
      return {};
    case "optional":
      return undefined;
    case "plain":
      break;
  }
  switch (f.type) {
    case "string":
      return "";
    case "bytes":
      return Buffer.alloc(0);
    case "bool":
      return false;
    case "uint32":
    case "int32":
    case "uint64":
    case "int64":
      return 0;
    default:
      return null;
  }
}

function defaults(name: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of schemaOf(name).fields) {
    const zero = zeroOf(f);
    if (zero !== undefined) out[f.name] = zero;
  }
  return out;
}

function readScalar(r: Reader, type: ScalarType): unknown {
  switch (type) {
    case "string": {
      const [start, end] = r.lengthDelimited();
      return textDecoder.decode(r.buf.subarray(start, end));
    }
    case "bytes": {
      const [start, end] = r.lengthDelimited();
      return Buffer.from(r.buf.subarray(start, end));
    }
    case "bool": {
      const [lo, hi] = r.varint();
      return lo !== 0 || hi !== 0;
    }
    case "uint32":
      return r.varint()[0];
    case "int32":
      return r.varint()[0] | 0;
    case "uint64": {
      const [lo, hi] = r.varint();
      return hi * TWO_32 + lo;
    }
    case "int64": {
      const [lo, hi] = r.varint();
      if (hi < 0x80000000) return hi * TWO_32 + lo;
      return Number(BigInt.asIntN(64, (BigInt(hi) << 32n) | BigInt(lo)));
    }
  }
}

function readValue(r: Reader, type: ScalarType | MessageName, into?: unknown): unknown {
  if (isScalar(type)) return readScalar(r, type);
  const [start, end] = r.lengthDelimited();
  return decodeFields(
    type,
    new Reader(r.buf, start, end),
    (into as Record<string, unknown> | null) ?? undefined,
  );
}

function readMapEntry(r: Reader, f: FieldSchema, map: Record<string, unknown>): void {
  const [start, end] = r.lengthDelimited();
  const entry = new Reader(r.buf, start, end);
  let key = "";
  let value: unknown;
  while (entry.pos < entry.end) {
    const tag = entry.uint32();
    const number = tag >>> 3;
    const wt = tag & 7;
    if (number === 1 && wt === LEN) key = readScalar(entry, "string") as string;
    else if (number === 2 && wt === wireTypeOf(f.type)) value = readValue(entry, f.type, value);
    else entry.skipField(wt, number);
  }
  // defineProperty: a key such as "__proto__" is data, not the object's prototype.
  Object.defineProperty(map, key, {
    value: value ?? (isScalar(f.type) ? zeroOf({ ...f, label: "plain" }) : defaults(f.type)),
    enumerable: true,
    writable: true,
    configurable: true,
  });
}

function decodeFields(name: string, r: Reader, into?: Record<string, unknown>): unknown {
  const { byNumber } = schemaOf(name);
  const msg = into ?? defaults(name);
  while (r.pos < r.end) {
    const tag = r.uint32();
    const number = tag >>> 3;
    const wt = tag & 7;
    if (number === 0) throw new ProtobufDecodeError("invalid field number 0");
    const f = byNumber.get(number);
    if (!f || wt !== wireTypeOf(f.type)) {
      r.skipField(wt, number);
      continue;
    }
    switch (f.label) {
      case "plain":
      case "optional":
        // A repeated occurrence: the last scalar wins; messages merge, as protobuf specifies.
        msg[f.name] = readValue(r, f.type, msg[f.name]);
        break;
      case "repeated":
        (msg[f.name] as unknown[]).push(readValue(r, f.type));
        break;
      case "map":
        readMapEntry(r, f, msg[f.name] as Record<string, unknown>);
        break;
    }
  }
  return msg;
}

/** Decodes a message; throws ProtobufDecodeError on malformed bytes. */
export function decodeMessage<K extends MessageName>(name: K, bytes: Uint8Array): WireMessages[K] {
  return decodeFields(name, new Reader(bytes, 0, bytes.length)) as WireMessages[K];
}
