/**
 * The shim's hand-written protobuf codec against the real thing: the schema it
 * carries must be proto/cni_driver.proto's, and for every message its bytes must
 * decode with @grpc/proto-loader (protobufjs, loaded as the driver loads it) to the
 * same object, and the other way round. For the same data (zero plain scalars left
 * out, as proto3 encoders do) the bytes are identical.
 */
import * as protoLoader from "@grpc/proto-loader";
import { expect } from "chai";
import {
  decodeMessage,
  encodeMessage,
  type MessageName,
  messageFields,
  PROTO_SCHEMA,
  ProtobufDecodeError,
  parseFieldLine,
  type WireMessages,
} from "../../src/remote-plugin-shim/protobuf.js";
import { PROTO_LOADER_OPTIONS, protoPath } from "../../src/wire/proto-path.js";

const PKG = "cnidriver.v1";
const definition = protoLoader.loadSync(protoPath(), PROTO_LOADER_OPTIONS);

type Loaded = protoLoader.MessageTypeDefinition<object, Record<string, unknown>>;

function loaded(name: string): Loaded {
  const def = definition[`${PKG}.${name}`] as Loaded | undefined;
  if (def?.format !== "Protocol Buffer 3 DescriptorProto") throw new Error(`no message ${name}`);
  return def;
}

// ---- the schema as protobufjs read it from the .proto ------------------------------

interface FieldDescriptor {
  name: string;
  number: number;
  label: string;
  type: string;
  typeName: string;
}
interface MessageDescriptor {
  field: FieldDescriptor[];
  nestedType: Array<{
    name: string;
    field: FieldDescriptor[];
    options: { mapEntry?: boolean } | null;
  }>;
  oneofDecl: { name: string }[];
}

function typeText(f: FieldDescriptor): string {
  return f.type === "TYPE_MESSAGE" ? f.typeName : f.type.replace(/^TYPE_/, "").toLowerCase();
}

/** A loaded field written back in .proto syntax ("optional int32 interface = 3"). */
function protoFieldLines(name: string): string[] {
  const msg = loaded(name).type as unknown as MessageDescriptor;
  return [...msg.field]
    .sort((a, b) => a.number - b.number)
    .map((f) => {
      const entry = msg.nestedType.find((n) => n.name === f.typeName && n.options?.mapEntry);
      if (entry) {
        const [k, v] = entry.field;
        return `map<${typeText(k!)}, ${typeText(v!)}> ${f.name} = ${f.number}`;
      }
      // proto3 `optional` is the synthetic oneof "_<field>".
      const optional = msg.oneofDecl.some((o) => o.name === `_${f.name}`);
      const label = f.label === "LABEL_REPEATED" ? "repeated " : optional ? "optional " : "";
      return `${label}${typeText(f)} ${f.name} = ${f.number}`;
    });
}

const PROTO_MESSAGES = Object.entries(definition)
  .filter(([, d]) => (d as Loaded).format === "Protocol Buffer 3 DescriptorProto")
  .map(([k]) => k.slice(PKG.length + 1));

// ---- sample messages ---------------------------------------------------------------

const ALL_BYTES = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
const UNICODE = "ünïcödé ✓ 🚀 \u0000 end";

const cniError = { code: 7, msg: 'no network named "x"', details: "networks: a, b" };
const podIdentity = { namespace: "kube-system", name: "coredns-1", uid: "6f1c-77" };
const capabilities: WireMessages["Capabilities"] = {
  port_mappings: [
    { host_port: 8080, container_port: 80, protocol: "tcp", host_ip: "127.0.0.1" },
    { host_port: 65535, container_port: 0, protocol: "", host_ip: "" },
  ],
  bandwidth: {
    ingress_rate: 2 ** 53 - 1,
    ingress_burst: 0,
    egress_rate: 1e9,
    egress_burst: 2 ** 32,
  },
  ip_ranges: [
    {
      ranges: [
        { subnet: "10.1.2.0/24", range_start: "10.1.2.10", range_end: "", gateway: "10.1.2.1" },
      ],
    },
    { ranges: [] },
  ],
  ips: ["10.1.2.3/24", "", "fd00::5"],
  mac: "0a:58:0a:01:02:03",
  dns: { servers: ["10.96.0.10"], searches: ["svc.cluster.local", ""], options: ["ndots:5"] },
  aliases: { "pod-network": { names: ["a", "b"] }, empty: { names: [] }, "": { names: [""] } },
  cgroup_path: "/kubepods/burstable/pod1",
  pod_annotations: { "k8s.io/x": UNICODE, "": "", empty: "" },
  extra_json: '{"deviceID":"0000:03:00.1"}',
};
const result: WireMessages["Result"] = {
  interfaces: [
    { name: "veth1234", mac: "aa:bb:cc:dd:ee:ff", sandbox: "", socket_path: "", pci_id: "" },
    {
      name: "eth0",
      mac: "0a:58:0a:01:00:05",
      sandbox: "/run/netns/x",
      mtu: 0,
      socket_path: "/run/vhost.sock",
      pci_id: "0000:03:00.1",
    },
    { name: "big", mac: "", sandbox: "", mtu: 4294967295, socket_path: "", pci_id: "" },
  ],
  ips: [
    { address: "10.1.0.5/24", gateway: "10.1.0.1", interface: 1 },
    { address: "fd00::5/64", gateway: "", interface: 0 },
    { address: "192.0.2.1/32", gateway: "" },
    { address: "192.0.2.2/32", gateway: "", interface: -1 },
    { address: "192.0.2.3/32", gateway: "", interface: -2147483648 },
  ],
  routes: [
    { dst: "0.0.0.0/0", gw: "10.1.0.1" },
    { dst: "10.9.0.0/16", gw: "", mtu: 1400, advmss: 1360, priority: 0, table: 0, scope: 253 },
  ],
  dns: { nameservers: ["10.96.0.10"], domain: "cluster.local", search: [], options: ["ndots:5"] },
};
const activeConfig = {
  networks: ["a", "pod-network"],
  default_network: "pod-network",
  source: "/etc/cni-driver",
  content_hash: "ab".repeat(32),
  generation: 2 ** 40 + 3,
  loaded_at_unix_ms: 1_760_000_000_123,
};

/** Every message, at least one sample each: full, empty, and the edges of each type. */
const SAMPLES: { [K in MessageName]: Array<Partial<WireMessages[K]>> } = {
  CniError: [cniError, {}, { code: 4294967295, msg: UNICODE, details: "" }],
  KeyValue: [
    { key: "IgnoreUnknown", value: "1" },
    { key: "", value: "" },
  ],
  PodIdentity: [podIdentity, {}],
  PodRequest: [
    {
      api_version: 1,
      pod: podIdentity,
      container_id: "c0ffee",
      netns: "/run/netns/cni-1",
      ifname: "eth0",
      network: "pod-network",
      cni_version: "1.1.0",
      cni_args: [
        { key: "IgnoreUnknown", value: "1" },
        { key: "K8S_POD_NAME", value: "p" },
        { key: "", value: "" },
      ],
      capabilities,
      stdin_config: ALL_BYTES,
    },
    {},
    {
      api_version: 0,
      pod: { namespace: "", name: "", uid: "" },
      capabilities: null,
      stdin_config: Buffer.alloc(0),
    },
  ],
  Capabilities: [capabilities, {}],
  PortMapping: [capabilities.port_mappings[0]!, {}],
  Bandwidth: [capabilities.bandwidth!, { ingress_rate: 1 }],
  IPRangeSet: [capabilities.ip_ranges[0]!, { ranges: [] }],
  IPRange: [capabilities.ip_ranges[0]!.ranges[0]!, {}],
  DNSCapability: [capabilities.dns!, {}],
  AliasList: [{ names: ["x", "", UNICODE] }, {}],
  PodResponse: [
    { error: null, cni_version: "0.3.1", result_json: '{"cniVersion":"0.3.1"}', result },
    { error: cniError, cni_version: "1.0.0", result_json: "", result: null },
    {},
  ],
  Result: [result, {}, { interfaces: [], ips: [], routes: [], dns: null }],
  Interface: [...result.interfaces],
  IPConfig: [...result.ips],
  Route: [...result.routes, {}],
  DNS: [result.dns!, {}],
  TearDownPodResponse: [
    { error: null },
    { error: cniError },
    { error: { code: 0, msg: "", details: "" } },
  ],
  CheckPodResponse: [{ error: cniError }, {}],
  CniStatusRequest: [{ api_version: 1, network: "pod-network", cni_version: "1.1.0" }, {}],
  CniStatusResponse: [
    {
      error: { code: 50, msg: "cannot serve ADD", details: "" },
      ready: false,
      not_ready_reasons: ["no config", "start-up recovery in progress"],
      config: activeConfig,
      last_config_error: { message: "bad json", at_unix_ms: -5, source: "/etc/cni-driver" },
      supported_cni_versions: ["0.1.0", "1.1.0"],
      driver_version: "0.1.0",
      attachments: 300,
      api_version: 1,
    },
    { ready: true, api_version: 1 },
    {},
  ],
  ActiveConfig: [activeConfig, { generation: 1, loaded_at_unix_ms: -1 }, {}],
  ConfigError: [{ message: "x", at_unix_ms: -(2 ** 53 - 1), source: "s" }, {}],
  GarbageCollectRequest: [
    {
      api_version: 1,
      networks: [
        {
          network: "",
          valid_attachments: [
            { container_id: "a", ifname: "eth0" },
            { container_id: "b", ifname: "net1" },
          ],
        },
        { network: "other", valid_attachments: [] },
      ],
      cni_version: "1.1.0",
    },
    {},
  ],
  NetworkAttachments: [
    { network: "n", valid_attachments: [{ container_id: "a", ifname: "eth0" }] },
    {},
  ],
  Attachment: [{ container_id: "a", ifname: "eth0" }, {}],
  GarbageCollectResponse: [
    {
      error: cniError,
      errors: [cniError, { code: 999, msg: "m", details: "" }],
      removed_attachments: 2,
    },
    {},
  ],
};

/** What proto-loader makes of a value: the canonical object both sides must produce. */
function canonical(name: MessageName, value: object): Record<string, unknown> {
  const def = loaded(name);
  return def.deserialize(def.serialize(value));
}

/** The value without zero plain scalars: what a proto3 encoder (and ours) puts on the wire. */
function withoutZeros(name: MessageName, value: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of messageFields(name)) {
    const v = value[f.name];
    if (v === undefined || v === null) continue;
    const isMessage = !["uint32", "int32", "uint64", "int64", "bool", "string", "bytes"].includes(
      f.type,
    );
    if (!isMessage) {
      const zero =
        v === 0 || v === "" || v === false || (v instanceof Uint8Array && v.length === 0);
      if (f.label === "plain" && zero) continue;
      out[f.name] = v;
      continue;
    }
    const sub = (x: unknown) => withoutZeros(f.type as MessageName, x as Record<string, unknown>);
    if (f.label === "repeated") out[f.name] = (v as unknown[]).map(sub);
    else if (f.label === "map")
      out[f.name] = Object.fromEntries(Object.entries(v as object).map(([k, x]) => [k, sub(x)]));
    else out[f.name] = sub(v);
  }
  return out;
}

const hex = (b: Uint8Array): string => Buffer.from(b).toString("hex");

describe("shim protobuf codec", () => {
  describe("schema", () => {
    it("has exactly the messages of proto/cni_driver.proto", () => {
      expect(Object.keys(PROTO_SCHEMA)).to.have.members(PROTO_MESSAGES);
    });

    for (const name of Object.keys(PROTO_SCHEMA) as MessageName[]) {
      it(`${name}: the .proto's fields, names, types, labels and numbers`, () => {
        expect([...PROTO_SCHEMA[name]]).to.deep.equal(protoFieldLines(name));
      });
    }

    it("refuses a field line it cannot read or a type it does not know", () => {
      expect(() => parseFieldLine("uint32 code")).to.throw(/cannot read field/);
      expect(() => parseFieldLine("float ratio = 1")).to.throw(/unknown type float/);
      expect(parseFieldLine("map<string, AliasList> aliases = 7")).to.deep.equal({
        number: 7,
        name: "aliases",
        label: "map",
        type: "AliasList",
      });
    });
  });

  describe("against protobufjs (@grpc/proto-loader, the driver's options)", () => {
    for (const [name, samples] of Object.entries(SAMPLES) as Array<[MessageName, object[]]>) {
      samples.forEach((sample, i) => {
        it(`${name} #${i}: same bytes, and each side decodes the other's to the same object`, () => {
          const def = loaded(name);
          const want = canonical(name, sample);
          const ours = encodeMessage(name, sample as never);
          expect(hex(ours), "bytes").to.equal(
            hex(def.serialize(withoutZeros(name, sample as Record<string, unknown>))),
          );
          expect(def.deserialize(Buffer.from(ours)), "protobufjs decodes ours").to.deep.equal(want);
          // protobufjs writes every field the object holds, zeros included.
          expect(
            decodeMessage(name, def.serialize(sample)),
            "we decode protobufjs's",
          ).to.deep.equal(want);
          expect(decodeMessage(name, ours), "round trip").to.deep.equal(want);
        });
      });
    }
  });

  describe("wire rules", () => {
    it("writes an optional field that is set to zero, and leaves a plain zero out", () => {
      expect(hex(encodeMessage("IPConfig", { address: "", gateway: "", interface: 0 }))).to.equal(
        "1800",
      );
      expect(hex(encodeMessage("IPConfig", { address: "", gateway: "" }))).to.equal("");
      expect(
        hex(encodeMessage("CniStatusRequest", { api_version: 0, network: "", cni_version: "" })),
      ).to.equal("");
      const decoded = decodeMessage("IPConfig", Buffer.from("1800", "hex"));
      expect(decoded).to.deep.equal({ address: "", gateway: "", interface: 0 });
      expect(decodeMessage("IPConfig", Buffer.alloc(0))).not.to.have.property("interface");
    });

    it("reads a plain zero sent on the wire as the zero", () => {
      // api_version = 0, container_id = "", stdin_config = empty bytes
      const req = decodeMessage("PodRequest", Buffer.from("08001a005200", "hex"));
      expect(req.api_version).to.equal(0);
      expect(req.container_id).to.equal("");
      expect(Buffer.from(req.stdin_config).length).to.equal(0);
    });

    it("fills absent fields with the documented defaults", () => {
      expect(decodeMessage("PodResponse", new Uint8Array())).to.deep.equal({
        error: null,
        cni_version: "",
        result_json: "",
        result: null,
      });
      expect(decodeMessage("Capabilities", new Uint8Array())).to.deep.include({
        port_mappings: [],
        aliases: {},
        pod_annotations: {},
        bandwidth: null,
      });
    });

    it("skips unknown fields of every wire type, and known fields with the wrong wire type", () => {
      const base = encodeMessage("PodRequest", SAMPLES.PodRequest[0] as WireMessages["PodRequest"]);
      const unknownFields = Buffer.from(
        [
          "9806ffffffffffffffffff01", // 99 varint, 10 bytes
          "920603616263", // 98 len "abc"
          "8d0601020304", // 97 fixed32
          "81060102030405060708", // 96 fixed64
          "fb05" + "0801" + "1203787878" + "fc05", // 95 group { 1 varint, 2 len "xxx" }
        ].join(""),
        "hex",
      );
      const wrongWireType = Buffer.from("1801", "hex"); // 3 (container_id, a string) as a varint
      const want = decodeMessage("PodRequest", base);
      expect(
        decodeMessage(
          "PodRequest",
          Buffer.concat([unknownFields, wrongWireType, base, unknownFields]),
        ),
      ).to.deep.equal(want);
      // protobufjs skips the same unknown fields to the same object.
      expect(loaded("PodRequest").deserialize(Buffer.concat([base, unknownFields]))).to.deep.equal(
        want,
      );
    });

    it("merges a message field that occurs twice, and lets a repeated scalar's last value win", () => {
      const first = encodeMessage("PodRequest", {
        api_version: 1,
        pod: { namespace: "ns", name: "", uid: "" },
      } as never);
      const second = encodeMessage("PodRequest", {
        api_version: 2,
        pod: { namespace: "", name: "p", uid: "" },
      } as never);
      const req = decodeMessage("PodRequest", Buffer.concat([first, second]));
      expect(req.api_version).to.equal(2);
      expect(req.pod).to.deep.equal({ namespace: "ns", name: "p", uid: "" });
    });

    it("keeps a map key named __proto__ as data", () => {
      const bytes = encodeMessage("Capabilities", {
        pod_annotations: JSON.parse('{"__proto__":"x"}'),
      } as never);
      const caps = decodeMessage("Capabilities", bytes);
      expect(Object.getPrototypeOf(caps.pod_annotations)).to.equal(Object.prototype);
      expect(Object.keys(caps.pod_annotations)).to.deep.equal(["__proto__"]);
    });

    for (const [what, bytesHex] of [
      ["a truncated varint", "08"],
      ["a varint longer than 10 bytes", "08ffffffffffffffffffff01"],
      ["a length past the end", "1a05616263"],
      ["a truncated fixed64", "81060102"],
      ["field number 0", "0001"],
      ["an end of group with no start", "0c"],
      ["a group that is never closed", "fb050801"],
    ] as const) {
      it(`rejects ${what}`, () => {
        expect(() => decodeMessage("PodRequest", Buffer.from(bytesHex, "hex"))).to.throw(
          ProtobufDecodeError,
        );
      });
    }
  });
});
