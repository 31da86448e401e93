/**
 * The plugin side of the CNI environment protocol (cni-spec §1): which CNI_*
 * variables each verb requires, reading them into a typed value, and building
 * the environment for a plugin we exec ourselves. Mirrors libcni's
 * pkg/skel getCmdArgsFromEnv and pkg/invoke Args.AsEnv.
 */
import { CniError, ErrorCode } from "./errors.js";
import { validateCniArgsText, validateNetnsPath } from "./limits.js";
import { validateContainerId, validateInterfaceName } from "./names.js";

export const CNI_COMMANDS = ["ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION"] as const;
export type CniCommand = (typeof CNI_COMMANDS)[number];

/** The variables of the protocol, in skel's order (which is the order missing ones are listed in). */
export const CNI_ENV_VARS = [
  "CNI_COMMAND",
  "CNI_CONTAINERID",
  "CNI_NETNS",
  "CNI_IFNAME",
  "CNI_ARGS",
  "CNI_PATH",
] as const;
export type CniEnvVar = (typeof CNI_ENV_VARS)[number];

/**
 * What each verb requires (cni-spec §1 table). CNI_ARGS is optional everywhere;
 * DEL tolerates a missing CNI_NETNS because containerd sends "" once the
 * sandbox's netns is gone.
 */
// Exported for its tests only (unit/env.test.ts).
export const REQUIRED_ENV: Readonly<Record<CniCommand, readonly CniEnvVar[]>> = {
  ADD: ["CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"],
  CHECK: ["CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"],
  DEL: ["CNI_COMMAND", "CNI_CONTAINERID", "CNI_IFNAME", "CNI_PATH"],
  GC: ["CNI_COMMAND", "CNI_PATH"],
  STATUS: ["CNI_COMMAND", "CNI_PATH"],
  VERSION: ["CNI_COMMAND"],
};

interface CommonEnv {
  /** CNI_PATH split on `:`, empty entries dropped; [] when absent. */
  cniPath: string[];
  /** CNI_ARGS as given ("" when absent); parse it with args.ts. */
  cniArgs: string;
}

/** ADD and CHECK act on one attachment inside a namespace. */
export interface AttachmentEnv extends CommonEnv {
  command: "ADD" | "CHECK";
  containerId: string;
  netns: string;
  ifName: string;
}

/** DEL: the same attachment, but the namespace may already be gone. */
export interface DeleteEnv extends CommonEnv {
  command: "DEL";
  containerId: string;
  netns?: string;
  ifName: string;
}

/** GC, STATUS and VERSION concern the network, not one attachment. */
export interface NetworkEnv extends CommonEnv {
  command: "GC" | "STATUS" | "VERSION";
  containerId?: undefined;
  netns?: undefined;
  ifName?: undefined;
}

export type PluginEnv = AttachmentEnv | DeleteEnv | NetworkEnv;

/**
 * What pluginEnvToProcessEnv needs: any PluginEnv, or one with its command
 * swapped for delegation (an ADD delegating DEL to IPAM), which the verb-typed
 * union cannot express.
 */
export interface PluginEnvInput {
  command: CniCommand;
  containerId?: string | undefined;
  netns?: string | undefined;
  ifName?: string | undefined;
  cniPath: readonly string[];
  cniArgs: string;
}

/** An environment as process.env holds it. */
export type EnvRecord = Record<string, string | undefined>;

function isCniCommand(value: unknown): value is CniCommand {
  return typeof value === "string" && (CNI_COMMANDS as readonly string[]).includes(value);
}

/** CNI_PATH into directories; `a::b` and a trailing `:` leave no empty entries. */
// Exported for its tests only (unit/env.test.ts).
export function splitCniPath(value: string | undefined): string[] {
  if (!value) return [];
  return value.split(":").filter((dir) => dir !== "");
}

/**
 * Reads and validates the CNI environment of one call. Throws CniError:
 * code 4 naming every missing variable at once ("required env variables
 * [A,B] missing", as skel words it; an empty value counts as missing), code 4
 * for an unknown CNI_COMMAND ("unknown CNI_COMMAND: X", the exact text libcni
 * recognises), the names.ts codes for a bad container ID (3 or 4) or
 * interface name (4), and code 4 for a CNI_NETNS or (ADD, CHECK, DEL) a
 * CNI_ARGS past its limit (limits.ts). Variables a verb does not carry are left out of the
 * result, even when the runtime set them.
 */
// Exported for its tests only (support/shim-config.ts, unit/env.test.ts).
export function parsePluginEnv(env: EnvRecord): PluginEnv {
  const get = (name: CniEnvVar): string | undefined => {
    const value = env[name];
    return value === undefined || value === "" ? undefined : value;
  };

  const command = get("CNI_COMMAND");
  if (command === undefined) throw missingVariables(["CNI_COMMAND"]);
  if (!isCniCommand(command)) {
    throw new CniError(ErrorCode.InvalidEnvironment, `unknown CNI_COMMAND: ${command}`);
  }

  const missing = REQUIRED_ENV[command].filter((name) => get(name) === undefined);
  if (missing.length > 0) throw missingVariables(missing);

  const common: CommonEnv = {
    cniPath: splitCniPath(get("CNI_PATH")),
    cniArgs: get("CNI_ARGS") ?? "",
  };

  switch (command) {
    case "ADD":
    case "CHECK":
      return {
        command,
        containerId: inVariable("CNI_CONTAINERID", validateContainerId, get("CNI_CONTAINERID")),
        netns: inVariable("CNI_NETNS", validateNetnsPath, get("CNI_NETNS") as string),
        ifName: inVariable("CNI_IFNAME", validateInterfaceName, get("CNI_IFNAME")),
        ...common,
        cniArgs: validateCniArgsText(common.cniArgs),
      };
    case "DEL": {
      const del: DeleteEnv = {
        command,
        containerId: inVariable("CNI_CONTAINERID", validateContainerId, get("CNI_CONTAINERID")),
        ifName: inVariable("CNI_IFNAME", validateInterfaceName, get("CNI_IFNAME")),
        ...common,
        cniArgs: validateCniArgsText(common.cniArgs),
      };
      const netns = get("CNI_NETNS");
      if (netns !== undefined) del.netns = inVariable("CNI_NETNS", validateNetnsPath, netns);
      return del;
    }
    case "GC":
    case "STATUS":
    case "VERSION":
      return { command, ...common };
  }
}

/**
 * Runs a names.ts or limits.ts check on one variable's value and appends the variable's name
 * to its message, so the runtime's log says which variable is wrong; libcni's
 * words stay first ("invalid characters in containerID: …"), so anything
 * matching on them still matches.
 */
function inVariable<V extends string | undefined>(
  name: CniEnvVar,
  check: (value: V) => string,
  value: V,
): string {
  try {
    return check(value);
  } catch (err) {
    if (!(err instanceof CniError)) throw err;
    throw new CniError(err.code, `${err.message} (${name})`, err.details);
  }
}

function missingVariables(names: readonly string[]): CniError {
  return new CniError(
    ErrorCode.InvalidEnvironment,
    `required env variables [${names.join(",")}] missing`,
  );
}

/**
 * The environment to exec a plugin with: the base environment kept whole, the
 * six CNI_* variables set from `env` (libcni's Args.AsEnv). A variable the
 * verb does not carry is set to "" rather than inherited, so a stale value in
 * the base (say CNI_NETNS when delegating GC) cannot leak through; "" means
 * missing to every plugin. For delegation (IPAM), pass the parsed environment
 * with only `command` changed. Returns a new object; `base` is not modified.
 */
export function pluginEnvToProcessEnv(
  env: PluginEnvInput,
  base: EnvRecord = {},
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(base)) {
    if (value !== undefined) out[key] = value;
  }
  out.CNI_COMMAND = env.command;
  out.CNI_CONTAINERID = env.containerId ?? "";
  out.CNI_NETNS = env.netns ?? "";
  out.CNI_ARGS = env.cniArgs;
  out.CNI_IFNAME = env.ifName ?? "";
  out.CNI_PATH = env.cniPath.join(":");
  return out;
}
