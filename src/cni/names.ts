/**
 * The names a CNI call carries: container ID, interface name, network name
 * (cni-spec §1, §2). The rules and the wording mirror libcni's pkg/utils
 * (ValidateContainerID, ValidateInterfaceName, ValidateNetworkName): each
 * message starts with libcni's text, so anything matching on it still matches,
 * and then names the offending value.
 */
import { CniError, ErrorCode } from "./errors.js";

/** Container IDs and network names: an alphanumeric, then alphanumerics, `_`, `.` or `-`. */
export const CNI_NAME_PATTERN = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

/** IFNAMSIZ (16) less the terminating NUL; the kernel counts bytes, not characters. */
export const MAX_INTERFACE_NAME_BYTES = 15;

/**
 * Go's unicode.IsSpace: ASCII \t \n \v \f \r and space, U+0085, U+00A0 and the
 * Unicode White_Space characters. JavaScript's `\s` differs (it has U+FEFF and
 * lacks U+0085), hence the explicit class.
 */
const GO_SPACE = /[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;

const quote = (s: string): string => JSON.stringify(s);

/**
 * CNI_CONTAINERID: empty is code 3 (the runtime named no container), bad
 * characters code 4 (an invalid environment variable). Returns the id.
 */
export function validateContainerId(id: string | undefined): string {
  if (id === undefined || id === "") {
    throw new CniError(ErrorCode.UnknownContainer, "missing containerID");
  }
  if (!CNI_NAME_PATTERN.test(id)) {
    // libcni puts the id in details; it goes in the message too so logs that
    // keep only the message still say which id.
    throw new CniError(
      ErrorCode.InvalidEnvironment,
      `invalid characters in containerID: ${quote(id)}`,
      id,
    );
  }
  return id;
}

/**
 * CNI_IFNAME, following the kernel's dev_valid_name: non-empty, at most 15
 * bytes of UTF-8, not `.` or `..`, no `/`, `:` or whitespace. Every violation
 * is code 4. Returns the name.
 */
export function validateInterfaceName(name: string | undefined): string {
  if (name === undefined || name === "") {
    throw new CniError(ErrorCode.InvalidEnvironment, "interface name is empty");
  }
  const bytes = Buffer.byteLength(name, "utf8");
  if (bytes > MAX_INTERFACE_NAME_BYTES) {
    throw new CniError(
      ErrorCode.InvalidEnvironment,
      `interface name is too long: ${quote(name)}`,
      `interface name should be less than ${MAX_INTERFACE_NAME_BYTES + 1} characters; it has ${bytes} bytes`,
    );
  }
  if (name === "." || name === "..") {
    throw new CniError(ErrorCode.InvalidEnvironment, `interface name is . or ..: ${quote(name)}`);
  }
  if (name.includes("/") || name.includes(":") || GO_SPACE.test(name)) {
    throw new CniError(
      ErrorCode.InvalidEnvironment,
      `interface name contains / or : or whitespace characters: ${quote(name)}`,
    );
  }
  return name;
}

/**
 * The network `name` of a config: missing or invalid is code 7. Takes the
 * decoded JSON value as it is, so a non-string name is reported here too.
 * Returns the name.
 */
export function validateNetworkName(name: unknown): string {
  if (name === undefined || name === null || name === "") {
    throw new CniError(ErrorCode.InvalidNetworkConfig, "missing network name");
  }
  if (typeof name !== "string") {
    throw new CniError(
      ErrorCode.InvalidNetworkConfig,
      `invalid network name: must be a string, not ${Array.isArray(name) ? "array" : typeof name}`,
    );
  }
  if (!CNI_NAME_PATTERN.test(name)) {
    throw new CniError(
      ErrorCode.InvalidNetworkConfig,
      `invalid characters found in network name: ${quote(name)}`,
      name,
    );
  }
  return name;
}
