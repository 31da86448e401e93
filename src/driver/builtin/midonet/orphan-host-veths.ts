/**
 * The midonet plugin's part of start-up recovery: host veths (`mido…`) on
 * the kernel datapath's bridges that no cached result lists are removed. An
 * ADD killed half-way leaves one, and no cache entry.
 */
import { HOST_VETH_PREFIX } from "../../../midonet/host-veth-name.js";
import type { PodPlumbing } from "../../../plumbing/pod-plumbing.js";
import type { RecoveryView } from "../../chain/plugin-runner.js";

export async function removeOrphanHostVeths(
  view: RecoveryView,
  kernelBridges: ReadonlySet<string>,
  plumbing: Pick<PodPlumbing, "listBridgePorts" | "deleteHostLink">,
): Promise<void> {
  const known = new Set<string>();
  for (const e of view.attachments) {
    const ifaces = (e.result?.interfaces ?? []) as Array<{ name?: string }>;
    for (const i of ifaces) if (i.name) known.add(i.name);
  }
  for (const bridge of kernelBridges) {
    for (const port of await plumbing.listBridgePorts(bridge).catch(() => [])) {
      if (!port.startsWith(HOST_VETH_PREFIX) || known.has(port)) continue;
      await plumbing.deleteHostLink(port).catch(() => {});
      view.logger.warn({ bridge, link: port }, "removed a host veth no attachment holds");
    }
  }
}
