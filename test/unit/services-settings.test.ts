/** driver.json's "services" key: its default, its values, and a bad one rejecting the load. */
import { expect } from "chai";
import { CniError } from "../../src/cni/errors.js";
import { readServicesMode } from "../../src/driver/services/settings.js";
import { driverJsonRejection } from "../support/driver-config.js";

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
    const err = driverJsonRejection({ services: "ipvs" });
    expect(err).to.be.instanceOf(CniError);
    expect((err as CniError).code).to.equal(7);
    expect((err as CniError).message).to.equal(
      'driver.json: services must be "kube-proxy" or "driver", not "ipvs"',
    );
  });
});
