// The entry point of the cni-driver-shim single executable (scripts/build-shim.sh).
//
// It runs the bundled shim (the asset shim.cjs, one function expression) with the
// V8 code cache the build made after running the bundle through every verb
// (code-cache.cjs). Node's own SEA code cache ("useCodeCache") is made from a
// compile without a run, so it holds only the top-level code, and each function
// the shim calls would otherwise be compiled at every exec. A cache V8 refuses
// (another Node, other flags) costs that time again and nothing else.
"use strict";
const { getAsset } = require("node:sea");
const { Script, constants } = require("node:vm");

const script = new Script(getAsset("shim.cjs", "utf8"), {
  filename: "cni-driver-shim.cjs",
  cachedData: new Uint8Array(getAsset("shim.code-cache")),
  importModuleDynamically: constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
});
script.runInThisContext()(exports, require, module, __filename, __dirname);
