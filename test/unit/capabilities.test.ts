import { expect } from "chai";
import {
  findKeyIgnoringCase,
  KNOWN_CAPABILITIES,
  normalizeCapabilityArgs,
} from "../../src/cni/capabilities.js";
import { cniErrorOf } from "../support/cni-error.js";

describe("cni/capabilities", () => {
  it("knows the conventions' capability names", () => {
    expect(KNOWN_CAPABILITIES).to.deep.equal([
      "portMappings",
      "bandwidth",
      "ipRanges",
      "ips",
      "mac",
      "dns",
      "aliases",
      "cgroupPath",
      "io.kubernetes.cri.pod-annotations",
    ]);
  });

  describe("normalizeCapabilityArgs: runtime spellings to the conventions'", () => {
    for (const [what, raw, want] of [
      [
        "containerd's capitalised port mapping",
        { portMappings: [{ HostPort: 8080, ContainerPort: 80, Protocol: "TCP", HostIP: "" }] },
        { portMappings: [{ hostPort: 8080, containerPort: 80, protocol: "tcp" }] },
      ],
      [
        "a port mapping with hostIP and sctp",
        {
          portMappings: [{ hostPort: 53, containerPort: 53, protocol: "SCTP", hostIP: "10.0.0.1" }],
        },
        {
          portMappings: [{ hostPort: 53, containerPort: 53, protocol: "sctp", hostIP: "10.0.0.1" }],
        },
      ],
      [
        "a port mapping without protocol (tcp)",
        { portMappings: [{ hostPort: 1, containerPort: 65535 }] },
        { portMappings: [{ hostPort: 1, containerPort: 65535, protocol: "tcp" }] },
      ],
      [
        "containerd's bandwidth",
        { bandwidth: { IngressRate: 1000, IngressBurst: 2000, EgressRate: 0, EgressBurst: 0 } },
        { bandwidth: { ingressRate: 1000, ingressBurst: 2000, egressRate: 0, egressBurst: 0 } },
      ],
      [
        "containerd's dns with a nil slice",
        { dns: { Servers: ["10.96.0.10"], Searches: ["svc.cluster.local"], Options: null } },
        { dns: { servers: ["10.96.0.10"], searches: ["svc.cluster.local"] } },
      ],
      [
        "containerd's ipRanges, empty strings dropped",
        {
          ipRanges: [
            [{ Subnet: "10.244.1.0/24", RangeStart: "", RangeEnd: "", Gateway: "10.244.1.1" }],
          ],
        },
        { ipRanges: [[{ subnet: "10.244.1.0/24", gateway: "10.244.1.1" }]] },
      ],
      [
        "a capability name in another case",
        { PortMappings: [{ hostPort: 80, containerPort: 80, protocol: "udp" }] },
        { portMappings: [{ hostPort: 80, containerPort: 80, protocol: "udp" }] },
      ],
      [
        "pod annotations that are null",
        { "io.kubernetes.cri.pod-annotations": null },
        { "io.kubernetes.cri.pod-annotations": null },
      ],
      [
        "pod annotations as a map",
        { "io.kubernetes.cri.pod-annotations": { "a/b": "c" } },
        { "io.kubernetes.cri.pod-annotations": { "a/b": "c" } },
      ],
      [
        "ips, mac, cgroupPath and list aliases",
        {
          ips: ["10.1.0.5/24", "2001:db8::5"],
          mac: "c2:11:22:33:44:55",
          cgroupPath: "/kubepods/pod1",
          aliases: ["web"],
        },
        {
          ips: ["10.1.0.5/24", "2001:db8::5"],
          mac: "c2:11:22:33:44:55",
          cgroupPath: "/kubepods/pod1",
          aliases: ["web"],
        },
      ],
      [
        "podman's aliases map",
        { aliases: { podman: ["web", "db"] } },
        { aliases: { podman: ["web", "db"] } },
      ],
      [
        "unknown capabilities, passed untouched",
        { infinibandGUID: "x", deviceID: { Any: [1] } },
        { infinibandGUID: "x", deviceID: { Any: [1] } },
      ],
      [
        "unknown keys inside a known capability, kept",
        { bandwidth: { ingressRate: 5, Extra: true } },
        { bandwidth: { ingressRate: 5, Extra: true } },
      ],
      ["a null list capability, dropped", { portMappings: null }, {}],
      [
        "both spellings: the exact one wins and the other is dropped",
        { portMappings: [{ hostPort: 1, HostPort: 2, containerPort: 3 }] },
        { portMappings: [{ hostPort: 1, containerPort: 3, protocol: "tcp" }] },
      ],
    ] as const) {
      it(what, () => {
        expect(normalizeCapabilityArgs(raw as Record<string, unknown>)).to.deep.equal(want);
      });
    }
  });

  describe("normalizeCapabilityArgs: wrong values are code 7 naming the path", () => {
    for (const [what, raw, pattern] of [
      [
        "a port of 0",
        { portMappings: [{ hostPort: 0, containerPort: 80 }] },
        /portMappings\[0\]\.hostPort: must be an integer from 1 to 65535, not 0/,
      ],
      [
        "a port above 65535",
        { portMappings: [{ hostPort: 80, containerPort: 65536 }] },
        /portMappings\[0\]\.containerPort/,
      ],
      [
        "a port given as a string",
        { portMappings: [{ hostPort: "80", containerPort: 80 }] },
        /hostPort: .* not "80"/,
      ],
      ["a fractional port", { portMappings: [{ hostPort: 80.5, containerPort: 80 }] }, /hostPort/],
      [
        "protocol icmp",
        { portMappings: [{ hostPort: 80, containerPort: 80, protocol: "icmp" }] },
        /protocol: must be tcp, udp or sctp, not "icmp"/,
      ],
      ["portMappings not a list", { portMappings: {} }, /portMappings: must be a list/],
      ["a negative rate", { bandwidth: { ingressRate: -1 } }, /bandwidth\.ingressRate/],
      ["ips with a number", { ips: ["10.0.0.1", 5] }, /ips\[1\]: must be a string/],
      [
        "a range without subnet",
        { ipRanges: [[{ gateway: "10.0.0.1" }]] },
        /ipRanges\[0\]\[0\]\.subnet/,
      ],
      ["dns servers not a list", { dns: { servers: "10.0.0.1" } }, /dns\.servers/],
      ["mac as a number", { mac: 5 }, /mac: must be a string/],
      [
        "annotations with a number value",
        { "io.kubernetes.cri.pod-annotations": { a: 1 } },
        /pod-annotations\."a": must be a string/,
      ],
    ] as const) {
      it(what, () => {
        const err = cniErrorOf(() => normalizeCapabilityArgs(raw as Record<string, unknown>));
        expect(err.code).to.equal(7);
        expect(err.message).to.match(/^invalid capability argument /);
        expect(err.message).to.match(pattern);
      });
    }
  });

  describe("findKeyIgnoringCase", () => {
    for (const [obj, key, want] of [
      [{ portMappings: 1 }, "portMappings", "portMappings"],
      [{ PORTMAPPINGS: 1 }, "portMappings", "PORTMAPPINGS"],
      [{ PortMappings: 1, portMappings: 2 }, "portMappings", "portMappings"],
      [{ bandwidth: 1 }, "portMappings", undefined],
    ] as const) {
      it(`${JSON.stringify(obj)} / ${key} -> ${String(want)}`, () => {
        expect(findKeyIgnoringCase(obj, key)).to.equal(want);
      });
    }
  });
});
