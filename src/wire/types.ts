/**
 * The messages of proto/cni_driver.proto as TypeScript types, in the shape both
 * the driver's codec (codec.ts) and its TypeScript client (@grpc/proto-loader)
 * produce with PROTO_LOADER_OPTIONS: snake_case names, 64-bit numbers as
 * numbers, absent messages as null/undefined, absent proto3 `optional` scalars
 * left out.
 */

/** The API version this build speaks (ApiVersion.API_VERSION_V1). */
export const API_VERSION = 1;

/** The `details` of the driver's "not ready" answer (code 11, `not_ready` set), for people. */
export const NOT_READY_DETAILS = "cni-driver not ready";

export interface WireCniError {
  code: number;
  msg: string;
  details: string;
  /** The driver refused the call because it is not ready (the proto says what follows). */
  not_ready?: boolean;
}

export interface KeyValue {
  key: string;
  value: string;
}

export interface PodIdentity {
  namespace: string;
  name: string;
  uid: string;
}

export interface PortMapping {
  host_port: number;
  container_port: number;
  protocol: string;
  host_ip: string;
}

export interface Bandwidth {
  ingress_rate: number;
  ingress_burst: number;
  egress_rate: number;
  egress_burst: number;
}

export interface IPRange {
  subnet: string;
  range_start: string;
  range_end: string;
  gateway: string;
}

export interface Capabilities {
  port_mappings: PortMapping[];
  bandwidth: Bandwidth | null;
  ip_ranges: Array<{ ranges: IPRange[] }>;
  ips: string[];
  mac: string;
  dns: { servers: string[]; searches: string[]; options: string[] } | null;
  aliases: Record<string, { names: string[] }>;
  cgroup_path: string;
  pod_annotations: Record<string, string>;
  extra_json: string;
}

export interface PodRequest {
  api_version: number;
  pod: PodIdentity | null;
  container_id: string;
  netns: string;
  ifname: string;
  network: string;
  cni_version: string;
  cni_args: KeyValue[];
  capabilities: Capabilities | null;
  stdin_config: Uint8Array;
}

export interface WireInterface {
  name: string;
  mac: string;
  sandbox: string;
  mtu?: number;
  socket_path: string;
  pci_id: string;
}

export interface WireIPConfig {
  address: string;
  gateway: string;
  interface?: number;
}

export interface WireRoute {
  dst: string;
  gw: string;
  mtu?: number;
  advmss?: number;
  priority?: number;
  table?: number;
  scope?: number;
}

export interface WireDNS {
  nameservers: string[];
  domain: string;
  search: string[];
  options: string[];
}

export interface WireResult {
  interfaces: WireInterface[];
  ips: WireIPConfig[];
  routes: WireRoute[];
  dns: WireDNS | null;
}

export interface PodResponse {
  error: WireCniError | null;
  cni_version: string;
  result_json: string;
  result: WireResult | null;
}

export interface ErrorOnlyResponse {
  error: WireCniError | null;
}

export interface CniStatusRequest {
  api_version: number;
  network: string;
  cni_version: string;
}

export interface ActiveConfig {
  networks: string[];
  default_network: string;
  source: string;
  content_hash: string;
  generation: number;
  loaded_at_unix_ms: number;
}

export interface WireConfigError {
  message: string;
  at_unix_ms: number;
  source: string;
}

export interface CniStatusResponse {
  error: WireCniError | null;
  ready: boolean;
  not_ready_reasons: string[];
  config: ActiveConfig | null;
  last_config_error: WireConfigError | null;
  supported_cni_versions: string[];
  driver_version: string;
  attachments: number;
  api_version: number;
}

export interface Attachment {
  container_id: string;
  ifname: string;
}

export interface NetworkAttachments {
  network: string;
  valid_attachments: Attachment[];
}

export interface GarbageCollectRequest {
  api_version: number;
  networks: NetworkAttachments[];
  cni_version: string;
}

export interface GarbageCollectResponse {
  error: WireCniError | null;
  errors: WireCniError[];
  removed_attachments: number;
}
