/**
 * PodPlumbing through iproute2: `ip -batch` execs (pod-interface.ts, bridge.ts),
 * the fallback where the rtnetlink addon cannot be used. Stateless: every call
 * is its own exec.
 */
import { ensureBridge, listBridgePorts } from "./bridge.js";
import {
  configureContainerSide,
  createVethPair,
  deleteHostLink,
  deletePodInterface,
  inspectPodInterface,
  showLink,
} from "./pod-interface.js";
import { type PodPlumbing, replacingStaleHostEnd } from "./pod-plumbing.js";

export const iproute2Plumbing: PodPlumbing = Object.freeze({
  ensureBridge,
  listBridgePorts,
  createVethPair,
  createVethPairReplacingStale: (spec, host) => replacingStaleHostEnd(iproute2Plumbing, spec, host),
  configureContainerSide,
  deletePodInterface,
  deleteHostLink,
  showLink,
  inspectPodInterface,
} satisfies PodPlumbing);
