/**
 * Host ports through the driver: the Debian portmap chained after the built-in
 * plugin, its `portMappings` capability passed in `stdin_config.runtimeConfig` as a
 * shim passes the runtime's config, both in the conventions' spelling and in
 * containerd's capitalised one. A TCP server inside the pod answers a connection
 * from the host to <gateway>:<hostPort>: portmap DNATs locally originated traffic
 * in nat OUTPUT (`-m addrtype --dst-type LOCAL`), and the gateway is a local
 * address, so no host-wide sysctl is needed — not `ip_forward`, not br_netfilter
 * (those matter for traffic arriving from other hosts). portmap itself sets
 * `net.ipv4.conf.<bridge>.route_localnet=1` on the interface that routes to the pod
 * (its `snat` default, for 127.0.0.1), which is our bridge and goes with it.
 */
import { type ChildProcess, execFileSync } from "node:child_process";
import net from "node:net";
import { expect } from "chai";
import {
  DriverHarness,
  expectNoCniError,
  forEachHostLocalMode,
  natRulesMentioning,
} from "../support/driver-harness.js";
import { createNetns, deleteNetns } from "../support/netns.js";
import {
  CONTAINER_PORT,
  randomPorts,
  startPodServer,
  stopPodServer,
} from "../support/pod-server.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";

/** Connects to host:port and reads until the server closes (bounded: 5 s). */
function readFrom(host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let data = "";
    const sock = net.connect({ host, port, timeout: 5000 });
    sock.setEncoding("utf8");
    sock.on("data", (c: string) => {
      data += c;
    });
    sock.on("end", () => resolve(data));
    sock.on("timeout", () => sock.destroy(new Error(`no answer from ${host}:${port} in 5 s`)));
    sock.on("error", reject);
  });
}

forEachHostLocalMode({ "in-process": 12, exec: 22 }, ({ hostLocal, flags, octet }) => {
  describe(`cni-driver serve, host-local ${hostLocal}: host ports through chained portmap (integration)`, function () {
    this.timeout(30_000);
    let h: DriverHarness;
    let server: ChildProcess | undefined;
    const [plainPort, containerdPort] = randomPorts(2) as [number, number];

    before(async function () {
      requireRoot(this);
      requireReferencePlugins(this, "host-local", "portmap");
      h = new DriverHarness({
        subnetOctet: octet,
        extraFlags: flags,
        chain: [{ type: "portmap", capabilities: { portMappings: true } }],
      });
      await h.writeDefaultConfig();
      await h.start();
    });

    afterEach(async () => {
      await stopPodServer(server);
      server = undefined;
    });

    after(async () => {
      await h?.cleanup();
    });

    // A shim resends the runtime's config (runtimeConfig included) on DEL; a direct
    // caller of TearDownPod may send nothing, and the driver then uses the capability
    // args cached at ADD (portmap's DEL removes nothing without the mappings).
    const cases = [
      {
        name: "the conventions' keys; DEL without capabilities",
        pod: 1,
        hostPort: plainPort,
        mapping: (p: number) => ({ hostPort: p, containerPort: CONTAINER_PORT, protocol: "tcp" }),
        resendOnDel: false,
      },
      {
        name: "containerd's capitalised keys; DEL with them again",
        pod: 2,
        hostPort: containerdPort,
        mapping: (p: number) => ({
          HostPort: p,
          ContainerPort: CONTAINER_PORT,
          Protocol: "TCP",
          HostIP: "",
        }),
        resendOnDel: true,
      },
    ];

    it("CHECK passes for an IPv4-only pod with a host port (Debian portmap's plugins#819), and still fails when portmap's IPv4 rule is gone", async () => {
      const pod = 3;
      const [hostPort] = randomPorts(1) as [number];
      createNetns(h.netnsName(pod));
      const stdinConfig = {
        stdin_config: Buffer.from(
          JSON.stringify({
            runtimeConfig: {
              portMappings: [{ hostPort, containerPort: CONTAINER_PORT, protocol: "tcp" }],
            },
          }),
        ),
      };
      try {
        expectNoCniError(await h.client.setUpPod(h.podRequest(pod, stdinConfig)));
        // CRI-O's habit: CHECK right after ADD, with the runtime's config again.
        expectNoCniError(await h.client.checkPod(h.podRequest(pod, stdinConfig)));

        const chain = natRulesMentioning(h.containerId(pod))
          .flatMap((r) => /-j (CNI-DN-[0-9a-f]+)/.exec(r)?.[1] ?? [])
          .at(0);
        expect(chain, "portmap's per-pod DNAT chain").to.be.a("string");
        execFileSync("iptables", ["-t", "nat", "-F", chain as string]);
        const check = await h.client.checkPod(h.podRequest(pod, stdinConfig));
        expect(check.error?.code).to.equal(999);
        expect(check.error?.msg)
          .to.contain('type="portmap"')
          .and.to.contain("could not check ipv4 dnat");
      } finally {
        expectNoCniError(await h.client.tearDownPod(h.podRequest(pod, stdinConfig)));
        deleteNetns(h.netnsName(pod));
      }
    });

    for (const c of cases) {
      it(`forwards a mapped host port to the pod, and DEL removes portmap's rules (${c.name})`, async () => {
        createNetns(h.netnsName(c.pod));
        const stdinConfig = {
          stdin_config: Buffer.from(
            JSON.stringify({ runtimeConfig: { portMappings: [c.mapping(c.hostPort)] } }),
          ),
        };
        const add = await h.client.setUpPod(h.podRequest(c.pod, stdinConfig));
        expectNoCniError(add);

        const rules = natRulesMentioning(h.containerId(c.pod));
        expect(rules.join("\n"), "portmap's DNAT rule").to.contain(`--dports ${c.hostPort}`);
        const chains = rules.flatMap((r) => /-j (CNI-DN-[0-9a-f]+)/.exec(r)?.[1] ?? []);
        expect(chains, "per-pod DNAT chain").to.have.length.greaterThan(0);

        const reply = `hello from pod ${c.pod}`;
        server = await startPodServer(h.netnsName(c.pod), reply);
        expect(await readFrom(h.gateway, c.hostPort)).to.equal(reply);

        const del = await h.client.tearDownPod(
          h.podRequest(c.pod, c.resendOnDel ? stdinConfig : {}),
        );
        expectNoCniError(del);
        expect(
          natRulesMentioning(h.containerId(c.pod)),
          "rules naming the container",
        ).to.deep.equal([]);
        for (const chain of chains) {
          expect(natRulesMentioning(chain), `chain ${chain}`).to.deep.equal([]);
        }
        // Nothing answers on the host port any more.
        const after = await readFrom(h.gateway, c.hostPort).then(
          (data) => `answered ${JSON.stringify(data)}`,
          (err: NodeJS.ErrnoException) => err.code,
        );
        expect(after).to.equal("ECONNREFUSED");
        deleteNetns(h.netnsName(c.pod));
      });
    }
  });
});
