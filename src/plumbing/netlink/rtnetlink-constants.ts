/**
 * rtnetlink's numbers and layout, as <linux/netlink.h>, <linux/rtnetlink.h>,
 * <linux/if_link.h>, <linux/if_addr.h> and <linux/veth.h> define them: one
 * table for the encoder and the decoder, so the two cannot disagree on a value.
 * Host byte order is little-endian on every platform the driver ships for
 * (x86_64, arm64), so native-endian netlink fields are LE on both sides;
 * addresses are network order.
 */

export const NLMSG_HDRLEN = 16;
export const IFINFOMSG_LEN = 16;
export const IFADDRMSG_LEN = 8;
export const RTMSG_LEN = 12;

export const NLMSG_NOOP = 1;
export const NLMSG_ERROR = 2;
export const NLMSG_DONE = 3;

export const NLM_F_REQUEST = 0x01;
export const NLM_F_ACK = 0x04;
export const NLM_F_DUMP_INTR = 0x10;
export const NLM_F_DUMP = 0x300;
export const NLM_F_REPLACE = 0x100;
export const NLM_F_EXCL = 0x200;
export const NLM_F_CREATE = 0x400;
/** In an NLMSG_ERROR's own header: the echoed request was cut to its header / TLVs follow. */
export const NLM_F_CAPPED = 0x100;
export const NLM_F_ACK_TLVS = 0x200;

export const NLMSGERR_ATTR_MSG = 1;
export const NLMSGERR_ATTR_OFFS = 2;

export const RTM_NEWLINK = 16;
export const RTM_DELLINK = 17;
export const RTM_GETLINK = 18;
export const RTM_SETLINK = 19;
export const RTM_NEWADDR = 20;
export const RTM_GETADDR = 22;
export const RTM_NEWROUTE = 24;
export const RTM_GETROUTE = 26;

export const AF_UNSPEC = 0;
export const AF_INET = 2;
export const AF_INET6 = 10;

export const IFLA_ADDRESS = 1;
export const IFLA_IFNAME = 3;
export const IFLA_MTU = 4;
export const IFLA_MASTER = 10;
export const IFLA_OPERSTATE = 16;
export const IFLA_LINKINFO = 18;
export const IFLA_NET_NS_PID = 19;
export const IFLA_NET_NS_FD = 28;
export const IFLA_INFO_KIND = 1;
export const IFLA_INFO_DATA = 2;
export const IFLA_INFO_SLAVE_KIND = 4;
export const IFLA_INFO_SLAVE_DATA = 5;
/** A bridge port's hairpin mode (IFLA_BRPORT_MODE). */
export const IFLA_BRPORT_MODE = 4;
export const IFLA_BR_NF_CALL_IPTABLES = 36;
export const IFLA_BR_NF_CALL_IP6TABLES = 37;
export const VETH_INFO_PEER = 1;

export const IFA_ADDRESS = 1;
export const IFA_LOCAL = 2;
export const IFA_FLAGS = 8;
export const IFA_F_NODAD = 0x02;

export const RTA_DST = 1;
export const RTA_OIF = 4;
export const RTA_GATEWAY = 5;
export const RTA_TABLE = 15;
export const RT_TABLE_MAIN = 254;
export const RTPROT_BOOT = 3;
export const RT_SCOPE_UNIVERSE = 0;
export const RT_SCOPE_LINK = 253;
export const RTN_UNICAST = 1;
export const RTM_F_CLONED = 0x200;

export const IFF_UP = 0x1;

/** NLMSG_ALIGN / NLA_ALIGN: messages and attributes start on 4-byte boundaries. */
export const align4 = (n: number): number => (n + 3) & ~3;
