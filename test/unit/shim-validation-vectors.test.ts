/**
 * Every vector of test/vectors/shim-validation.json through checkShimCall: the
 * code and message of each refusal, and that every "ok" input passes all the
 * checks. The same table runs through the built shim in
 * test/integration/shim-validation-vectors.test.ts.
 */
import { expect } from "chai";
import { CniError } from "../../src/cni/errors.js";
import { checkShimCall } from "../support/shim-config.js";
import { isOkVector, loadShimVectors, vectorEnv, vectorStdin } from "../support/shim-vectors.js";

const vectors = loadShimVectors();

describe("shim validation vectors through checkShimCall", () => {
  it("the table has unique names, both outcomes, and every verb", () => {
    const names = vectors.map((v) => v.name);
    expect(new Set(names).size, "unique names").to.equal(names.length);
    expect(vectors.filter(isOkVector).length).to.be.above(20);
    expect(vectors.filter((v) => !isOkVector(v)).length).to.be.above(100);
    for (const verb of ["ADD", "DEL", "CHECK", "STATUS", "GC", "VERSION"]) {
      expect(
        vectors.some((v) => isOkVector(v) && v.env.CNI_COMMAND === verb),
        `an ok vector for ${verb}`,
      ).to.equal(true);
    }
  });

  for (const v of vectors) {
    const want = v.expect;
    it(`${v.name}: ${"ok" in want ? "ok" : `code ${want.code}`}`, () => {
      let outcome: ReturnType<typeof checkShimCall> | CniError;
      try {
        outcome = checkShimCall(vectorEnv(v), vectorStdin(v));
      } catch (err) {
        if (!(err instanceof CniError)) throw err;
        outcome = err;
      }
      if ("ok" in want) {
        expect(outcome, outcome instanceof CniError ? outcome.message : "").not.to.be.instanceOf(
          CniError,
        );
        const call = outcome as ReturnType<typeof checkShimCall>;
        expect(call.command).to.equal(v.env.CNI_COMMAND);
        return;
      }
      expect(outcome, "a CNI error").to.be.instanceOf(CniError);
      const err = outcome as CniError;
      expect(err.code, err.message).to.equal(want.code);
      expect(err.message).to.match(new RegExp(want.msg));
    });
  }
});
