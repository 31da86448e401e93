/**
 * One nftables table owned whole by its caller, written with `nft -f` as a
 * single transaction: the table is declared (so deleting it cannot fail when
 * it is absent), deleted and declared again with its full body. The kernel
 * applies the batch atomically, so no packet ever sees half a ruleset, and a
 * body the kernel refuses leaves the previous table as it was.
 */
import { existsSync } from "node:fs";
import { loadNativeAddon } from "../common/native-addon.js";
import { run } from "./run.js";

export const NFT_BIN =
  process.env.CNI_DRIVER_NFT_BIN ??
  ["/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft"].find((p) => existsSync(p)) ??
  "nft";

const NOT_INSTALLED = "nftables is not installed";

export type NftFamily = "ip" | "ip6" | "inet";

export class NftError extends Error {
  constructor(
    readonly action: string,
    readonly reason: string,
  ) {
    super(`nft ${action}: ${reason}`);
    this.name = "NftError";
  }

  /** nft is not installed. */
  get missingTool(): boolean {
    return this.reason.startsWith(NOT_INSTALLED);
  }
}

/** A table name nft parses bare (letters, digits, '_', '-', starting with a letter). */
function checkName(name: string): void {
  if (!/^[A-Za-z][A-Za-z0-9_-]{0,63}$/.test(name))
    throw new NftError(`table ${name}`, "not a plain table name");
}

interface NftablesAddon {
  available(): string | null;
  run(script: string): Promise<void>;
}

/**
 * libnftables in-process (native/nftables), when it loads and opens: a
 * transaction without a process start. Looked up once; without it, nft is
 * exec'd, the same transaction either way.
 */
let inProcess: NftablesAddon | null | undefined;

function nftablesAddon(): NftablesAddon | null {
  if (inProcess !== undefined) return inProcess;
  const got = loadNativeAddon<NftablesAddon>({
    file: "build/Release/cni_driver_nftables.node",
    envVar: "CNI_DRIVER_NFTABLES_ADDON",
  });
  inProcess =
    "addon" in got && got.addon.available() === null && !process.env.CNI_DRIVER_NFT_BIN
      ? got.addon
      : null;
  return inProcess;
}

/** How nftables transactions are written: "libnftables" in-process, or "nft" exec'd. */
export function nftBackendName(): "libnftables" | "nft" {
  return nftablesAddon() ? "libnftables" : "nft";
}

async function nftScript(action: string, script: string): Promise<void> {
  const addon = nftablesAddon();
  if (addon) {
    try {
      await addon.run(script);
      return;
    } catch (err) {
      // The script runs as a memory file: its line numbers are the script's.
      const reason = (err as Error).message.trim().replace(/^\/proc\/self\/fd\/\d+:/, "script:");
      throw new NftError(action, reason);
    }
  }
  let res: Awaited<ReturnType<typeof run>>;
  try {
    res = await run(NFT_BIN, ["-f", "-"], script, 30_000);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new NftError(
      action,
      code === "ENOENT"
        ? `${NOT_INSTALLED}: ${NFT_BIN} not found (Debian package nftables)`
        : String(err),
    );
  }
  if (res.code !== 0) throw new NftError(action, res.stderr.trim() || `exit ${res.code}`);
}

/**
 * Runs a script of nft commands (add, flush, delete of sets, chains, rules and
 * elements) as one transaction: all of it applies, or none.
 */
export async function applyNftScript(action: string, script: string): Promise<void> {
  await nftScript(action, script);
}

/** Replaces the table with `body` (the text between the table's braces) in one transaction. */
export async function replaceNftTable(
  family: NftFamily,
  name: string,
  body: string,
): Promise<void> {
  checkName(name);
  await nftScript(
    `replace table ${family} ${name}`,
    `table ${family} ${name}\ndelete table ${family} ${name}\ntable ${family} ${name} {\n${body}\n}\n`,
  );
}

/** Deletes the table; fine when it is absent, and when nft is not installed (then no table was made). */
export async function deleteNftTable(family: NftFamily, name: string): Promise<void> {
  checkName(name);
  try {
    await nftScript(
      `delete table ${family} ${name}`,
      `table ${family} ${name}\ndelete table ${family} ${name}\n`,
    );
  } catch (err) {
    if (err instanceof NftError && err.missingTool) return;
    throw err;
  }
}
