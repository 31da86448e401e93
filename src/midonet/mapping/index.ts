/**
 * Kubernetes → MidoNet mapping: pure functions from Nodes, Pods, Services and
 * EndpointSlices to the MidoNet resources that should exist (docs/midonet.md).
 */

export * from "./cluster.js";
export * from "./config.js";
export * from "./desired-state.js";
export * from "./diff.js";
export * from "./global.js";
export * from "./k8s.js";
export * from "./model.js";
export * from "./node.js";
export * from "./pod.js";
export * from "./service.js";
