import { expect } from "chai";
import { CniError } from "../../src/cni/errors.js";

/** Runs `fn`, which must throw a CniError, and returns that error for the test to inspect. */
export function cniErrorOf(fn: () => unknown): CniError {
  try {
    fn();
  } catch (err) {
    expect(err).to.be.instanceOf(CniError);
    return err as CniError;
  }
  expect.fail("expected a CniError");
}

/** Awaits `p`, which must reject with a CniError, and returns that error for the test to inspect. */
export async function cniRejectionOf(p: Promise<unknown>): Promise<CniError> {
  const err = await p.then(
    () => expect.fail("expected a CniError"),
    (e: unknown) => e,
  );
  expect(err).to.be.instanceOf(CniError);
  return err as CniError;
}
