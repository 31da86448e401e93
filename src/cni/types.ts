/**
 * CNI results as data, one shape per version family (cni-spec §3).
 * Field names and optionality follow the JSON that Go's types emit.
 */

// ---- 1.0.0 / 1.1.0 -----------------------------------------------------------

export interface Interface {
  name: string;
  mac?: string;
  /** The netns path of a container interface; absent or empty for a host interface. */
  sandbox?: string;
  mtu?: number;
  socketPath?: string;
  pciID?: string;
}

export interface IPConfig {
  /** CIDR keeping the host bits, e.g. "10.1.0.5/24". */
  address: string;
  gateway?: string;
  /** Index into `interfaces`. */
  interface?: number;
}

export interface Route {
  dst: string;
  gw?: string;
  mtu?: number;
  advmss?: number;
  priority?: number;
  table?: number;
  scope?: number;
}

export interface DNS {
  nameservers?: string[];
  domain?: string;
  search?: string[];
  options?: string[];
}

export interface Result100 {
  cniVersion: string;
  interfaces?: Interface[];
  ips?: IPConfig[];
  routes?: Route[];
  dns?: DNS;
}

// ---- 0.3.0 / 0.3.1 / 0.4.0 ----------------------------------------------------

export interface Interface040 {
  name: string;
  mac?: string;
  sandbox?: string;
}

export interface IPConfig040 {
  version: "4" | "6";
  address: string;
  gateway?: string;
  interface?: number;
}

export interface Result040 {
  cniVersion: string;
  interfaces?: Interface040[];
  ips?: IPConfig040[];
  routes?: Route[];
  dns: DNS;
}

// ---- 0.1.0 / 0.2.0 -------------------------------------------------------------

export interface Route020 {
  dst: string;
  gw?: string;
}

export interface IPConfig020 {
  ip: string;
  gateway?: string;
  routes?: Route020[];
}

export interface Result020 {
  cniVersion: string;
  ip4?: IPConfig020;
  ip6?: IPConfig020;
  dns?: DNS;
}

export type AnyResult = Result100 | Result040 | Result020;
