/**
 * The netlink worker thread: it owns the native addon and the sockets, and runs
 * the operations of ops.ts one at a time. rtnetlink requests are processed inside
 * sendmsg and entering a netns changes the calling thread: neither belongs on
 * the main thread. Link deletions, which wait tens of milliseconds in the kernel,
 * run on native threads of their own and answer when done.
 */
import { readdirSync } from "node:fs";
import { parentPort } from "node:worker_threads";
import { loadNativeAddon } from "../../common/native-addon.js";
import { NetlinkOps } from "./ops.js";
import {
  type NetlinkOpName,
  serializeError,
  type WorkerHello,
  type WorkerReply,
  type WorkerRequest,
} from "./protocol.js";
import { readExchange } from "./rtnetlink-decode.js";
import { encodeGetLink } from "./rtnetlink-encode.js";
import { type NetlinkAddon, NetlinkSession } from "./session.js";

const ADDON = {
  file: "build/Release/cni_driver_netlink.node",
  envVar: "CNI_DRIVER_NETLINK_ADDON",
} as const;
/** How often idle pod netns sockets, and those whose netns path is gone, are closed. */
const SWEEP_INTERVAL_MS = 10_000;

function load(): { session: NetlinkSession; path: string } | { reason: string } {
  const loaded = loadNativeAddon<NetlinkAddon>(ADDON);
  if ("reason" in loaded) return loaded;
  const { addon, path } = loaded;
  const session = new NetlinkSession(addon);
  // One real exchange, so a kernel or sandbox without rtnetlink is found now.
  try {
    const answer = session.request(undefined, encodeGetLink(1, { name: "lo" }));
    const out = readExchange(answer, 1);
    if (out.error) throw new Error(`RTM_GETLINK lo: errno ${out.error.errno}`);
  } catch (err) {
    session.close();
    return { reason: `${path} loaded, but rtnetlink does not answer: ${(err as Error).message}` };
  }
  return { session, path };
}

function transferable(b: Uint8Array): Uint8Array {
  if (b.byteOffset === 0 && b.byteLength === b.buffer.byteLength) return b;
  return new Uint8Array(b);
}

function main(): void {
  const port = parentPort;
  if (!port) throw new Error("netlink worker: not started as a worker thread");
  const loaded = load();
  if ("reason" in loaded) {
    port.postMessage({ hello: true, ready: false, reason: loaded.reason } satisfies WorkerHello);
    return;
  }
  const { session } = loaded;
  const ops = new NetlinkOps(session);
  setInterval(() => session.sweep(), SWEEP_INTERVAL_MS).unref();

  const handlers: Record<NetlinkOpName, (...args: never[]) => unknown> = {
    createVethPair: (spec, host) => ops.createVethPair(spec, host),
    configureContainerSide: (spec) => ops.configureContainerSide(spec),
    deletePodInterface: (ref) => ops.deletePodInterface(ref),
    deleteHostLink: (name) => ops.deleteHostLink(name),
    showLink: (name, netns) => ops.showLink(name, netns),
    inspectPodInterface: (netns, ifName, v6) => ops.inspectPodInterface(netns, ifName, v6),
    ensureBridge: (name, cidrs, mtu, netfilter) => ops.ensureBridge(name, cidrs, mtu, netfilter),
    listBridgePorts: (name) => ops.listBridgePorts(name),
    request: (netns: string | null, msg: Uint8Array) =>
      session.request(netns ?? undefined, Buffer.from(msg.buffer, msg.byteOffset, msg.length)),
    stats: () => ({
      ...session.stats(),
      // Process-wide (threads share the table), minus the fd readdir itself holds.
      processFds: readdirSync("/proc/self/fd").length - 1,
    }),
    sweep: () => session.sweep(),
    close: () => {
      session.close();
      // Nothing else holds the thread (the sweep timer is unref'd): it ends once the reply is out.
      setImmediate(() => port.close());
    },
  };

  const reply = (id: number, value: unknown) => {
    const transfer: ArrayBuffer[] = [];
    if (value instanceof Uint8Array) {
      value = transferable(value);
      transfer.push((value as Uint8Array).buffer as ArrayBuffer);
    }
    port.postMessage({ id, ok: true, value } satisfies WorkerReply, transfer);
  };
  const fail = (id: number, err: unknown) =>
    port.postMessage({ id, ok: false, error: serializeError(err) } satisfies WorkerReply);

  port.on("message", (req: WorkerRequest) => {
    try {
      const handler = handlers[req.op] as ((...args: unknown[]) => unknown) | undefined;
      if (!handler) throw new Error(`netlink worker: unknown operation ${req.op}`);
      const value = handler(...req.args);
      // Deletions answer later (their exchange runs on a native thread); the rest at once.
      if (value instanceof Promise)
        value.then(
          (v) => reply(req.id, v),
          (err) => fail(req.id, err),
        );
      else reply(req.id, value);
    } catch (err) {
      fail(req.id, err);
    }
  });
  port.postMessage({ hello: true, ready: true, addon: loaded.path } satisfies WorkerHello);
}

main();
