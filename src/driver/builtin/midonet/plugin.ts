/**
 * The built-in plugin `"type": "midonet"`: the pod's veth pair, addresses and routes,
 * done in-process through src/plumbing, with IPAM delegated to the `ipam` section
 * as ptp or bridge would delegate it: through `RunPlugin`, which runs host-local
 * in-process (`--host-local`, the default) or execs the named binary.
 *
 * Datapaths: "kernel" (default) puts the host end on a per-node Linux bridge that
 * holds the gateway addresses, so pods reach each other, the gateway and the host;
 * "midonet" leaves the host end up and unbridged for the MidoNet agent to bind.
 */
import { CniError, ErrorCode } from "../../../cni/errors.js";
import { HOST_VETH_PREFIX } from "../../../midonet/host-veth-name.js";
import type { PodPlumbing } from "../../../plumbing/pod-plumbing.js";
import type { BuiltinPlugin, PluginInvocation, RunPlugin } from "../../chain/plugin-runner.js";
import type { PodPolicyHook } from "../../network-policy/enforcer.js";
import { add, type MidonetContext } from "./add.js";
import { BridgeCache } from "./bridge-cache.js";
import { check } from "./check.js";
import { kernelDatapathPlugins, type MidonetPluginConfig, readMidonetConfig } from "./config.js";
import { cachedResultOf, hostNameFor, plumbingError, prevResultOf } from "./invocation.js";
import { removeOrphanHostVeths } from "./orphan-host-veths.js";

interface MidonetPluginOptions {
  /** Told when an ADD replaced the host end an older sandbox of the same pod left. */
  onStaleHostEnd?: (hostIfName: string, containerId: string) => void;
  /** What the plugin remembers of its bridges; shared with whoever removes their gateways. */
  bridges?: BridgeCache;
  /** The kernel, through the implementation the daemon chose at start; a fake in unit tests. */
  plumbing: PodPlumbing;
  /** The MTU for networks that set none, when the cluster network has one (VXLAN). */
  podMtu?: () => number | undefined;
  /** NetworkPolicy on the kernel datapath (network-policy/enforcer.ts). */
  podPolicy?: PodPolicyHook;
  /** Whether a new bridge port gets hairpin mode (services/bridge-steering.ts); default yes. */
  hairpin?: (bridge: string) => boolean;
}

export function createMidonetPlugin(opts: MidonetPluginOptions): BuiltinPlugin {
  const { plumbing } = opts;
  const bridges = opts.bridges ?? new BridgeCache(plumbing);
  const context = (delegate: RunPlugin): MidonetContext => ({
    delegate,
    plumbing,
    bridges,
    onStaleHostEnd: opts.onStaleHostEnd,
    podMtu: opts.podMtu,
    podPolicy: opts.podPolicy,
    hairpin: opts.hairpin,
  });
  return {
    validate(conf) {
      readMidonetConfig(conf);
    },
    async run(inv, delegate) {
      const conf = readMidonetConfig(inv.config);
      switch (inv.command) {
        case "ADD":
          return add(inv, conf, context(delegate));
        case "DEL":
          await del(inv, conf, context(delegate));
          return undefined;
        case "CHECK":
          await check(inv, conf, context(delegate));
          return undefined;
        case "STATUS":
        case "GC":
          await statusOrGc(inv, conf, delegate);
          return undefined;
        default:
          throw new CniError(
            ErrorCode.InvalidEnvironment,
            `midonet plugin: unsupported command ${inv.command}`,
          );
      }
    },
    async recover(view) {
      const bridgesInUse = new Set(kernelDatapathPlugins(view.networks).map((c) => c.bridge));
      await removeOrphanHostVeths(view, bridgesInUse, plumbing);
    },
  };
}

/**
 * Whether the IPAM plugin speaks the network's CNI version, by its VERSION
 * answer (as libcni asks a plugin's versions). Debian's host-local 1.1.1
 * predates CNI 1.1: it refuses a 1.1.0 network's ADD ("incompatible CNI
 * versions") and fails STATUS and GC with "missing containerID".
 */
async function ipamSpeaks(
  type: string,
  inv: PluginInvocation,
  delegate: RunPlugin,
): Promise<{ ok: boolean; supported: string[] }> {
  const answer = (await delegate({
    type,
    command: "VERSION",
    config: { cniVersion: inv.config.cniVersion },
  })) as { supportedVersions?: unknown } | undefined;
  const supported = Array.isArray(answer?.supportedVersions)
    ? answer.supportedVersions.filter((v): v is string => typeof v === "string")
    : [];
  return { ok: supported.includes(String(inv.config.cniVersion)), supported };
}

/**
 * STATUS and GC: nothing of our own to report or collect; the IPAM plugin gets
 * the verb when it speaks the network's version. When it does not, STATUS says
 * so (code 50: no ADD can work), rather than passing on the old plugin's
 * confusion, and GC leaves it out (the stale attachments' full DELs already ran).
 * An IPAM plugin that cannot run at all fails either, through VERSION.
 */
async function statusOrGc(
  inv: PluginInvocation,
  conf: MidonetPluginConfig,
  delegate: RunPlugin,
): Promise<void> {
  const type = conf.ipam.type;
  const { ok, supported } = await ipamSpeaks(type, inv, delegate);
  if (ok) {
    await delegate({ ...inv, type });
  } else if (inv.command === "STATUS") {
    throw new CniError(
      ErrorCode.PluginNotAvailable,
      `IPAM plugin ${type} speaks CNI ${supported.join(", ") || "(no version)"}, not this network's ${String(inv.config.cniVersion)}: no ADD can work`,
      type === "host-local" ? "host-local in-process (--host-local in-process) speaks 1.1.0" : "",
    );
  }
}

async function del(
  inv: PluginInvocation,
  conf: MidonetPluginConfig,
  ctx: MidonetContext,
): Promise<void> {
  const ifName = inv.ifName ?? "";
  // Below 0.4.0 there is no prevResult: the cached result tells the host end's MAC all the same.
  const prev = prevResultOf(inv) ?? cachedResultOf(inv);
  // The host end as ADD named it (prevResult lists it without a sandbox); the name
  // is derived again only without one, since a DEL may carry other CNI_ARGS than ADD.
  const cachedHost = prev?.interfaces?.find(
    (i) => !i.sandbox && i.name.startsWith(HOST_VETH_PREFIX),
  );
  const hostIfName = cachedHost?.name ?? hostNameFor(inv);
  const hostMac = cachedHost?.mac;
  // Both are idempotent and independent, so they overlap; IPAM's error wins, and
  // the runtime's retry of DEL finds the link already gone.
  const [ipam, link] = await Promise.allSettled([
    ctx.delegate({ ...inv, type: conf.ipam.type }),
    ctx.plumbing.deletePodInterface({ netns: inv.netns, ifName, hostIfName, hostMac }),
  ]);
  // A DEL never fails on the policy's account: a sync that failed is retried by the enforcer.
  if (conf.datapath === "kernel") await ctx.podPolicy?.detach(hostIfName).catch(() => undefined);
  if (ipam.status === "rejected") throw ipam.reason;
  if (link.status === "rejected")
    throw plumbingError(link.reason, `removing ${ifName} of ${inv.containerId}`);
}
