import { expect } from "chai";
import { socketPathProblem } from "../../src/cni/socket-path.js";

describe("socketPathProblem", () => {
  it("takes a path of 107 bytes and refuses one of 108, counting UTF-8 bytes", () => {
    expect(socketPathProblem(`/${"a".repeat(106)}`)).to.equal(undefined);
    expect(socketPathProblem(`/${"a".repeat(107)}`)).to.match(/is 108 bytes long/);
    expect(socketPathProblem(`/${"é".repeat(54)}`)).to.match(/is 109 bytes long/);
  });
});
