/**
 * The pod plumbing operations as rtnetlink exchanges, with the semantics of the
 * iproute2 path (src/plumbing/pod-interface.ts, bridge.ts): same steps, same
 * idempotence, errors that name the failed step in `ip` syntax. They run on
 * the netlink worker thread, one after another, synchronously; only link
 * deletions, which the kernel answers slowly, go to a native thread each, so
 * that other pods' requests are not held up behind them.
 */

import { bridgeMac, hostMacStillMatches } from "../mac.js";
import { netnsExists } from "../netns.js";
import type {
  AddrInfo,
  ContainerSideSpec,
  HostAttachment,
  LinkInfo,
  PodInterfaceRef,
  PodInterfaceState,
  PodRoute,
  RouteInfo,
  VethSpec,
} from "../pod-interface-types.js";
import { NetlinkError } from "./error.js";
import { IFF_UP, RT_TABLE_MAIN, RTM_F_CLONED } from "./rtnetlink-constants.js";
import {
  decodeAddr,
  decodeLink,
  decodeRoute,
  type LinkMessage,
  linkFlagNames,
  type NlMessage,
  operstateName,
  readExchange,
  routeDstText,
} from "./rtnetlink-decode.js";
import {
  encodeBridgeNfCall,
  encodeBridgePortHairpin,
  encodeDelLink,
  encodeDumpAddrs,
  encodeDumpLinks,
  encodeDumpRoutes,
  encodeGetLink,
  encodeNewAddr,
  encodeNewBridge,
  encodeNewRoute,
  encodeNewVeth,
  encodeSetLink,
  type LinkSelector,
} from "./rtnetlink-encode.js";

/** What the operations need from the worker: exchanges per netns, and netns fds. */
export interface NetlinkTransport {
  /** One request/answer in the host (undefined) or in the netns at that path. */
  request(netns: string | undefined, msg: Buffer): Buffer;
  /**
   * The same, without blocking the calling thread: for the kernel's slow requests
   * (deletions). `onSent`: the request is on its way (it may wait for a slot first).
   */
  requestDetached(netns: string | undefined, msg: Buffer, onSent?: () => void): Promise<Buffer>;
  withNetnsFd<T>(path: string, use: (fd: number) => T): T;
  /** The pod's interface is gone: its netns socket need not stay open. */
  forget(netns: string): void;
}

/** How many times a dump that raced with a change (NLM_F_DUMP_INTR) is taken again. */
const DUMP_ATTEMPTS = 3;
/** Looks (1 ms apart, backing off to 8) for a link being deleted to be gone before its request returns. */
const UNLIST_POLLS = 30;

export class NetlinkOps {
  private seq = Math.floor(Math.random() * 0x7fffffff);

  constructor(private readonly t: NetlinkTransport) {}

  // -------------------------------------------------------------------------
  // Exchanges

  /**
   * Sends one request and returns the answer's messages; a refusal becomes a
   * NetlinkError naming `command` and the netns, as does a failure to reach the
   * netns (the addon's errno errors: ENOENT for a vanished path, EPERM, …).
   */
  private exchange(
    netns: string | undefined,
    command: string,
    encode: (seq: number) => Buffer,
  ): NlMessage[] {
    for (let attempt = 1; ; attempt++) {
      const seq = this.nextSeq();
      let answer: Buffer;
      try {
        answer = this.t.request(netns, encode(seq));
      } catch (err) {
        throw systemError(err, command, netns);
      }
      const out = readExchange(answer, seq);
      if (out.error)
        throw NetlinkError.fromErrno(command, netns, out.error.errno, out.error.extack);
      if (!out.interrupted || attempt >= DUMP_ATTEMPTS) return out.messages;
    }
  }

  /** exchange() for a request the kernel is slow to answer: see NetlinkTransport.requestDetached. */
  private async exchangeDetached(
    netns: string | undefined,
    command: string,
    encode: (seq: number) => Buffer,
    onSent?: () => void,
  ): Promise<NlMessage[]> {
    const seq = this.nextSeq();
    let answer: Buffer;
    try {
      answer = await this.t.requestDetached(netns, encode(seq), onSent);
    } catch (err) {
      throw systemError(err, command, netns);
    }
    const out = readExchange(answer, seq);
    if (out.error) throw NetlinkError.fromErrno(command, netns, out.error.errno, out.error.extack);
    return out.messages;
  }

  private nextSeq(): number {
    this.seq = (this.seq + 1) >>> 0 || 1;
    return this.seq;
  }

  private getLink(netns: string | undefined, name: string, command: string): LinkMessage {
    const [msg] = this.exchange(netns, command, (s) => encodeGetLink(s, { name }));
    if (!msg) throw NetlinkError.fromErrno(command, netns, 19 /* ENODEV */);
    return decodeLink(msg);
  }

  private findLink(netns: string | undefined, sel: LinkSelector): LinkMessage | undefined {
    const what = sel.name ?? `index ${sel.index}`;
    try {
      const [msg] = this.exchange(netns, `link show dev ${what}`, (s) => encodeGetLink(s, sel));
      return msg ? decodeLink(msg) : undefined;
    } catch (err) {
      if (err instanceof NetlinkError && err.notFound) return undefined;
      throw err;
    }
  }

  // -------------------------------------------------------------------------
  // Operations (one per exported function of pod-interface.ts and bridge.ts)

  /**
   * Phase 1 in one request from the host: the host end up (and on the bridge:
   * IFLA_MASTER is applied at creation, and a failure there unregisters the new
   * pair), the peer created straight into the pod's netns by IFLA_NET_NS_FD,
   * which works for any nsfs path. Atomic: on failure nothing is left.
   */
  createVethPair(spec: VethSpec, host: HostAttachment): void {
    const master = host.bridge ? ` master ${host.bridge}` : "";
    const command = `link add ${spec.hostIfName} mtu ${spec.mtu} address ${spec.hostMac}${master} up type veth peer name ${spec.ifName} mtu ${spec.mtu} address ${spec.containerMac} netns ${spec.netns}`;
    const masterIndex = host.bridge
      ? this.getLink(undefined, host.bridge, command).index
      : undefined;
    // The container end and the pod's lo come up now, while IPAM is still
    // running, so phase 2 (after IPAM) only adds addresses and routes. An
    // interface up without an address carries nothing: the pod's processes
    // start later.
    const create = (netnsFd: number) =>
      this.exchange(undefined, command, (s) =>
        encodeNewVeth(s, {
          name: spec.hostIfName,
          mtu: spec.mtu,
          address: spec.hostMac,
          ...(masterIndex !== undefined ? { master: masterIndex } : {}),
          up: true,
          peer: { name: spec.ifName, mtu: spec.mtu, address: spec.containerMac, netnsFd },
        }),
      );
    try {
      this.t.withNetnsFd(spec.netns, create);
    } catch (err) {
      throw systemError(err, command, undefined);
    }
    try {
      if (host.bridge && host.hairpin !== false)
        this.exchange(undefined, `link set ${spec.hostIfName} type bridge_slave hairpin on`, (s) =>
          encodeBridgePortHairpin(s, { name: spec.hostIfName }, true),
        );
      this.exchange(spec.netns, `link set ${spec.ifName} up`, (s) =>
        encodeSetLink(s, { name: spec.ifName }, { up: true }),
      );
      this.exchange(spec.netns, "link set lo up", (s) =>
        encodeSetLink(s, { name: "lo" }, { up: true }),
      );
    } catch (err) {
      // Nothing left behind: the host end takes the container end with it.
      try {
        this.exchange(undefined, `link del ${spec.hostIfName}`, (s) =>
          encodeDelLink(s, { name: spec.hostIfName }),
        );
      } catch {
        // Already gone with its netns.
      }
      throw err;
    }
  }

  /**
   * Phase 2 inside the netns: addresses and routes (`ip route add`). The
   * interface is already up from phase 1; brought up here only if something
   * took it down in between (a route needs its device up).
   */
  configureContainerSide(spec: ContainerSideSpec): PodRoute[] {
    const { netns, ifName } = spec;
    const addrCmd = (cidr: string) => `addr add ${cidr} dev ${ifName}`;
    const firstCommand = spec.addresses[0]
      ? addrCmd(spec.addresses[0].cidr)
      : `link set ${ifName} up`;
    const link = this.getLink(netns, ifName, firstCommand);
    const index = link.index;
    for (const a of spec.addresses) {
      this.exchange(netns, addrCmd(a.cidr), (s) =>
        encodeNewAddr(s, { index, cidr: a.cidr, nodad: true }),
      );
    }
    if (!(link.flags & IFF_UP)) {
      this.exchange(netns, `link set ${ifName} up`, (s) =>
        encodeSetLink(s, { index }, { up: true }),
      );
    }
    const skipped: PodRoute[] = [];
    for (const r of spec.routes) {
      if (r.ifNoDefault && this.hasDefaultRoute(netns, r.dst.includes(":") ? 6 : 4)) {
        skipped.push(r);
        continue;
      }
      try {
        this.exchange(netns, `route add ${r.dst}${r.gw ? ` via ${r.gw}` : ""} dev ${ifName}`, (s) =>
          encodeNewRoute(s, { dst: r.dst, ...(r.gw ? { gateway: r.gw } : {}), oif: index }),
        );
      } catch (err) {
        // Another interface of the pod, set up at the same moment, added one first.
        if (!(r.ifNoDefault && err instanceof NetlinkError && err.exists)) throw err;
        skipped.push(r);
      }
    }
    return skipped;
  }

  /** Whether the netns's main table has a default route of the family, on any link. */
  private hasDefaultRoute(netns: string, family: 4 | 6): boolean {
    const cmd = `${family === 6 ? "-6 " : ""}route show default`;
    return this.exchange(netns, cmd, (s) => encodeDumpRoutes(s, family)).some((m) => {
      const r = decodeRoute(m);
      return !!r && r.dstLen === 0 && r.table === RT_TABLE_MAIN && !(r.flags & RTM_F_CLONED);
    });
  }

  /**
   * RTM_DELLINK, answered once the link is gone from its namespace. The kernel
   * unlists a link within a few ms of the request (nothing can see or use it
   * after that, and its name is free again), then spends 15-40 ms more in RCU
   * grace periods and reference waits before the request returns: every pod
   * teardown would wait that long for nothing. So once the request is on its
   * way the link is looked up, from every millisecond backing off (bounded);
   * gone, the call answers while the request finishes on its own thread. An error the kernel
   * answers first (the link was not there, a permission) is thrown as before.
   */
  private async deleteLink(
    netns: string | undefined,
    command: string,
    sel: LinkSelector,
  ): Promise<void> {
    let sent!: () => void;
    const onSent = new Promise<void>((resolve) => {
      sent = resolve;
    });
    let settled = false;
    const deletion = this.exchangeDetached(netns, command, (s) => encodeDelLink(s, sel), sent);
    const finished = deletion.then(
      () => {
        settled = true;
      },
      () => {
        settled = true;
      },
    );
    await Promise.race([onSent, finished]);
    for (let poll = 0; poll < UNLIST_POLLS && !settled; poll++) {
      // 1, 1, 2, 2, 4, 4, 8, 8 … ms: quick when the kernel is, few looks when rtnl is contended.
      const wait = Math.min(2 ** Math.floor(poll / 2), 8);
      await new Promise((resolve) => setTimeout(resolve, wait));
      if (settled) break;
      let present: boolean;
      try {
        present = this.findLink(netns, sel) !== undefined;
      } catch {
        break; // The netns going too, say: the request's own answer decides.
      }
      if (!present) return;
    }
    await deletion;
  }

  /** See pod-interface.ts deletePodInterface: the container end through the netns, else the host end (MAC permitting). */
  async deletePodInterface(ref: PodInterfaceRef): Promise<boolean> {
    if (ref.netns && netnsExists(ref.netns)) {
      try {
        // Looked up first: a link already gone must not pass for one deleted now.
        if (!this.findLink(ref.netns, { name: ref.ifName })) {
          throw NetlinkError.fromErrno(`link del ${ref.ifName}`, ref.netns, 19 /* ENODEV */);
        }
        await this.deleteLink(ref.netns, `link del ${ref.ifName}`, { name: ref.ifName });
        return true;
      } catch (err) {
        if (!(err instanceof NetlinkError) || !err.notFound) throw err;
      } finally {
        this.t.forget(ref.netns);
      }
    } else if (ref.netns) this.t.forget(ref.netns);
    const hostLink = this.findLink(undefined, { name: ref.hostIfName });
    if (!hostLink) return false;
    if (!hostMacStillMatches(ref.hostMac, hostLink.address)) return false;
    try {
      // By index: the link we just looked at, not one that took its name since.
      await this.deleteLink(undefined, `link del ${ref.hostIfName}`, { index: hostLink.index });
      return true;
    } catch (err) {
      if (err instanceof NetlinkError && err.notFound) return false;
      throw err;
    }
  }

  async deleteHostLink(name: string): Promise<void> {
    try {
      await this.exchangeDetached(undefined, `link del ${name}`, (s) => encodeDelLink(s, { name }));
    } catch (err) {
      if (!(err instanceof NetlinkError && err.notFound)) throw err;
    }
  }

  /** A link as `ip -j -d link show` describes it; undefined when it does not exist. */
  showLink(name: string, netns?: string): LinkInfo | undefined {
    const link = this.findLink(netns, { name });
    return link ? this.linkInfo(link, netns) : undefined;
  }

  private linkInfo(link: LinkMessage, netns: string | undefined): LinkInfo {
    const info: LinkInfo = { ifname: link.ifname ?? "", flags: linkFlagNames(link.flags) };
    if (link.address !== undefined) info.address = link.address;
    if (link.mtu !== undefined) info.mtu = link.mtu;
    if (link.operstate !== undefined) info.operstate = operstateName(link.operstate);
    if (link.kind !== undefined) info.linkinfo = { info_kind: link.kind };
    if (link.master !== undefined) {
      const master = this.findLink(netns, { index: link.master });
      if (master?.ifname) info.master = master.ifname;
    }
    return info;
  }

  /** The container end for CHECK: link, addresses, main-table routes through it. */
  inspectPodInterface(
    netns: string,
    ifName: string,
    withIpv6Routes: boolean,
  ): PodInterfaceState | undefined {
    const link = this.findLink(netns, { name: ifName });
    if (!link) return undefined;
    const addresses: AddrInfo[] = [];
    for (const m of this.exchange(netns, `addr show dev ${ifName}`, (s) => encodeDumpAddrs(s))) {
      const a = decodeAddr(m);
      if (a?.index === link.index && a.local !== undefined) {
        addresses.push({
          family: a.family === 4 ? "inet" : "inet6",
          local: a.local,
          prefixlen: a.prefixlen,
        });
      }
    }
    const routes: RouteInfo[] = [];
    for (const family of withIpv6Routes ? ([4, 6] as const) : ([4] as const)) {
      const cmd = `${family === 6 ? "-6 " : ""}route show dev ${ifName}`;
      for (const m of this.exchange(netns, cmd, (s) => encodeDumpRoutes(s, family))) {
        const r = decodeRoute(m);
        // `ip route show` lists the main table, without the IPv6 route cache.
        if (!r || r.table !== RT_TABLE_MAIN || r.oif !== link.index || r.flags & RTM_F_CLONED)
          continue;
        routes.push({ dst: routeDstText(r), ...(r.gateway ? { gateway: r.gateway } : {}) });
      }
    }
    return { link: this.linkInfo(link, netns), addresses, routes };
  }

  /** See bridge.ts ensureBridge: created when missing, gateways by `addr replace`, up. */
  ensureBridge(
    name: string,
    gatewayCidrs: readonly string[],
    mtu?: number,
    netfilter = true,
  ): void {
    const existing = this.findLink(undefined, { name });
    if (!existing) {
      try {
        const address = bridgeMac(name);
        this.exchange(
          undefined,
          `link add ${name}${mtu ? ` mtu ${mtu}` : ""} address ${address} type bridge`,
          (s) => encodeNewBridge(s, { name, address, ...(mtu ? { mtu } : {}) }),
        );
      } catch (err) {
        // Two networks ensuring the same bridge at once: the loser sees EEXIST.
        if (err instanceof NetlinkError && err.exists) {
          this.ensureBridge(name, gatewayCidrs, mtu, netfilter);
          return;
        }
        throw err;
      }
    } else if (existing.kind && existing.kind !== "bridge") {
      throw new NetlinkError({
        command: `link show ${name}`,
        netns: undefined,
        code: "EWRONGKIND",
        errno: 0,
        detail: `exists but is a ${existing.kind}, not a bridge`,
      });
    }
    const index = existing?.index ?? this.getLink(undefined, name, `link show ${name}`).index;
    const v = netfilter ? 1 : 0;
    this.exchange(
      undefined,
      `link set ${name} type bridge nf_call_iptables ${v} nf_call_ip6tables ${v}`,
      (s) => encodeBridgeNfCall(s, { index }, netfilter),
    );
    for (const cidr of gatewayCidrs) {
      this.exchange(undefined, `addr replace ${cidr} dev ${name}`, (s) =>
        encodeNewAddr(s, { index, cidr, replace: true, nodad: true }),
      );
    }
    this.exchange(undefined, `link set ${name} up`, (s) =>
      encodeSetLink(s, { index }, { up: true }),
    );
  }

  /** The names of the bridge's ports; [] when it does not exist. */
  listBridgePorts(name: string): string[] {
    const bridge = this.findLink(undefined, { name });
    if (!bridge) return [];
    const names: string[] = [];
    for (const m of this.exchange(undefined, `link show master ${name}`, (s) =>
      encodeDumpLinks(s, { master: bridge.index }),
    )) {
      const l = decodeLink(m);
      if (l.master === bridge.index && l.ifname) names.push(l.ifname);
    }
    return names;
  }
}

/** An errno Error from the addon or from fs (entering the netns, opening its fd) as a NetlinkError. */
function systemError(err: unknown, command: string, netns: string | undefined): Error {
  if (err instanceof NetlinkError) return err;
  const e = err as NodeJS.ErrnoException;
  if (typeof e?.code === "string" && /^E[A-Z0-9]+$/.test(e.code)) {
    return new NetlinkError({
      command,
      netns,
      code: e.code,
      errno: Math.abs(e.errno ?? 0),
      detail: e.message,
    });
  }
  return err instanceof Error ? err : new Error(String(err));
}
