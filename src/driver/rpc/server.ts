/**
 * gRPC over the node's unix socket. The socket is 0600, in a directory made 0700
 * when it is the socket's own: created here, or holding nothing but the socket
 * and not sticky (the DaemonSet's hostPath, which kubelet creates 0755). A
 * shared one (/run, a sticky /tmp) keeps its mode. A stale socket file (a dial
 * refused: nobody listens) is replaced;
 * one that a process holds (the dial connects, or is not refused: a live driver,
 * perhaps wedged with its backlog full) is left alone and we refuse to start.
 *
 * The listener is ours, so that connections have limits (connection-gate.ts);
 * the calls are served by grpc-unary-server.ts, which closes a connection with
 * no call in flight for `idleTimeoutMs` (a GOAWAY; clients reconnect on their
 * next call).
 */
import { chmod, lstat, mkdir, readdir, unlink } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { basename, dirname } from "node:path";
import type pino from "pino";
import { dialUnixSocket } from "../../common/health.js";
import { loadServiceCodecs } from "../../wire/codec.js";
import { MAX_GRPC_MESSAGE_BYTES } from "../../wire/message-size.js";
import {
  ConnectionGate,
  type ConnectionLimits,
  DEFAULT_CONNECTION_LIMITS,
} from "./connection-gate.js";
import { UnaryGrpcServer } from "./grpc-unary-server.js";
import { idleCollector } from "./idle-gc.js";
import type { DriverService } from "./service.js";

export interface GrpcServerHandle {
  socketPath: string;
  /** Stops accepting calls; in-flight calls finish (bounded by the caller's drain). */
  close(): Promise<void>;
  /** Connections open now. */
  openConnections(): number;
  forceClose(): void;
}

// Exported for its tests only (integration/driver-socket.test.ts).
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

interface GrpcServerOptions {
  logger: pino.Logger;
  limits?: ConnectionLimits;
  /** A garbage collection once this long passes without a call ending (idle-gc.ts); 0: never. */
  idleGcMs?: number;
}

const DEFAULT_IDLE_GC_MS = 2_000;

export async function startGrpcServer(
  socketPath: string,
  service: DriverService,
  opts: GrpcServerOptions,
): Promise<GrpcServerHandle> {
  const limits = opts.limits ?? DEFAULT_CONNECTION_LIMITS;
  await prepareSocketPath(socketPath);
  const idleGcMs = opts.idleGcMs ?? DEFAULT_IDLE_GC_MS;
  const idle = idleGcMs > 0 ? idleCollector(idleGcMs) : undefined;
  // The start-up (config, recovery) is a burst too.
  idle?.activity();
  const server = unaryServerFor(service, limits, () => idle?.activity());
  const gate = new ConnectionGate(limits, opts.logger, (socket) => server.inject(socket));
  const listener = createServer((socket) => gate.admit(socket));
  await listenOwnerOnly(listener, socketPath);
  return {
    socketPath,
    openConnections: () => gate.open.size,
    close: () => {
      idle?.stop();
      listener.close();
      return server.close();
    },
    forceClose: () => {
      idle?.stop();
      listener.close();
      server.forceClose();
      for (const socket of gate.open) socket.destroy();
    },
  };
}

/** The service's five methods on the socket's gRPC server; `callEnded` after each answer. */
function unaryServerFor(
  service: DriverService,
  limits: ConnectionLimits,
  callEnded: () => void,
): UnaryGrpcServer {
  return new UnaryGrpcServer(
    loadServiceCodecs(),
    {
      SetUpPod: (r) => service.setUpPod(r as never),
      TearDownPod: (r) => service.tearDownPod(r as never),
      CheckPod: (r) => service.checkPod(r as never),
      CniStatus: (r) => service.cniStatus(r as never),
      GarbageCollect: (r) => service.garbageCollect(r as never),
    },
    {
      // Above every field's own limit (src/cni/limits.ts), so an oversized field is
      // answered with CNI's code 4 rather than refused by gRPC.
      maxMessageBytes: MAX_GRPC_MESSAGE_BYTES,
      idleTimeoutMs: limits.idleTimeoutMs,
      onCallEnded: callEnded,
    },
  );
}

/** umask makes the socket 0600 from its birth: no window where others may connect. */
async function listenOwnerOnly(listener: Server, socketPath: string): Promise<void> {
  const oldMask = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) => {
      listener.once("error", reject);
      listener.listen(socketPath, () => {
        listener.off("error", reject);
        resolve();
      });
    });
  } finally {
    process.umask(oldMask);
  }
  await chmod(socketPath, 0o600);
}
