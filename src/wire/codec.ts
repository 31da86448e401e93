/**
 * The proto's messages as the driver reads and writes them: protobufjs, parsing
 * proto/cni_driver.proto at start, converting exactly as @grpc/proto-loader does
 * for the client (toObject with PROTO_LOADER_OPTIONS on the way in, fromObject on
 * the way out), so both ends see the same plain objects.
 */
import { createRequire } from "node:module";
import type * as Protobuf from "protobufjs";
import { PROTO_LOADER_OPTIONS, protoPath } from "./proto-path.js";

// protobufjs is CommonJS and builds its exports at run time: Node's ESM import cannot name them.
const protobuf = createRequire(import.meta.url)("protobufjs") as typeof Protobuf;

// Exported for its tests only (integration/driver-wire-compat.test.ts).
export const SERVICE_NAME = "cnidriver.v1.CNIDriver";

export interface UnaryMethodCodec {
  /** The method's name in the proto ("SetUpPod"). */
  name: string;
  /** Its HTTP/2 :path ("/cnidriver.v1.CNIDriver/SetUpPod"). */
  path: string;
  decodeRequest(bytes: Uint8Array): unknown;
  encodeResponse(message: unknown): Uint8Array;
}

/** Every method of the service, by :path. Throws if the proto cannot be read. */
export function loadServiceCodecs(): Map<string, UnaryMethodCodec> {
  const root = new protobuf.Root().loadSync(protoPath(), {
    keepCase: PROTO_LOADER_OPTIONS.keepCase,
  });
  root.resolveAll();
  const service = root.lookupService(SERVICE_NAME);
  const codecs = new Map<string, UnaryMethodCodec>();
  for (const method of service.methodsArray) {
    if (method.requestStream || method.responseStream)
      throw new Error(`${SERVICE_NAME}/${method.name} streams; the driver serves unary calls only`);
    const request = method.resolvedRequestType as Protobuf.Type;
    const response = method.resolvedResponseType as Protobuf.Type;
    const path = `/${SERVICE_NAME}/${method.name}`;
    codecs.set(path, {
      name: method.name,
      path,
      decodeRequest: (bytes) => request.toObject(request.decode(bytes), PROTO_LOADER_OPTIONS),
      encodeResponse: (message) =>
        response.encode(response.fromObject(message as Record<string, unknown>)).finish(),
    });
  }
  return codecs;
}
