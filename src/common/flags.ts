/**
 * Command-line flags, each with an environment twin (--cni-bin-dir ↔
 * CNI_DRIVER_CNI_BIN_DIR) so a DaemonSet can set them by env. A flag given on the
 * command line wins over its env twin, which wins over the default.
 */
import { parseArgs } from "node:util";

export interface FlagSpec {
  name: string;
  default?: string;
  multiple?: boolean;
  boolean?: boolean;
  help: string;
}

// Exported for its tests only (integration/cli-help.test.ts, unit/manifests.test.ts).
export function envName(flag: string): string {
  return `CNI_DRIVER_${flag.toUpperCase().replace(/-/g, "_")}`;
}

export type FlagValues = Record<string, string | string[] | boolean | undefined>;

export function parseFlags(
  specs: readonly FlagSpec[],
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
): FlagValues {
  const options: Record<string, { type: "string" | "boolean"; multiple?: boolean }> = {};
  for (const s of specs)
    options[s.name] = {
      type: s.boolean ? "boolean" : "string",
      ...(s.multiple ? { multiple: true } : {}),
    };
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: false, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const out: FlagValues = {};
  for (const s of specs) {
    const v = parsed.values[s.name];
    const fromEnv = env[envName(s.name)];
    if (v !== undefined) out[s.name] = v as string | string[] | boolean;
    else if (fromEnv !== undefined && fromEnv !== "") {
      out[s.name] = s.boolean
        ? /^(1|true|yes)$/i.test(fromEnv)
        : s.multiple
          ? fromEnv.split(",")
          : fromEnv;
    } else out[s.name] = s.default;
  }
  return out;
}

/** `--help` or `-h` anywhere among a command's arguments. */
export function wantsHelp(argv: readonly string[]): boolean {
  return argv.includes("--help") || argv.includes("-h");
}

/**
 * A command's flags, each with what it does, its env twin and its default: what
 * `cni-driver <command> --help` prints, and what a usage error ends with.
 */
export function usage(command: string, specs: readonly FlagSpec[]): string {
  if (specs.length === 0) return `usage: cni-driver ${command}  (no flags)`;
  const lines = [
    `usage: cni-driver ${command} [flags]`,
    "",
    "Each flag may instead be set by its environment variable; the command line wins.",
    "",
  ];
  for (const s of specs) {
    lines.push(`  --${s.name}${s.boolean ? "" : " VALUE"}${s.multiple ? " (repeatable)" : ""}`);
    lines.push(`      ${s.help}`);
    const def = s.default === undefined ? "no default" : `default ${JSON.stringify(s.default)}`;
    lines.push(`      env ${envName(s.name)}; ${def}`);
  }
  return lines.join("\n");
}

export class UsageError extends Error {}
