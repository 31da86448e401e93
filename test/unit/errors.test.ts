import { expect } from "chai";
import { CniError, isFailureCode } from "../../src/cni/errors.js";
import { toWireError } from "../../src/wire/convert.js";

describe("CNI error codes on the wire", () => {
  it("takes 1 to 2^32-1 for a failure, and not 0, negatives, fractions or larger codes", () => {
    for (const code of [1, 7, 11, 50, 999, 0xffffffff])
      expect(isFailureCode(code), `${code}`).to.equal(true);
    for (const code of [0, -1, 1.5, 0x100000000, Number.NaN])
      expect(isFailureCode(code), `${code}`).to.equal(false);
  });

  it("sends an error whose code would read as success as 999, saying which code it had", () => {
    expect(toWireError(new CniError(0, "iptables: busy", "d"))).to.deep.equal({
      code: 999,
      msg: "iptables: busy (error code 0)",
      details: "d",
    });
    expect(toWireError(new CniError(117, "no leases", ""))).to.deep.equal({
      code: 117,
      msg: "no leases",
      details: "",
      not_ready: false,
    });
  });
});
