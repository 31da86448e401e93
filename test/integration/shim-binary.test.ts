/**
 * The shim binary is statically linked: runtimes exec it on hosts whose libc
 * may be older than the build machine's, or absent (a distroless node image),
 * so it must need no ELF interpreter and no shared library. Read from the ELF
 * headers of dist/bin/cni-driver-shim (built when older than its sources).
 */
import { expect } from "chai";
import { elfLinkage } from "../support/elf.js";
import { ensureShimBuilt } from "../support/runtimes.js";

describe("cni-driver-shim: the binary (integration)", () => {
  let shimPath = "";
  before(function () {
    this.timeout(300_000);
    shimPath = ensureShimBuilt();
  });

  it("the check reads a dynamically linked executable as one (/bin/ls: its loader and libc)", () => {
    const ls = elfLinkage("/bin/ls");
    expect(ls.interpreter).to.match(/\/ld-linux[^/]*\.so\.\d+$/);
    expect(ls.needed).to.include("libc.so.6");
  });

  it("is statically linked: no ELF interpreter, no shared library needed", () => {
    const shim = elfLinkage(shimPath);
    expect(shim.interpreter, "PT_INTERP").to.equal(undefined);
    expect(shim.needed, "DT_NEEDED").to.deep.equal([]);
  });
});
