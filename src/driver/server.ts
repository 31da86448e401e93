/**
 * gRPC over the node's unix socket. The socket is 0600, in a directory made 0700
 * when it is the socket's own: created here, or holding nothing but the socket
 * and not sticky (the DaemonSet's hostPath, which kubelet creates 0755). A
 * shared one (/run, a sticky /tmp) keeps its mode. A stale socket file (a dial
 * refused: nobody listens) is replaced;
 * one that a process holds (the dial connects, or is not refused: a live driver,
 * perhaps wedged with its backlog full) is left alone and we refuse to start.
 */
import { chmod, lstat, mkdir, readdir, unlink } from "node:fs/promises";
import { basename, dirname } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { dialUnixSocket } from "../common/health.js";
import { PROTO_LOADER_OPTIONS, protoPath } from "../wire/proto-path.js";
import type { DriverService } from "./service.js";

export interface GrpcServerHandle {
  socketPath: string;
  /** Stops accepting calls; in-flight calls finish (bounded by the caller's drain). */
  close(): Promise<void>;
  forceClose(): void;
}

export function loadServiceDefinition(): grpc.ServiceDefinition {
  const def = protoLoader.loadSync(protoPath(), PROTO_LOADER_OPTIONS);
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    cnidriver: { v1: { CNIDriver: grpc.ServiceClientConstructor } };
  };
  return pkg.cnidriver.v1.CNIDriver.service;
}

export async function prepareSocketPath(socketPath: string): Promise<void> {
  const dir = dirname(socketPath);
  const existing = await lstat(dir).catch(() => undefined);
  if (!existing) await mkdir(dir, { recursive: true, mode: 0o700 });
  const entries = existing ? await readdir(dir) : [];
  const ownDir = entries.every((e) => e === basename(socketPath));
  if (!existing || (ownDir && !(existing.mode & 0o1000))) await chmod(dir, 0o700);
  let exists = false;
  try {
    const st = await lstat(socketPath);
    exists = true;
    if (!st.isSocket())
      throw new Error(`${socketPath} exists and is not a socket; refusing to replace it`);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  if (!exists) return;
  const dial = await dialUnixSocket(socketPath, 1000);
  if (dial.ok) {
    throw new Error(`another process is already serving on ${socketPath}; refusing to start`);
  }
  if (dial.errno !== "ECONNREFUSED" && dial.errno !== "ENOENT") {
    throw new Error(
      `a process holds ${socketPath} but did not take a connection (${dial.reason}); refusing to replace it`,
    );
  }
  await unlink(socketPath).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== "ENOENT") throw err;
  });
}

export async function startGrpcServer(
  socketPath: string,
  service: DriverService,
): Promise<GrpcServerHandle> {
  await prepareSocketPath(socketPath);
  const server = new grpc.Server({ "grpc.max_receive_message_length": 4 * 1024 * 1024 });
  const unary =
    <Req, Res>(fn: (req: Req) => Promise<Res>): grpc.handleUnaryCall<Req, Res> =>
    (call, callback) => {
      fn(call.request).then(
        (res) => callback(null, res),
        (err: unknown) => callback({ code: grpc.status.INTERNAL, details: String(err) }),
      );
    };
  server.addService(loadServiceDefinition(), {
    SetUpPod: unary((r) => service.setUpPod(r as never)),
    TearDownPod: unary((r) => service.tearDownPod(r as never)),
    CheckPod: unary((r) => service.checkPod(r as never)),
    CniStatus: unary((r) => service.cniStatus(r as never)),
    GarbageCollect: unary((r) => service.garbageCollect(r as never)),
  });
  // umask makes the socket 0600 from its birth: no window where others may connect.
  const oldMask = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(`unix:${socketPath}`, grpc.ServerCredentials.createInsecure(), (err) =>
        err ? reject(err) : resolve(),
      ),
    );
  } finally {
    process.umask(oldMask);
  }
  await chmod(socketPath, 0o600);
  return {
    socketPath,
    close: () =>
      new Promise<void>((resolve) => {
        server.tryShutdown(() => resolve());
      }),
    forceClose: () => server.forceShutdown(),
  };
}
