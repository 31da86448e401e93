/**
 * The shim's proto (src/remote-plugin-shim/shim.proto) is a subset of the wire
 * contract (proto/cni_driver.proto): protobuf-c 1.4 cannot compile proto3
 * `optional`, so the shim compiles only the messages and fields it sends and reads.
 * Every one of them must have the number, type and label of the field of the same
 * name in the contract, or the shim would misread the driver.
 */
import { fileURLToPath } from "node:url";
import * as protoLoader from "@grpc/proto-loader";
import { expect } from "chai";

const CONTRACT = fileURLToPath(new URL("../../proto/cni_driver.proto", import.meta.url));
const SHIM = fileURLToPath(new URL("../../src/remote-plugin-shim/shim.proto", import.meta.url));

interface FieldShape {
  number: number;
  type: string;
  typeName: string;
  label: string;
  optional: boolean;
}

/** Each message's fields by name, as the descriptor has them. */
function messages(path: string): Map<string, Map<string, FieldShape>> {
  const def = protoLoader.loadSync(path, { keepCase: true });
  const out = new Map<string, Map<string, FieldShape>>();
  for (const [name, value] of Object.entries(def)) {
    const type = (value as { type?: { field?: unknown[] } }).type;
    if (!type?.field) continue;
    const fields = new Map<string, FieldShape>();
    for (const f of type.field as Array<Record<string, unknown>>) {
      fields.set(String(f.name), {
        number: Number(f.number),
        type: String(f.type),
        typeName: String(f.typeName ?? ""),
        label: String(f.label),
        optional: Boolean(f.proto3Optional),
      });
    }
    out.set(name, fields);
  }
  return out;
}

describe("the shim's proto: a subset of proto/cni_driver.proto, field for field", () => {
  const contract = messages(CONTRACT);
  const shim = messages(SHIM);

  it("declares messages the shim sends and reads", () => {
    expect([...shim.keys()]).to.include.members([
      "cnidriver.v1.PodRequest",
      "cnidriver.v1.PodResponse",
      "cnidriver.v1.TearDownPodResponse",
      "cnidriver.v1.CheckPodResponse",
      "cnidriver.v1.CniStatusRequest",
      "cnidriver.v1.CniStatusResponse",
      "cnidriver.v1.GarbageCollectRequest",
      "cnidriver.v1.GarbageCollectResponse",
    ]);
  });

  for (const [message, fields] of shim) {
    it(`${message}: every field has the contract's number, type and label`, () => {
      const theirs = contract.get(message);
      expect(theirs, `${message} is in the contract`).to.not.equal(undefined);
      for (const [name, field] of fields) {
        expect(theirs?.get(name), `${message}.${name}`).to.deep.equal(field);
      }
    });
  }

  it("leaves out of the requests only fields the driver reads elsewhere", () => {
    const sent = shim.get("cnidriver.v1.PodRequest");
    const all = contract.get("cnidriver.v1.PodRequest");
    const missing = [...(all?.keys() ?? [])].filter((f) => !sent?.has(f));
    expect(missing.sort()).to.deep.equal(["capabilities", "pod"]);
    for (const m of [
      "CniStatusRequest",
      "GarbageCollectRequest",
      "NetworkAttachments",
      "Attachment",
    ]) {
      expect([...(shim.get(`cnidriver.v1.${m}`)?.keys() ?? [])].sort(), m).to.deep.equal(
        [...(contract.get(`cnidriver.v1.${m}`)?.keys() ?? [])].sort(),
      );
    }
  });
});
