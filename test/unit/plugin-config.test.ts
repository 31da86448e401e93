import { expect } from "chai";
import { normalizeCapabilityArgs } from "../../src/cni/capabilities.js";
import { parseNetworkConfigList } from "../../src/cni/conflist.js";
import { CniError } from "../../src/cni/errors.js";
import { buildPluginStdin, buildStatusStdin } from "../../src/cni/plugin-config.js";

const LIST = parseNetworkConfigList(
  JSON.stringify({
    cniVersion: "1.0.0",
    name: "pods",
    plugins: [
      {
        type: "bridge",
        name: "ignored",
        cniVersion: "0.3.1",
        ipam: { type: "host-local", ranges: [[{ subnet: "10.1.0.0/24" }]] },
        prevResult: { stale: true },
      },
      { type: "portmap", capabilities: { portMappings: true, bandwidth: false } },
      {
        type: "bandwidth",
        capabilities: { BandWidth: true },
        runtimeConfig: { fromFile: 1 },
      },
      { type: "tuning", runtimeConfig: { fromFile: 2 } },
    ],
  }),
);

const CAPS = normalizeCapabilityArgs({
  portMappings: [{ HostPort: 8080, ContainerPort: 80, Protocol: "TCP", HostIP: "" }],
  bandwidth: { IngressRate: 1000, IngressBurst: 2000, EgressRate: 0, EgressBurst: 0 },
  mac: "c2:11:22:33:44:55",
});

const PREV = {
  cniVersion: "1.0.0",
  interfaces: [{ name: "eth0", sandbox: "/run/netns/x" }],
  ips: [{ address: "10.1.0.2/24", interface: 0 }],
};

function stdinOf(pluginIndex: number, extra: { prevResult?: object; caps?: object } = {}) {
  return JSON.parse(
    buildPluginStdin({
      list: LIST,
      pluginIndex,
      prevResult: extra.prevResult,
      capabilityArgs: (extra.caps ?? CAPS) as Record<string, unknown>,
    }),
  ) as Record<string, unknown>;
}

describe("cni/plugin-config", () => {
  describe("buildPluginStdin", () => {
    it("copies name and cniVersion from the list over the plugin's own", () => {
      const s = stdinOf(0);
      expect(s.name).to.equal("pods");
      expect(s.cniVersion).to.equal("1.0.0");
      expect(s.ipam).to.deep.equal({ type: "host-local", ranges: [[{ subnet: "10.1.0.0/24" }]] });
    });

    it("removes a prevResult written in the config when none is given", () => {
      expect(stdinOf(0)).to.not.have.property("prevResult");
    });

    it("threads the given prevResult", () => {
      expect(stdinOf(1, { prevResult: PREV }).prevResult).to.deep.equal(PREV);
    });

    it("gives a plugin only the capabilities it declares true", () => {
      expect(stdinOf(1).runtimeConfig).to.deep.equal({
        portMappings: [{ hostPort: 8080, containerPort: 80, protocol: "tcp" }],
      });
    });

    it("matches the declared capability ignoring case, under the plugin's spelling", () => {
      expect(stdinOf(2).runtimeConfig).to.deep.equal({
        BandWidth: { ingressRate: 1000, ingressBurst: 2000, egressRate: 0, egressBurst: 0 },
      });
    });

    it("a plugin declaring nothing gets no runtimeConfig of ours; its own stays", () => {
      expect(stdinOf(3).runtimeConfig).to.deep.equal({ fromFile: 2 });
      expect(stdinOf(0)).to.not.have.property("runtimeConfig");
    });

    it("a declared capability the runtime did not send leaves the plugin's runtimeConfig", () => {
      expect(stdinOf(2, { caps: {} }).runtimeConfig).to.deep.equal({ fromFile: 1 });
    });

    it("passes a null capability value on (libcni passes whatever it holds)", () => {
      expect(stdinOf(1, { caps: { portMappings: null } }).runtimeConfig).to.deep.equal({
        portMappings: null,
      });
    });

    it("does not change the parsed list", () => {
      stdinOf(0, { prevResult: PREV });
      expect(LIST.plugins[0]?.raw.name).to.equal("ignored");
      expect(LIST.plugins[0]?.raw.prevResult).to.deep.equal({ stale: true });
    });

    it("an index outside the list is code 999", () => {
      try {
        buildPluginStdin({ list: LIST, pluginIndex: 9 });
        expect.fail("expected an error");
      } catch (err) {
        expect(err).to.be.instanceOf(CniError);
        expect((err as CniError).code).to.equal(999);
      }
    });
  });

  describe("buildStatusStdin", () => {
    it("is the plugin's object with the list's name and cniVersion", () => {
      const s = JSON.parse(buildStatusStdin(LIST, 1));
      expect(s).to.deep.equal({
        type: "portmap",
        capabilities: { portMappings: true, bandwidth: false },
        name: "pods",
        cniVersion: "1.0.0",
      });
    });
  });
});
