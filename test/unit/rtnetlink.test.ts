import { expect } from "chai";
import {
  decodeAddr,
  decodeError,
  decodeLink,
  decodeRoute,
  linkFlagNames,
  operstateName,
  parseAttrs,
  readExchange,
  routeDstText,
  splitMessages,
} from "../../src/plumbing/netlink/rtnetlink-decode.js";
import {
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
  nlattr,
} from "../../src/plumbing/netlink/rtnetlink-encode.js";

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
const bytes = (h: string) => Buffer.from(h.replace(/\s+/g, ""), "hex");

/**
 * Requests as iproute2 6.1 sends them (captured with `strace -e write=3`), with
 * its sequence number 0x6b025e65, ifindex 0x527c (21116) and netns fd 4.
 */
const SEQ = 0x6b025e65;
const IPROUTE2 = {
  // ip link add vcap0 mtu 1450 address 02:00:00:00:01:02 up type veth peer name eth9 mtu 1450 address 02:00:00:00:01:01 netns cap2
  veth:
    "8c000000 1000 0506 655e026b 00000000 00000000 00000000 01000000 01000000" +
    "08000400aa050000 0a000100020000000102 0000 0a000300766361703000 0000" +
    "4c001200 0800010076657468 40000200 3c000100 00000000000000000000000000000000" +
    "08000400aa050000 0a000100020000000101 0000 08001c0004000000 090003006574683900000000",
  // ip link add brcap0 mtu 1400 type bridge
  bridge:
    "44000000 1000 0506 655e026b 00000000 00000000000000000000000000000000" +
    "0800040078050000 0b0003006272636170300000 100012000a000100627269646765 0000",
  // ip addr add 10.9.0.5/24 dev vcap0
  addr4: "28000000 1400 0506 655e026b 00000000 02180000 7c520000 080002000a090005 080001000a090005",
  // ip addr add fd00::5/64 dev vcap0 nodad
  addr6:
    "40000000 1400 0506 655e026b 00000000 0a400200 7c520000" +
    "14000200fd000000000000000000000000000005 14000100fd000000000000000000000000000005",
  // ip route add 10.10.0.0/16 via 10.9.0.5 dev vcap0
  route:
    "34000000 1800 0506 655e026b 00000000 02100000fe030001 00000000" +
    "080001000a0a0000 080005000a090005 080004007c520000",
};

describe("rtnetlink: encoders", () => {
  it("RTM_NEWLINK veth with its peer placed by IFLA_NET_NS_FD: byte for byte what iproute2 sends", () => {
    const msg = encodeNewVeth(SEQ, {
      name: "vcap0",
      mtu: 1450,
      address: "02:00:00:00:01:02",
      up: true,
      peer: { name: "eth9", mtu: 1450, address: "02:00:00:00:01:01", netnsFd: 4 },
    });
    expect(hex(msg)).to.equal(hex(bytes(IPROUTE2.veth)));
  });

  it("RTM_NEWLINK bridge: byte for byte what iproute2 sends", () => {
    expect(hex(encodeNewBridge(SEQ, { name: "brcap0", mtu: 1400 }))).to.equal(
      hex(bytes(IPROUTE2.bridge)),
    );
  });

  for (const [name, spec, vector] of [
    ["IPv4", { index: 21116, cidr: "10.9.0.5/24" }, IPROUTE2.addr4],
    ["IPv6 with IFA_F_NODAD", { index: 21116, cidr: "fd00::5/64", nodad: true }, IPROUTE2.addr6],
  ] as const) {
    it(`RTM_NEWADDR ${name}: byte for byte what iproute2 sends`, () => {
      expect(hex(encodeNewAddr(SEQ, spec))).to.equal(hex(bytes(vector)));
    });
  }

  it("RTM_NEWROUTE with a gateway: byte for byte what iproute2 sends", () => {
    expect(
      hex(encodeNewRoute(SEQ, { dst: "10.10.0.0/16", gateway: "10.9.0.5", oif: 21116 })),
    ).to.equal(hex(bytes(IPROUTE2.route)));
  });

  it("a veth with IFLA_MASTER carries the bridge's index before IFLA_IFNAME; IFLA_NET_NS_PID when asked", () => {
    const msg = encodeNewVeth(1, {
      name: "h0",
      master: 7,
      peer: { name: "c0", netnsPid: 4242 },
    });
    const [m] = splitMessages(msg);
    const attrs = parseAttrs(m!.payload, 16);
    expect(attrs.get(10)?.readUInt32LE(0)).to.equal(7); // IFLA_MASTER
    expect(m!.payload.readUInt32LE(8)).to.equal(0); // not up unless asked
    const peer = parseAttrs(parseAttrs(attrs.get(18)!).get(2)!).get(1)!; // LINKINFO > DATA > PEER
    const peerAttrs = parseAttrs(peer, 16);
    expect(peerAttrs.get(19)?.readUInt32LE(0)).to.equal(4242); // IFLA_NET_NS_PID
    expect(peerAttrs.has(28)).to.equal(false);
  });

  it("a default route has no RTA_DST; an IPv4 route without a gateway is scope link, IPv6 universe", () => {
    const def = splitMessages(
      encodeNewRoute(1, { dst: "0.0.0.0/0", gateway: "10.0.0.1", oif: 3 }),
    )[0]!;
    expect(def.payload.readUInt8(1)).to.equal(0);
    expect(parseAttrs(def.payload, 12).has(1)).to.equal(false);
    expect(def.payload.readUInt8(6)).to.equal(0);
    const link = splitMessages(encodeNewRoute(1, { dst: "10.1.0.0/16", oif: 3 }))[0]!;
    expect(link.payload.readUInt8(6)).to.equal(253);
    const v6 = splitMessages(encodeNewRoute(1, { dst: "::/0", gateway: "fd00::1", oif: 3 }))[0]!;
    expect(v6.payload.readUInt8(0)).to.equal(10);
    expect(v6.payload.readUInt8(6)).to.equal(0);
    expect(hex(parseAttrs(v6.payload, 12).get(5)!)).to.equal("fd000000000000000000000000000001");
  });

  for (const [name, msg, expected] of [
    [
      "RTM_SETLINK up by name",
      encodeSetLink(9, { name: "lo" }, { up: true }),
      "28000000 1300 0500 09000000 00000000 00000000 00000000 01000000 01000000 07000300 6c6f0000",
    ],
    [
      "RTM_SETLINK master by index",
      encodeSetLink(9, { index: 5 }, { master: 7 }),
      "28000000 1300 0500 09000000 00000000 00000000 05000000 00000000 00000000 08000a00 07000000",
    ],
    [
      "RTM_DELLINK by name",
      encodeDelLink(9, { name: "eth0" }),
      "2c000000 1100 0500 09000000 00000000 00000000 00000000 00000000 00000000 09000300 6574683000000000",
    ],
    [
      "RTM_GETLINK by index",
      encodeGetLink(9, { index: 3 }),
      "20000000 1200 0500 09000000 00000000 00000000 03000000 00000000 00000000",
    ],
    [
      "RTM_GETLINK dump of a bridge's ports",
      encodeDumpLinks(9, { master: 7 }),
      "28000000 1200 0103 09000000 00000000 00000000 00000000 00000000 00000000 08000a00 07000000",
    ],
    [
      "RTM_GETADDR dump, both families",
      encodeDumpAddrs(9),
      "18000000 1600 0103 09000000 00000000 00000000 00000000",
    ],
    [
      "RTM_GETROUTE dump, IPv6",
      encodeDumpRoutes(9, 6),
      "1c000000 1a00 0103 09000000 00000000 0a000000 00000000 00000000",
    ],
    [
      "RTM_NEWADDR replace",
      encodeNewAddr(9, { index: 2, cidr: "10.244.0.1/24", replace: true }),
      "28000000 1400 0505 09000000 00000000 02180000 02000000 080002000af40001 080001000af40001",
    ],
  ] as const) {
    it(name, () => {
      expect(hex(msg)).to.equal(hex(bytes(expected)));
    });
  }

  it("attributes are padded to 4 bytes, their length excludes the padding", () => {
    expect(hex(nlattr(3, Buffer.from("ab\0")))).to.equal("0700030061620000");
  });

  for (const [what, bad] of [
    [
      "a MAC that is not one",
      () => encodeNewVeth(1, { name: "a", address: "x", peer: { name: "b" } }),
    ],
    ["an address without prefix", () => encodeNewAddr(1, { index: 1, cidr: "10.0.0.5" })],
    [
      "a gateway that is no IP",
      () => encodeNewRoute(1, { dst: "10.0.0.0/8", gateway: "nope", oif: 1 }),
    ],
  ] as const) {
    it(`rejects ${what} before the kernel sees it`, () => {
      expect(bad).to.throw(TypeError);
    });
  }
});

/** Answers captured from the kernel (6.18) through the addon, in a netns holding eth0 (ifindex 5). */
const KERNEL = {
  addr4:
    "50000000 1400 0200 08000000 2d2e0000 02188000 05000000 080001000af40105 080002000af40105" +
    "090003006574683000000000 0800080080000000 14000600ffffffffffffffff2123040021230400",
  addr6:
    "48000000 1400 0200 08000000 2d2e0000 0a408200 05000000 14000100fd000000000000000000000000000005" +
    "14000600ffffffffffffffff2223040022230400 0800080082000000",
  route4Default:
    "34000000 1800 0200 09000000 2d2e0000 02000000 fe030001 10000000 08000f00fe000000" +
    "080005000af40101 0800040005000000",
  route4Subnet:
    "3c000000 1800 0200 09000000 2d2e0000 02180000 fe02fd01 10000000 08000f00fe000000" +
    "080001000af40100 080007000af40105 0800040005000000",
  route4Local:
    "3c000000 1800 0200 09000000 2d2e0000 02200000 ff02fe02 00000000 08000f00ff000000" +
    "080001000af40105 080007000af40105 0800040005000000",
  route6:
    "74000000 1800 0200 0a000000 2d2e0000 0a400000 fe020001 10000000 08000f00fe000000" +
    "14000100fd000000000000000000000000000000 0800060000010000 0800040005000000" +
    "24000c00000000000000000000000000000000000000000000000000000000000000000005001400 00000000",
  dumpDone: "14000000 0300 0200 08000000 2d2e0000 00000000",
  // RTM_NEWLINK of an unknown kind, answered with NETLINK_CAP_ACK and NETLINK_EXT_ACK on.
  errUnknownKind:
    "3c000000 0200 0003 0b000000 2d2e0000 a1ffffff 3c000000 1000 0506 0b000000 00000000" +
    "18000100556e6b6e6f776e20646576696365207479706500",
  errRoutePrefix:
    "50000000 0200 0003 0e000000 2d2e0000 eaffffff 2c000000 1800 0506 0e000000 00000000" +
    "2b000100496e76616c69642070726566697820666f7220676976656e20707265666978206c656e6774680000",
  errNoDevice: "24000000 0200 0001 0d000000 2d2e0000 edffffff 2c000000 1200 0500 0d000000 00000000",
  ack: "24000000 0200 0001 0d000000 2d2e0000 00000000 2c000000 1200 0500 0d000000 00000000",
};

/**
 * An RTM_NEWLINK as the kernel sends it for a veth on a bridge, cut to the
 * attributes the decoder reads (the kernel's answer is 1.8 kB), values as captured.
 */
const LINK_PEER0 =
  "74000000 1000 0000 10000000 2d2e0000 00000100 04000000 02100000 00000000" +
  "0a000300706565723000 0000 0500100002000000 08000400dc050000 0800 0a00 06000000" +
  "0a000100569bb1fc665e 0000 24001200 0900010076657468000000000b000400627269646765000008000500 00000000";

describe("rtnetlink: decoders", () => {
  it("a link: name, MAC, MTU, operstate, flags, master index, kind from IFLA_LINKINFO", () => {
    const [m] = splitMessages(bytes(LINK_PEER0));
    expect(decodeLink(m!)).to.deep.equal({
      index: 4,
      type: 1,
      flags: 0x1002,
      ifname: "peer0",
      address: "56:9b:b1:fc:66:5e",
      mtu: 1500,
      operstate: 2,
      master: 6,
      kind: "veth",
    });
  });

  it("addresses: IPv4 (IFA_LOCAL) and IPv6 (IFA_ADDRESS only, IFA_FLAGS with NODAD)", () => {
    expect(decodeAddr(splitMessages(bytes(KERNEL.addr4))[0]!)).to.deep.equal({
      family: 4,
      prefixlen: 24,
      flags: 0x80,
      scope: 0,
      index: 5,
      local: "10.244.1.5",
    });
    expect(decodeAddr(splitMessages(bytes(KERNEL.addr6))[0]!)).to.deep.equal({
      family: 6,
      prefixlen: 64,
      flags: 0x82,
      scope: 0,
      index: 5,
      local: "fd00::5",
    });
  });

  for (const [name, vector, expected, text] of [
    [
      "default via a gateway",
      KERNEL.route4Default,
      {
        family: 4,
        dstLen: 0,
        table: 254,
        protocol: 3,
        scope: 0,
        type: 1,
        flags: 16,
        gateway: "10.244.1.1",
        oif: 5,
      },
      "default",
    ],
    [
      "the subnet route of an address",
      KERNEL.route4Subnet,
      {
        family: 4,
        dstLen: 24,
        table: 254,
        protocol: 2,
        scope: 253,
        type: 1,
        flags: 16,
        dst: "10.244.1.0",
        oif: 5,
      },
      "10.244.1.0/24",
    ],
    [
      "a local host route (table local)",
      KERNEL.route4Local,
      {
        family: 4,
        dstLen: 32,
        table: 255,
        protocol: 2,
        scope: 254,
        type: 2,
        flags: 0,
        dst: "10.244.1.5",
        oif: 5,
      },
      "10.244.1.5",
    ],
    [
      "an IPv6 prefix route",
      KERNEL.route6,
      {
        family: 6,
        dstLen: 64,
        table: 254,
        protocol: 2,
        scope: 0,
        type: 1,
        flags: 16,
        dst: "fd00::",
        oif: 5,
      },
      "fd00::/64",
    ],
  ] as const) {
    it(`a route: ${name} (printed "${text}" as ip -j does)`, () => {
      const r = decodeRoute(splitMessages(bytes(vector))[0]!);
      expect(r).to.deep.equal(expected);
      expect(routeDstText(r!)).to.equal(text);
    });
  }

  for (const [name, vector, seq, errno, extack] of [
    [
      "an unknown link kind, with the kernel's extack text",
      KERNEL.errUnknownKind,
      11,
      95,
      "Unknown device type",
    ],
    [
      "a route with host bits, with extack",
      KERNEL.errRoutePrefix,
      14,
      22,
      "Invalid prefix for given prefix length",
    ],
    ["a missing device, no extack", KERNEL.errNoDevice, 13, 19, undefined],
  ] as const) {
    it(`NLMSG_ERROR: ${name}`, () => {
      const out = readExchange(bytes(vector), seq);
      expect(out.error?.errno).to.equal(errno);
      expect(out.error?.extack).to.equal(extack);
      expect(out.messages).to.deep.equal([]);
    });
  }

  it("an uncapped NLMSG_ERROR: the TLVs follow the whole echoed request", () => {
    const request = encodeDelLink(5, { name: "eth0" });
    const tlv = nlattr(1, Buffer.from("boom\0"));
    const payload = Buffer.concat([Buffer.from("feffffff", "hex"), request, tlv]);
    const head = Buffer.alloc(16);
    head.writeUInt32LE(16 + payload.length, 0);
    head.writeUInt16LE(2, 4);
    head.writeUInt16LE(0x200, 6); // NLM_F_ACK_TLVS, not capped
    head.writeUInt32LE(5, 8);
    const [m] = splitMessages(Buffer.concat([head, payload]));
    expect(decodeError(m!)).to.deep.equal({ errno: 2, extack: "boom" });
  });

  it("an exchange: data messages of the request's sequence up to DONE; others are left out", () => {
    const stale = bytes(KERNEL.addr4.replace("08000000", "07000000"));
    const out = readExchange(
      Buffer.concat([stale, bytes(KERNEL.addr4), bytes(KERNEL.addr6), bytes(KERNEL.dumpDone)]),
      8,
    );
    expect(out.error).to.equal(undefined);
    expect(out.messages.map((m) => decodeAddr(m)?.local)).to.deep.equal(["10.244.1.5", "fd00::5"]);
  });

  it("an ack ends a request without error; an answer without terminator is an error (EPROTO)", () => {
    expect(readExchange(bytes(KERNEL.ack), 13)).to.deep.equal({ messages: [], interrupted: false });
    expect(readExchange(bytes(KERNEL.addr4), 8).error?.errno).to.equal(71);
  });

  it("a dump that raced with a change is reported interrupted (NLM_F_DUMP_INTR)", () => {
    const m = bytes(KERNEL.addr4);
    m.writeUInt16LE(m.readUInt16LE(6) | 0x10, 6);
    expect(readExchange(Buffer.concat([m, bytes(KERNEL.dumpDone)]), 8).interrupted).to.equal(true);
  });

  for (const [flags, names] of [
    [0x1043, ["BROADCAST", "MULTICAST", "UP"]],
    [0x11043, ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"]],
    [0x1003, ["NO-CARRIER", "BROADCAST", "MULTICAST", "UP"]],
    [0x10049, ["LOOPBACK", "UP", "LOWER_UP"]],
  ] as const) {
    it(`link flags 0x${flags.toString(16)} read as ip does: ${names.join(",")}`, () => {
      expect(linkFlagNames(flags)).to.deep.equal(names);
    });
  }

  for (const [state, name] of [
    [0, "UNKNOWN"],
    [2, "DOWN"],
    [6, "UP"],
    [9, "9"],
  ] as const) {
    it(`operstate ${state} is ${name}`, () => {
      expect(operstateName(state)).to.equal(name);
    });
  }
});
