/**
 * One nftables table owned whole by its caller, written with `nft -f` as a
 * single transaction: the table is declared (so deleting it cannot fail when
 * it is absent), deleted and declared again with its full body. The kernel
 * applies the batch atomically, so no packet ever sees half a ruleset, and a
 * body the kernel refuses leaves the previous table as it was.
 *
 * Changes made only of set and verdict map elements go to the kernel directly
 * (applyNftElements, native/nftables' `elements`): libnftables takes some
 * 0.2 ms for a few `add element`, and over 12 ms for any `delete element`.
 */
import { existsSync } from "node:fs";
import { addonOnce, addonOrNull } from "../common/native-addon.js";
import { parseIp } from "../net/ip.js";
import { run } from "./run.js";

export const NFT_BIN =
  process.env.CNI_DRIVER_NFT_BIN ??
  ["/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft"].find((p) => existsSync(p)) ??
  "nft";

const NOT_INSTALLED = "nftables is not installed";

export type NftFamily = "ip" | "ip6" | "inet" | "bridge";

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

/** One change of the addon's `elements`: keyLength-byte keys back to back, in network order. */
interface AddonElementChange {
  op: "add" | "delete";
  set: string;
  keyLength: KeyLength;
  keys: Buffer;
  jumps?: readonly string[];
}

interface NftablesAddon {
  available(): string | null;
  run(script: string): Promise<void>;
  /** One nfnetlink batch of element changes in table inet `table` (absent from older builds). */
  elements?(table: string, changes: readonly AddonElementChange[]): Promise<void>;
  /** One transaction of nf_tables messages (absent from older builds). */
  batch?(messages: Buffer, count: number): Promise<void>;
}

/**
 * libnftables in-process (native/nftables), when it loads and opens: a
 * transaction without a process start. Looked up once; without it, or with
 * CNI_DRIVER_NFT_BIN set, nft is exec'd, the same transaction either way.
 */
const loadNftablesAddon = addonOnce<NftablesAddon>(
  { file: "build/Release/cni_driver_nftables.node", envVar: "CNI_DRIVER_NFTABLES_ADDON" },
  (addon) =>
    addon.available() ?? (process.env.CNI_DRIVER_NFT_BIN ? "CNI_DRIVER_NFT_BIN is set" : null),
);

function nftablesAddon(): NftablesAddon | null {
  return addonOrNull(loadNftablesAddon());
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

/** Deletes the table if it is there; answers whether it was (false, too, without nft). */
export async function removeNftTable(family: NftFamily, name: string): Promise<boolean> {
  checkName(name);
  try {
    await nftScript(`delete table ${family} ${name}`, `delete table ${family} ${name}\n`);
    return true;
  } catch (err) {
    if (
      err instanceof NftError &&
      (err.missingTool || /No such file or directory/.test(err.message))
    )
      return false;
    throw err;
  }
}

export interface NftElementChange {
  op: "add" | "delete";
  set: string;
  /** As nft writes them: addresses, or `address . protocol . port` (one shape and family per change). */
  keys: readonly string[];
  /** Verdict maps: the chain each key jumps to. */
  jumps?: readonly string[];
}

/** Whether element changes can be written in-process (the addon has `elements`); else callers write text. */
export function nftElementsInProcess(): boolean {
  return typeof nftablesAddon()?.elements === "function";
}

/** An address (4, 16), or an address . protocol . port (12, 24). */
type KeyLength = 4 | 16 | 12 | 24;

const PROTOCOL_NUMBERS: Record<string, number> = { tcp: 6, udp: 17, sctp: 132 };

/**
 * One key as the kernel takes it: an address, 4 bytes for IPv4 and 16 for
 * IPv6 (an IPv4-mapped IPv6 address is 16, as nft writes it into an ipv6_addr
 * set); or `address . protocol . port`, each part in 4-byte registers as nft
 * lays out a concatenation (protocol one byte, port two in network order).
 */
function encodeKey(key: string, v6: boolean): Uint8Array | undefined {
  const [address, protocol, port, ...rest] = key.split(" . ");
  const ip = parseIp(address ?? "");
  if (!ip || (address ?? "").includes(":") !== v6 || rest.length > 0) return undefined;
  const addr =
    ip.bytes.length === (v6 ? 16 : 4)
      ? ip.bytes
      : Uint8Array.of(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...ip.bytes);
  if (protocol === undefined) return port === undefined ? addr : undefined;
  const proto = PROTOCOL_NUMBERS[protocol];
  const p = Number(port);
  if (proto === undefined || !Number.isInteger(p) || p < 0 || p > 65535) return undefined;
  return Uint8Array.of(...addr, proto, 0, 0, 0, p >> 8, p & 0xff, 0, 0);
}

/** The keys of a change, back to back; the family and shape of the first key are the change's. */
function encodeKeys(
  table: string,
  change: NftElementChange,
): { keyLength: KeyLength; keys: Buffer } {
  const first = change.keys[0] ?? "";
  const v6 = (first.split(" . ")[0] ?? "").includes(":");
  const keyLength = ((v6 ? 16 : 4) + (first.includes(" . ") ? 8 : 0)) as KeyLength;
  const keys = Buffer.allocUnsafe(change.keys.length * keyLength);
  change.keys.forEach((key, i) => {
    const bytes = encodeKey(key, v6);
    if (bytes?.length !== keyLength) {
      const want = `${v6 ? "an IPv6" : "an IPv4"} address${first.includes(" . ") ? " . protocol . port" : ""}`;
      throw new Error(`${describe(table, change)}: ${key} is not ${want} (one shape per change)`);
    }
    keys.set(bytes, i * keyLength);
  });
  return { keyLength, keys };
}

function describe(table: string, change: NftElementChange): string {
  return `${change.op} element inet ${table} ${change.set}`;
}

/**
 * One atomic batch of element changes in table inet <table>. For hash sets
 * (no interval flag) of addresses or of address . inet_proto . inet_service,
 * and verdict maps keyed by address: an add of a present element is no
 * error, a delete of an absent one fails the whole batch. Written
 * in-process as nf_tables messages: only where nftElementsInProcess() says
 * so (a caller without the addon writes the same changes as nft text).
 */
export async function applyNftElements(
  action: string,
  table: string,
  changes: readonly NftElementChange[],
): Promise<void> {
  const some = changes.filter((c) => c.keys.length > 0);
  if (some.length === 0) return;
  for (const c of some) {
    if (c.jumps && c.jumps.length !== c.keys.length)
      throw new NftError(
        action,
        `${describe(table, c)}: ${c.jumps.length} jumps for ${c.keys.length} keys`,
      );
  }
  const addon = nftablesAddon();
  if (!addon?.elements)
    throw new NftError(action, "element batches need the nftables addon (nftElementsInProcess)");
  let encoded: AddonElementChange[];
  try {
    encoded = some.map((c) => ({
      op: c.op,
      set: c.set,
      ...encodeKeys(table, c),
      ...(c.jumps && c.op === "add" ? { jumps: c.jumps } : {}),
    }));
  } catch (err) {
    throw new NftError(action, (err as Error).message);
  }
  try {
    await addon.elements(table, encoded);
  } catch (err) {
    throw new NftError(action, (err as Error).message.trim());
  }
}

/** Whether whole nf_tables batches can be sent in-process (the addon has `batch`). */
export function nftBatchInProcess(): boolean {
  return typeof nftablesAddon()?.batch === "function";
}

/** Messages for applyNftBatch (src/plumbing/nft-netlink), and what each does, for errors. */
// Exported for its tests only (integration/nftables-elements.test.ts, integration/services-netlink.test.ts).
export interface NftBatch {
  messages: Buffer;
  count: number;
  describe(index: number): string | undefined;
}

/**
 * Sends the messages as one transaction (all of them apply or none) over the
 * addon's kept socket. A refusal names the message the kernel refused and
 * its reason; only where nftBatchInProcess() says so.
 */
export async function applyNftBatch(action: string, batch: NftBatch): Promise<void> {
  if (batch.count === 0) return;
  const addon = nftablesAddon();
  if (!addon?.batch)
    throw new NftError(action, "nf_tables batches need the nftables addon (nftBatchInProcess)");
  try {
    await addon.batch(batch.messages, batch.count);
  } catch (err) {
    const e = err as Error & { index?: number };
    const what =
      e.index === undefined || e.index < -1
        ? ""
        : e.index === -1
          ? "the commit: "
          : `${batch.describe(e.index) ?? `message ${e.index}`}: `;
    throw new NftError(action, `${what}${e.message.trim()}`);
  }
}
