/**
 * The wire contract, proto/cni_driver.proto: what kubelets, runtimes and the shim
 * rely on. The field table below is the contract in one place; a
 * change to the .proto that is not mirrored here fails.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { expect } from "chai";

const PROTO_PATH = fileURLToPath(new URL("../../proto/cni_driver.proto", import.meta.url));
const PROTO_SOURCE = readFileSync(PROTO_PATH, "utf8");
const PKG = "cnidriver.v1";

/** The loader options the driver uses, as the comment at the top of the .proto states them. */
const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: false,
};
const LOADER_OPTIONS_TEXT =
  "{ keepCase: true, longs: Number, enums: String, defaults: true, oneofs: false }";

/** Every message of the contract, its fields in proto syntax, by number. */
const CONTRACT: Record<string, string[]> = {
  CniError: ["uint32 code = 1", "string msg = 2", "string details = 3", "bool not_ready = 4"],
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
};

/** The service: method -> [request type, response type]. */
const METHODS: Record<string, [string, string]> = {
  SetUpPod: ["PodRequest", "PodResponse"],
  TearDownPod: ["PodRequest", "TearDownPodResponse"],
  CheckPod: ["PodRequest", "CheckPodResponse"],
  CniStatus: ["CniStatusRequest", "CniStatusResponse"],
  GarbageCollect: ["GarbageCollectRequest", "GarbageCollectResponse"],
};

// ---- reading the loaded descriptors ---------------------------------------------

/** The parts of protobufjs' DescriptorProto object that proto-loader exposes as `type`. */
interface FieldDescriptor {
  name: string;
  number: number;
  label: string;
  type: string;
  typeName: string;
}
interface MessageDescriptor {
  name: string;
  field: FieldDescriptor[];
  nestedType: MessageDescriptor[];
  oneofDecl: { name: string }[];
  options: { mapEntry?: boolean } | null;
}

type Loaded = protoLoader.MessageTypeDefinition<object, Record<string, unknown>>;

function load(): protoLoader.PackageDefinition {
  return protoLoader.loadSync(PROTO_PATH, LOADER_OPTIONS);
}

const definition = load();

function message(name: string): Loaded {
  const def = definition[`${PKG}.${name}`] as Loaded | undefined;
  if (def?.format !== "Protocol Buffer 3 DescriptorProto") {
    throw new Error(`no message ${name}`);
  }
  return def;
}

function descriptor(name: string): MessageDescriptor {
  return message(name).type as unknown as MessageDescriptor;
}

/** "TYPE_UINT32" -> "uint32"; message types by their name. */
function typeText(f: FieldDescriptor): string {
  return f.type === "TYPE_MESSAGE" ? f.typeName : f.type.replace(/^TYPE_/, "").toLowerCase();
}

/** Renders a field as it is written in the .proto, e.g. "optional int32 interface = 3". */
function fieldText(msg: MessageDescriptor, f: FieldDescriptor): string {
  const entry = msg.nestedType.find((n) => n.name === f.typeName && n.options?.mapEntry);
  if (entry) {
    const [k, v] = entry.field;
    return `map<${typeText(k!)}, ${typeText(v!)}> ${f.name} = ${f.number}`;
  }
  // proto3 `optional` is a synthetic oneof named "_<field>" (protoc's convention, which
  // protobufjs follows); the descriptor object does not carry proto3Optional itself.
  const optional = msg.oneofDecl.some((o) => o.name === `_${f.name}`);
  const label = f.label === "LABEL_REPEATED" ? "repeated " : optional ? "optional " : "";
  return `${label}${typeText(f)} ${f.name} = ${f.number}`;
}

function renderedFields(name: string): string[] {
  const msg = descriptor(name);
  return [...msg.field].sort((a, b) => a.number - b.number).map((f) => fieldText(msg, f));
}

function roundTrip(name: string, value: object): Record<string, unknown> {
  const def = message(name);
  return def.deserialize(def.serialize(value));
}

/** Zero values of the scalar types that appear in the contract. */
const ZERO: Record<string, unknown> = {
  string: "",
  bytes: Buffer.alloc(0),
  bool: false,
  uint32: 0,
  int32: 0,
  uint64: 0,
  int64: 0,
};

// ---- the tests ---------------------------------------------------------------------

describe("proto/cni_driver.proto", () => {
  it("is proto3 in package cnidriver.v1 and imports nothing", () => {
    expect(PROTO_SOURCE).to.match(/^syntax = "proto3";$/m);
    expect(PROTO_SOURCE).to.match(/^package cnidriver\.v1;$/m);
    expect(PROTO_SOURCE).not.to.match(/^\s*import\s/m);
    expect(PROTO_SOURCE).not.to.match(/google\.protobuf/);
  });

  it("documents the loader options the driver and the shim agree on", () => {
    expect(PROTO_SOURCE).to.include(LOADER_OPTIONS_TEXT);
  });

  it("defines exactly the messages of the contract, the ApiVersion enum and the service", () => {
    const names = Object.keys(definition)
      .filter((k) => k.startsWith(`${PKG}.`))
      .map((k) => k.slice(PKG.length + 1));
    expect(names).to.have.members([...Object.keys(CONTRACT), "ApiVersion", "CNIDriver"]);
  });

  it("names API version 1 the current version", () => {
    const def = definition[`${PKG}.ApiVersion`] as protoLoader.EnumTypeDefinition;
    const values = (def.type as { value: { name: string; number: number }[] }).value;
    expect(values.map((v) => [v.name, v.number])).to.deep.equal([
      ["API_VERSION_UNSPECIFIED", 0],
      ["API_VERSION_V1", 1],
    ]);
  });

  it("serves the five unary methods with their request and response types", () => {
    const service = definition[`${PKG}.CNIDriver`] as protoLoader.ServiceDefinition;
    expect(Object.keys(service)).to.have.members(Object.keys(METHODS));
    for (const [method, [req, res]] of Object.entries(METHODS)) {
      const m = service[method]!;
      expect(m.path, method).to.equal(`/cnidriver.v1.CNIDriver/${method}`);
      expect(m.requestStream, method).to.equal(false);
      expect(m.responseStream, method).to.equal(false);
      expect((m.requestType.type as MessageDescriptor).name, method).to.equal(req);
      expect((m.responseType.type as MessageDescriptor).name, method).to.equal(res);
    }
  });

  describe("fields (name, type, number)", () => {
    for (const [name, fields] of Object.entries(CONTRACT)) {
      it(name, () => {
        expect(renderedFields(name)).to.deep.equal(fields);
      });
    }
  });

  it("every request carries api_version = 1 and every response error = 1", () => {
    for (const [req, res] of Object.values(METHODS)) {
      expect(CONTRACT[req]![0], req).to.equal("uint32 api_version = 1");
      expect(CONTRACT[res]![0], res).to.equal("CniError error = 1");
    }
  });

  it("uses only types the shim's codec handles: no enum fields, groups or real oneofs", () => {
    for (const name of Object.keys(CONTRACT)) {
      const msg = descriptor(name);
      for (const f of msg.field) {
        expect(["TYPE_ENUM", "TYPE_GROUP"], `${name}.${f.name}`).not.to.include(f.type);
      }
      for (const o of msg.oneofDecl) {
        const synthetic = msg.field.some((f) => o.name === `_${f.name}`);
        expect(synthetic, `${name} oneof ${o.name}`).to.equal(true);
      }
    }
  });

  describe("presence", () => {
    // Decoding, a plain scalar always reads as a value (its zero when absent), while an
    // `optional` one reads as absent unless it was on the wire, zero included: an
    // interface index 0 must not read as "no index". The shim's codec does the same.
    for (const [name, fields] of Object.entries(CONTRACT)) {
      const scalars = fields
        .map((f) => /^(optional )?(\w+) (\w+) = \d+$/.exec(f))
        .filter((m): m is RegExpExecArray => m !== null && m[2]! in ZERO);
      if (scalars.length === 0) continue;
      it(`${name}: only the optional scalars can be absent, and a zero one is kept`, () => {
        const empty = roundTrip(name, {});
        for (const [, optional, type, field] of scalars) {
          if (optional) {
            expect(empty, `${name}.${field} unset`).not.to.have.property(field!);
            const zero = roundTrip(name, { [field!]: ZERO[type!] });
            expect(zero, `${name}.${field} = 0`).to.have.property(field!, ZERO[type!]);
          } else {
            expect(empty[field!], `${name}.${field}`).to.deep.equal(ZERO[type!]);
          }
        }
      });
    }
  });

  it("encodes field numbers and wire types as the shim hand-encodes them", () => {
    const bytes = message("PodRequest").serialize({
      api_version: 1,
      container_id: "c1",
      ifname: "eth0",
      cni_args: [{ key: "K", value: "V" }],
      stdin_config: Buffer.from("{}"),
    });
    expect(bytes.toString("hex")).to.equal(
      [
        "0801", // 1 varint: api_version = 1
        "1a026331", // 3 len: container_id "c1"
        "2a0465746830", // 5 len: ifname "eth0"
        "4206", // 8 len (6): cni_args[0]
        "0a014b", //   1 len: key "K"
        "120156", //   2 len: value "V"
        "52027b7d", // 10 len: stdin_config "{}"
      ].join(""),
    );
    const status = message("CniStatusResponse").serialize({
      error: { code: 50, msg: "x" },
      ready: true,
      attachments: 300,
      api_version: 1,
    });
    expect(status.toString("hex")).to.equal(
      [
        "0a05", // 1 len (5): error
        "0832", //   1 varint: code 50
        "120178", //   2 len: msg "x"
        "1001", // 2 varint: ready true
        "40ac02", // 8 varint: attachments 300
        "4801", // 9 varint: api_version 1
      ].join(""),
    );
  });

  it("reads absent fields as the documented defaults", () => {
    const req = roundTrip("PodRequest", {});
    expect(req).to.deep.include({
      api_version: 0,
      pod: null,
      container_id: "",
      cni_args: [],
      capabilities: null,
    });
    expect(Buffer.isBuffer(req.stdin_config) && req.stdin_config.length === 0).to.equal(true);
    const ip = roundTrip("IPConfig", { address: "10.1.0.5/24" });
    expect(ip).to.deep.equal({ address: "10.1.0.5/24", gateway: "" });
    expect(ip).not.to.have.property("interface");
    const caps = roundTrip("Capabilities", {});
    expect(caps).to.deep.include({ aliases: {}, pod_annotations: {}, bandwidth: null, dns: null });
  });

  it("keeps optional zeros, 64-bit numbers and maps through a round trip", () => {
    const result = roundTrip("Result", {
      interfaces: [{ name: "eth0", mac: "0a:58:0a:01:00:05", sandbox: "/run/netns/x", mtu: 0 }],
      ips: [{ address: "10.1.0.5/24", gateway: "10.1.0.1", interface: 0 }],
      routes: [{ dst: "0.0.0.0/0", table: 0, scope: 0 }],
    });
    expect(result.ips).to.deep.equal([
      { address: "10.1.0.5/24", gateway: "10.1.0.1", interface: 0 },
    ]);
    expect(result.routes).to.deep.equal([{ dst: "0.0.0.0/0", gw: "", table: 0, scope: 0 }]);
    expect((result.interfaces as object[])[0]).to.include({ mtu: 0 });

    const caps = roundTrip("Capabilities", {
      bandwidth: { ingress_rate: 2 ** 40, egress_burst: 1600 },
      aliases: { podnet: { names: ["a", "b"] } },
      pod_annotations: { "k8s.v1.cni.cncf.io/networks": "x" },
    });
    expect(caps.bandwidth).to.deep.equal({
      ingress_rate: 2 ** 40,
      ingress_burst: 0,
      egress_rate: 0,
      egress_burst: 1600,
    });
    expect(caps.aliases).to.deep.equal({ podnet: { names: ["a", "b"] } });
    expect(caps.pod_annotations).to.deep.equal({ "k8s.v1.cni.cncf.io/networks": "x" });
  });

  it("precedes every message, enum, value, rpc and field with a comment", () => {
    const lines = PROTO_SOURCE.split("\n").map((l) => l.trim());
    const declaration = [
      /^(message|enum|service)\s+\w+\s*\{$/,
      /^rpc\s+\w+\s*\(/,
      /^(optional\s+|repeated\s+)?(map<[\w\s,.]+>|[\w.]+)\s+\w+\s*=\s*\d+\s*;$/,
      /^[A-Z][A-Z0-9_]*\s*=\s*\d+\s*;$/,
    ];
    const uncommented: string[] = [];
    let fields = 0;
    let messages = 0;
    lines.forEach((line, i) => {
      if (!declaration.some((re) => re.test(line))) return;
      if (/^message\s/.test(line)) messages++;
      if (declaration[2]!.test(line)) fields++;
      const previous = lines[i - 1] ?? "";
      if (!/^\/\/\s*\S/.test(previous)) uncommented.push(`line ${i + 1}: ${line}`);
    });
    // The parse saw every declaration (else this test would pass on nothing).
    expect(messages).to.equal(Object.keys(CONTRACT).length);
    expect(fields).to.equal(Object.values(CONTRACT).flat().length);
    expect(uncommented).to.deep.equal([]);
  });

  describe("with grpc-js", () => {
    type Unary = (
      req: object,
      options: grpc.CallOptions,
      cb: (err: grpc.ServiceError | null, res: Record<string, unknown>) => void,
    ) => void;
    type ServiceClient = InstanceType<grpc.ServiceClientConstructor>;

    let dir = "";
    let server: grpc.Server | undefined;
    const received: Record<string, unknown>[] = [];

    function serviceConstructor(): grpc.ServiceClientConstructor {
      const pkg = grpc.loadPackageDefinition(load()) as unknown as {
        cnidriver: { v1: { CNIDriver: grpc.ServiceClientConstructor } };
      };
      return pkg.cnidriver.v1.CNIDriver;
    }

    function call(client: ServiceClient, method: string, req: object) {
      const fn = client[method] as Unary | undefined;
      if (!fn) throw new Error(`client has no method ${method}`);
      const deadline = Date.now() + 5000;
      return new Promise<Record<string, unknown>>((resolve, reject) => {
        fn.call(client, req, { deadline }, (err, res) => (err ? reject(err) : resolve(res)));
      });
    }

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), "cni-driver-proto-"));
      const Ctor = serviceConstructor();
      server = new grpc.Server();
      server.addService(Ctor.service, {
        SetUpPod: (
          c: grpc.ServerUnaryCall<Record<string, unknown>, object>,
          done: grpc.sendUnaryData<object>,
        ) => {
          received.push(c.request);
          done(null, {
            cni_version: "1.1.0",
            result_json: '{"cniVersion":"1.1.0"}',
            result: { ips: [{ address: "10.1.0.5/24", interface: 0 }] },
          });
        },
        CniStatus: (_c: unknown, done: grpc.sendUnaryData<object>) => {
          done(null, {
            error: { code: 50, msg: "no config loaded" },
            ready: false,
            api_version: 1,
          });
        },
      });
      await new Promise<void>((resolve, reject) =>
        server!.bindAsync(
          `unix://${join(dir, "driver.sock")}`,
          grpc.ServerCredentials.createInsecure(),
          (err) => (err ? reject(err) : resolve()),
        ),
      );
    });

    after(() => {
      server?.forceShutdown();
      rmSync(dir, { recursive: true, force: true });
    });

    it("loadPackageDefinition yields a client with the five methods", () => {
      const Ctor = serviceConstructor();
      const client = new Ctor(
        `unix://${join(dir, "none.sock")}`,
        grpc.credentials.createInsecure(),
      );
      try {
        for (const method of Object.keys(METHODS)) {
          expect(typeof client[method], method).to.equal("function");
        }
      } finally {
        client.close();
      }
    });

    it("carries a SetUpPod call and a CNI error in an OK answer over a unix socket", async () => {
      const Ctor = serviceConstructor();
      const client = new Ctor(
        `unix://${join(dir, "driver.sock")}`,
        grpc.credentials.createInsecure(),
      );
      try {
        const res = await call(client, "SetUpPod", {
          api_version: 1,
          pod: { namespace: "default", name: "web", uid: "u1" },
          container_id: "c1",
          netns: "/run/netns/x",
          ifname: "eth0",
          capabilities: { aliases: { podnet: { names: ["web"] } } },
          stdin_config: Buffer.from('{"cniVersion":"0.4.0"}'),
        });
        expect(received[0]).to.deep.include({ container_id: "c1", ifname: "eth0" });
        expect(received[0]!.pod).to.deep.equal({ namespace: "default", name: "web", uid: "u1" });
        expect(String(received[0]!.stdin_config)).to.equal('{"cniVersion":"0.4.0"}');
        expect(res.error).to.equal(null);
        expect(res.result_json).to.equal('{"cniVersion":"1.1.0"}');
        expect((res.result as { ips: unknown[] }).ips).to.deep.equal([
          { address: "10.1.0.5/24", gateway: "", interface: 0 },
        ]);

        const status = await call(client, "CniStatus", { api_version: 1 });
        expect(status.error).to.deep.equal({
          code: 50,
          msg: "no config loaded",
          details: "",
          not_ready: false,
        });
        expect(status).to.deep.include({ ready: false, api_version: 1 });
      } finally {
        client.close();
      }
    });

    it("reports a driver that is not listening as UNAVAILABLE (which clients map to 11)", async () => {
      const Ctor = serviceConstructor();
      const client = new Ctor(
        `unix://${join(dir, "none.sock")}`,
        grpc.credentials.createInsecure(),
      );
      try {
        const err = await call(client, "CniStatus", { api_version: 1 }).then(
          () => undefined,
          (e: grpc.ServiceError) => e,
        );
        expect(err?.code).to.equal(grpc.status.UNAVAILABLE);
      } finally {
        client.close();
      }
    });
  });
});
