/**
 * A typed client of the driver's socket: what a kubelet or runtime integration
 * imports to call the driver directly (the proposal's RemoteCNINetworkPlugin
 * side), and what `cni-driver add|del|check|status|gc` stands on.
 *
 * Every method resolves to the response message; a transport failure (no
 * driver, deadline) is turned into a CNI error in the response, mapped as the
 * proto's header says: UNAVAILABLE/DEADLINE_EXCEEDED → 11, UNIMPLEMENTED → 1,
 * anything else → 999.
 */
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { transportCniError } from "../../wire/grpc-status.js";
import { MAX_GRPC_MESSAGE_BYTES } from "../../wire/message-size.js";
import { PROTO_LOADER_OPTIONS, protoPath } from "../../wire/proto-path.js";
import {
  API_VERSION,
  type CniStatusRequest,
  type CniStatusResponse,
  type ErrorOnlyResponse,
  type GarbageCollectRequest,
  type GarbageCollectResponse,
  type PodRequest,
  type PodResponse,
  type WireCniError,
} from "../../wire/types.js";

/** One of the service's methods on grpc-js's generated client. */
export type GrpcUnary = (
  req: unknown,
  meta: grpc.Metadata,
  opts: grpc.CallOptions,
  cb: (err: grpc.ServiceError | null, res: unknown) => void,
) => void;

/** grpc-js's client of the service on a unix socket, its methods by name. */
export function grpcServiceClient(
  socketPath: string,
  options: grpc.ChannelOptions = {},
): grpc.Client & Record<string, GrpcUnary> {
  const def = protoLoader.loadSync(protoPath(), PROTO_LOADER_OPTIONS);
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    cnidriver: { v1: { CNIDriver: grpc.ServiceClientConstructor } };
  };
  return new pkg.cnidriver.v1.CNIDriver(
    `unix:${socketPath}`,
    grpc.credentials.createInsecure(),
    options,
  ) as never;
}

export interface CallOptions {
  timeoutMs?: number;
}

export class DriverClient {
  private readonly client: grpc.Client & Record<string, GrpcUnary>;

  constructor(readonly socketPath: string) {
    this.client = grpcServiceClient(socketPath, {
      // The driver's own bound both ways: a request it would refuse fails here,
      // and no answer it sends is too large to read.
      "grpc.max_send_message_length": MAX_GRPC_MESSAGE_BYTES,
      "grpc.max_receive_message_length": MAX_GRPC_MESSAGE_BYTES,
    });
  }

  setUpPod(req: Partial<PodRequest>, o?: CallOptions): Promise<PodResponse> {
    return this.call("SetUpPod", withVersion(req), o, (error) => ({
      error,
      cni_version: req.cni_version ?? "",
      result_json: "",
      result: null,
    }));
  }

  tearDownPod(req: Partial<PodRequest>, o?: CallOptions): Promise<ErrorOnlyResponse> {
    return this.call("TearDownPod", withVersion(req), o, (error) => ({ error }));
  }

  checkPod(req: Partial<PodRequest>, o?: CallOptions): Promise<ErrorOnlyResponse> {
    return this.call("CheckPod", withVersion(req), o, (error) => ({ error }));
  }

  cniStatus(req: Partial<CniStatusRequest> = {}, o?: CallOptions): Promise<CniStatusResponse> {
    return this.call("CniStatus", withVersion(req), o, (error) => ({
      error,
      ready: false,
      not_ready_reasons: [error.msg],
      config: null,
      last_config_error: null,
      supported_cni_versions: [],
      driver_version: "",
      attachments: 0,
      api_version: 0,
    }));
  }

  garbageCollect(
    req: Partial<GarbageCollectRequest>,
    o?: CallOptions,
  ): Promise<GarbageCollectResponse> {
    return this.call("GarbageCollect", withVersion(req), o, (error) => ({
      error,
      errors: [error],
      removed_attachments: 0,
    }));
  }

  close(): void {
    this.client.close();
  }

  private call<T>(
    method: string,
    req: unknown,
    o: CallOptions | undefined,
    onTransportError: (e: WireCniError) => T,
  ): Promise<T> {
    return new Promise((resolve) => {
      const deadline = new Date(Date.now() + (o?.timeoutMs ?? 120_000));
      const fn = this.client[method] as GrpcUnary;
      fn.call(this.client, req, new grpc.Metadata(), { deadline }, (err, res) => {
        if (err) resolve(onTransportError(transportError(err, this.socketPath)));
        else resolve(res as T);
      });
    });
  }
}

function withVersion<T extends { api_version?: number }>(req: T): T {
  return { ...req, api_version: req.api_version ?? API_VERSION };
}

export function transportError(err: grpc.ServiceError, socketPath: string): WireCniError {
  const e = transportCniError(err.code, err.details || err.message, socketPath);
  return { code: e.code, msg: e.message, details: e.details };
}
