/**
 * The names a CNI call carries: container ID, interface name, network name
 * (cni-spec §1, §2). The rules and the wording mirror libcni's pkg/utils
 * (ValidateContainerID, ValidateInterfaceName, ValidateNetworkName): each
 * message starts with libcni's text, so anything matching on it still matches,
 * and then names the offending value (cut short past ECHO_BYTES, limits.ts).
 * Each name has a length limit (limits.ts), checked first, so no rule ever
 * scans, and no message ever quotes, more than that.
 */
import { CniError, ErrorCode, type ErrorCodeValue } from "./errors.js";
import {
  echo,
  MAX_CONTAINER_ID_BYTES,
  MAX_INTERFACE_NAME_BYTES,
  MAX_NETWORK_NAME_BYTES,
  requireAtMostBytes,
} from "./limits.js";

/** Container IDs and network names: an alphanumeric, then alphanumerics, `_`, `.` or `-`. */
const CNI_NAME_PATTERN = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

/**
 * Go's unicode.IsSpace: ASCII \t \n \v \f \r and space, U+0085, U+00A0 and the
 * Unicode White_Space characters. JavaScript's `\s` differs (it has U+FEFF and
 * lacks U+0085), hence the explicit class.
 */
const GO_SPACE = /[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;

/**
 * CNI_CONTAINERID: empty is code 3 (the runtime named no container), more
 * than MAX_CONTAINER_ID_BYTES or bad characters (NUL among them) code 4 (an
 * invalid environment variable). Returns the id.
 */
export function validateContainerId(id: string | undefined): string {
  if (id === undefined || id === "") {
    throw new CniError(ErrorCode.UnknownContainer, "missing containerID");
  }
  requireAtMostBytes("containerID", id, MAX_CONTAINER_ID_BYTES);
  if (!CNI_NAME_PATTERN.test(id)) {
    // libcni puts the id in details; it goes in the message too so logs that
    // keep only the message still say which id.
    throw new CniError(
      ErrorCode.InvalidEnvironment,
      `invalid characters in containerID: ${echo(id)}`,
      id,
    );
  }
  return id;
}

/**
 * CNI_IFNAME, following the kernel's dev_valid_name: non-empty, at most 15
 * bytes of UTF-8, not `.` or `..`, no `/`, `:`, whitespace or NUL (the kernel
 * would end the name there; libcni does not check it). Every violation is
 * code 4. Returns the name.
 */
export function validateInterfaceName(name: string | undefined): string {
  if (name === undefined || name === "") {
    throw new CniError(ErrorCode.InvalidEnvironment, "interface name is empty");
  }
  const bytes = Buffer.byteLength(name, "utf8");
  if (bytes > MAX_INTERFACE_NAME_BYTES) {
    throw new CniError(
      ErrorCode.InvalidEnvironment,
      `interface name is too long: ${echo(name)}`,
      `interface name should be less than ${MAX_INTERFACE_NAME_BYTES + 1} characters; it has ${bytes} bytes`,
    );
  }
  if (name === "." || name === "..") {
    throw new CniError(ErrorCode.InvalidEnvironment, `interface name is . or ..: ${echo(name)}`);
  }
  if (name.includes("\0")) {
    throw new CniError(
      ErrorCode.InvalidEnvironment,
      `interface name contains a NUL byte: ${echo(name)}`,
    );
  }
  if (name.includes("/") || name.includes(":") || GO_SPACE.test(name)) {
    throw new CniError(
      ErrorCode.InvalidEnvironment,
      `interface name contains / or : or whitespace characters: ${echo(name)}`,
    );
  }
  return name;
}

/**
 * The network `name` of a config: missing, not a string, more than
 * MAX_NETWORK_NAME_BYTES or bad characters (NUL among them) is code 7, an
 * invalid config. Takes the decoded JSON value as it is, so a non-string name
 * is reported here too. Returns the name.
 */
export function validateNetworkName(name: unknown): string {
  return checkNetworkName(name, ErrorCode.InvalidNetworkConfig);
}

/**
 * The network a request asks for (the driver's `network` field): the same
 * rules as a config's name, but a bad one is code 4, as any other bad field
 * of a request is. Returns the name.
 */
export function validateRequestedNetworkName(name: string): string {
  return checkNetworkName(name, ErrorCode.InvalidEnvironment);
}

function checkNetworkName(name: unknown, code: ErrorCodeValue): string {
  if (name === undefined || name === null || name === "") {
    throw new CniError(code, "missing network name");
  }
  if (typeof name !== "string") {
    throw new CniError(
      code,
      `invalid network name: must be a string, not ${Array.isArray(name) ? "array" : typeof name}`,
    );
  }
  const bytes = Buffer.byteLength(name, "utf8");
  if (bytes > MAX_NETWORK_NAME_BYTES) {
    throw new CniError(
      code,
      `network name is too long: ${echo(name)}; at most ${MAX_NETWORK_NAME_BYTES} bytes`,
    );
  }
  if (!CNI_NAME_PATTERN.test(name)) {
    throw new CniError(code, `invalid characters found in network name: ${echo(name)}`, name);
  }
  return name;
}
