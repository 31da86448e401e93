/** The shim's configuration rules live in src/cni/shim-config.ts, shared with the tests' vectors. */
export {
  DEFAULT_SOCKET,
  DEFAULT_STATE_DIR,
  DEFAULT_TIMEOUT_SECONDS,
  parseShimConfig,
  type ShimConfig,
} from "../cni/shim-config.js";
