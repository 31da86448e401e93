/**
 * MidoNet's media types, as midonet-cluster's MidonetMediaTypes.scala and
 * python-midonetclient's vendor_media_type.py name them (the versions a
 * resource takes listed), written out literally instead of imported from
 * src/midonet/resources.ts: the simulator is the oracle the client is checked
 * against, and sharing the strings would hide a mistake in them.
 */

const mt = (name: string, v: number) => `application/vnd.org.midonet.${name}-v${v}+json`;
const cmt = (name: string, v: number) =>
  `application/vnd.org.midonet.collection.${name}-v${v}+json`;

export const MT = {
  application: [mt("Application", 5)],
  token: [mt("Token", 1)],
  error: mt("Error", 1),
  tunnelZone: [mt("TunnelZone", 1)],
  tunnelZones: [cmt("TunnelZone", 1)],
  tunnelZoneHost: [mt("TunnelZoneHost", 1)],
  tunnelZoneHosts: [cmt("TunnelZoneHost", 1)],
  router: [mt("Router", 3)],
  routers: [cmt("Router", 3)],
  bridge: [mt("Bridge", 4), mt("Bridge", 5)],
  bridges: [cmt("Bridge", 4), cmt("Bridge", 5)],
  port: [mt("Port", 3), mt("Port", 4)],
  ports: [cmt("Port", 3), cmt("Port", 4)],
  portLink: [mt("PortLink", 1)],
  route: [mt("Route", 1)],
  routes: [cmt("Route", 1)],
  chain: [mt("Chain", 1)],
  chains: [cmt("Chain", 1)],
  rule: [mt("Rule", 2)],
  rules: [cmt("Rule", 2)],
  host: [mt("Host", 3)],
  hosts: [cmt("Host", 3)],
  hostInterfacePort: [mt("HostInterfacePort", 1)],
  hostInterfacePorts: [cmt("HostInterfacePort", 1)],
  macPort: [mt("MacPort", 2)],
  macPorts: [cmt("MacPort", 2)],
  ip4Mac: [mt("IP4Mac", 1)],
  ip4Macs: [cmt("IP4Mac", 1)],
};

/** The media types of a Content-Type or Accept header, lower-cased, parameters dropped. */
export function mediaList(header: string | undefined): string[] {
  if (!header) return [];
  return header
    .split(",")
    .map((s) => (s.split(";")[0] ?? "").trim().toLowerCase())
    .filter((s) => s.length > 0);
}

/** The produced type the Accept header selects (matched case-insensitively), or undefined. */
export function negotiate(accept: string | undefined, produces: string[]): string | undefined {
  const wanted = mediaList(accept);
  if (wanted.length === 0) return produces[0];
  for (const w of wanted) {
    if (w === "*/*") return produces[0];
    const hit = w.endsWith("/*")
      ? produces.find((p) => p.toLowerCase().startsWith(w.slice(0, -1)))
      : produces.find((p) => p.toLowerCase() === w);
    if (hit) return hit;
  }
  return undefined;
}
