/**
 * What a pod attachment needs of the kernel, as one object: the seam through
 * which the built-in plugin takes its plumbing, so that its logic is tested
 * with a fake as libcni tests through its invoke.Exec seam. The kernel one
 * goes through the backend this process chose (backend.ts).
 */
import { ensureBridge, listBridgePorts } from "./bridge.js";
import {
  configureContainerSide,
  createVethPairReplacingStale,
  deleteHostLink,
  deletePodInterface,
  inspectPodInterface,
} from "./pod-interface.js";

export interface PodPlumbing {
  ensureBridge: typeof ensureBridge;
  listBridgePorts: typeof listBridgePorts;
  createVethPairReplacingStale: typeof createVethPairReplacingStale;
  configureContainerSide: typeof configureContainerSide;
  deletePodInterface: typeof deletePodInterface;
  deleteHostLink: typeof deleteHostLink;
  inspectPodInterface: typeof inspectPodInterface;
}

export const kernelPlumbing: PodPlumbing = {
  ensureBridge,
  listBridgePorts,
  createVethPairReplacingStale,
  configureContainerSide,
  deletePodInterface,
  deleteHostLink,
  inspectPodInterface,
};
