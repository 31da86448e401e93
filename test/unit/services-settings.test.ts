/** driver.json's "services" key: its default, its values, and a bad one rejecting the load. */
import { expect } from "chai";
import { CniError } from "../../src/cni/errors.js";
import { loadDriverConfig } from "../../src/driver/config/network-config.js";
import { readServicesMode } from "../../src/driver/services/settings.js";

describe('driver.json "services"', () => {
  it('defaults to "kube-proxy" and takes "driver"', () => {
    expect(readServicesMode({})).to.equal("kube-proxy");
    expect(readServicesMode({ services: "kube-proxy" })).to.equal("kube-proxy");
    expect(readServicesMode({ services: "driver" })).to.equal("driver");
  });

  for (const bad of ["Driver", "ipvs", true, { mode: "driver" }])
    it(`refuses ${JSON.stringify(bad)}, naming the key and the values it takes`, () => {
      expect(() => readServicesMode({ services: bad })).to.throw(
        `services must be "kube-proxy" or "driver", not ${JSON.stringify(bad)}`,
      );
    });

  it("a bad value rejects the whole config load (code 7, naming driver.json)", () => {
    const conflist = {
      cniVersion: "1.0.0",
      name: "n",
      plugins: [{ type: "bridge", ipam: { type: "host-local", subnet: "10.244.1.0/24" } }],
    };
    const files = new Map([
      ["n.conflist", Buffer.from(JSON.stringify(conflist))],
      ["driver.json", Buffer.from(JSON.stringify({ services: "ipvs" }))],
    ]);
    let err: unknown;
    try {
      loadDriverConfig(files, { source: "test", pluginExists: () => true }, 1);
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(CniError);
    expect((err as CniError).code).to.equal(7);
    expect((err as CniError).message).to.equal(
      'driver.json: services must be "kube-proxy" or "driver", not "ipvs"',
    );
  });
});
