/**
 * `--configmap NAMESPACE/NAME`: the driver's ConfigMap followed through the API
 * as well as through kubelet's volume. kubelet refreshes a mounted ConfigMap on
 * its own sync period (a minute or more); a watch sees an edit within
 * milliseconds. Each version the watch delivers is projected as files into a
 * private directory (`<state-dir>/configmap-api`, kubelet's atomic `..data`
 * layout, written by the same writer), and the ConfigSource reads whichever
 * copy is the right one at each load (its `resolveDir`):
 *
 * - the API copy whenever it exists and the watch is healthy: it is then the
 *   newest version there is, and the mount can only lag behind it;
 * - the mounted directory while there is no API copy: no API, not reached yet
 *   since start (a copy left by an earlier run is not trusted: it is removed at
 *   start), or the ConfigMap does not exist (deleted: kubelet keeps the last
 *   content in the volume, and so does the driver);
 * - while the watch is failing, the API copy stays in use unless kubelet swaps
 *   the mount to content the driver never saw while the API worked: kubelet
 *   reached the API when the driver could not, so that is the newer version.
 *   "Seen" is every version the watch delivered and every mount content read
 *   while the watch was healthy (then the mount could not be newer than the API
 *   copy), so a mount that merely catches up to an older version never rolls
 *   the configuration back.
 *
 * A change of choice or content asks the ConfigSource to reload; the mount's
 * own changes reach it through the ConfigSource's watcher as before.
 */
import { mkdir, rm } from "node:fs/promises";
import type pino from "pino";
import { readConfigDir } from "../config/config-source.js";
import { writeConfigMapDir } from "../config/configmap-volume.js";
import { contentHash } from "../config/network-config.js";
import type { KubeApi, KubeObjectView, ObjectWatch } from "./api.js";

export interface ConfigMapRef {
  namespace: string;
  name: string;
}

/** `NAMESPACE/NAME` → ref; throws on anything else. */
export function parseConfigMapRef(text: string): ConfigMapRef {
  const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-.a-z0-9]*[a-z0-9])?)$/.exec(text);
  if (!m) throw new Error(`--configmap must be NAMESPACE/NAME, not ${JSON.stringify(text)}`);
  return { namespace: m[1] as string, name: m[3] as string };
}

/** A ConfigMap's keys as the files kubelet would project: `data` as UTF-8, `binaryData` decoded. */
// Exported for its tests only (integration/driver-kube.test.ts).
export function configMapFiles(cm: KubeObjectView): Map<string, Uint8Array> {
  const files = new Map<string, Uint8Array>();
  const data = (cm.data ?? {}) as Record<string, unknown>;
  const binary = (cm.binaryData ?? {}) as Record<string, unknown>;
  for (const [k, v] of Object.entries(data))
    if (typeof v === "string") files.set(k, Buffer.from(v, "utf8"));
  for (const [k, v] of Object.entries(binary))
    if (typeof v === "string") files.set(k, Buffer.from(v, "base64"));
  return files;
}

type ConfigCopy = "api" | "mount";

interface CopyChoiceInput {
  /** Content hash of the API copy; undefined: there is none. */
  apiCopy?: string;
  /** The watch is healthy (listed, no error since). */
  apiSynced: boolean;
  /** Content hash of the mounted directory; undefined: unreadable. */
  mountHash?: string;
  /** Contents known not to be newer than the API copy. */
  seen: ReadonlySet<string>;
}

/** Which copy a load reads (the rules in the module comment). */
// Exported for its tests only (integration/driver-kube.test.ts).
export function chooseConfigCopy(s: CopyChoiceInput): ConfigCopy {
  if (s.apiCopy === undefined) return "mount";
  if (s.apiSynced) return "api";
  if (s.mountHash !== undefined && s.mountHash !== s.apiCopy && !s.seen.has(s.mountHash))
    return "mount";
  return "api";
}

/** Versions remembered as seen; older ones are forgotten. */
const SEEN_LIMIT = 64;

export interface ConfigMapMirrorOptions {
  ref: ConfigMapRef;
  /** The mounted volume (`--config-dir`). */
  mountDir: string;
  /** Where the API copy is projected (`<state-dir>/configmap-api`). */
  copyDir: string;
  api: Promise<KubeApi | undefined>;
  /** Asks the ConfigSource to load again. */
  reload: () => Promise<void>;
  logger: pino.Logger;
}

export class ConfigMapMirror {
  private watch: ObjectWatch | undefined;
  /** The API copy on disk: its content hash and resourceVersion. */
  private copy: { hash: string; resourceVersion?: string } | undefined;
  private readonly seen = new Set<string>();
  /** What the last `configDir()` answered. */
  private handed: { dir: string; hash?: string } | undefined;
  private writes: Promise<void> = Promise.resolve();
  private stopped = false;
  private readonly log: pino.Logger;

  constructor(private readonly o: ConfigMapMirrorOptions) {
    this.log = o.logger.child({
      component: "configmap",
      configmap: `${o.ref.namespace}/${o.ref.name}`,
    });
  }

  /** Clears a copy left by an earlier run; the watch starts once the API is connected. */
  async start(): Promise<void> {
    await rm(this.o.copyDir, { recursive: true, force: true });
    await mkdir(this.o.copyDir, { recursive: true, mode: 0o700 });
    this.o.api.then(
      (api) => {
        if (!api || this.stopped) return;
        this.watch = api.watchObject("configmaps", this.o.ref, {
          onObject: (cm) => {
            this.writes = this.writes.then(() => this.onConfigMap(cm));
          },
          onError: (message) => {
            this.log.warn({ err: message }, "watching the ConfigMap failed; retrying");
          },
          onSynced: () => {
            this.writes = this.writes.then(() => this.refresh());
          },
        });
      },
      () => {},
    );
  }

  /** The directory the ConfigSource reads now (its `resolveDir`). */
  async configDir(): Promise<string> {
    const c = await this.decide();
    if (c.dir !== this.handed?.dir) {
      this.log.info(
        { dir: c.dir },
        c.dir === this.o.copyDir
          ? "network configuration follows the ConfigMap through the API"
          : "network configuration follows the mounted ConfigMap",
      );
    }
    this.handed = c;
    return c.dir;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.watch?.stop();
    await this.writes;
  }

  private async decide(): Promise<{ dir: string; hash?: string }> {
    let mountHash: string | undefined;
    try {
      mountHash = contentHash(await readConfigDir(this.o.mountDir));
    } catch {
      mountHash = undefined;
    }
    const apiSynced = this.watch?.synced ?? false;
    if (apiSynced && mountHash !== undefined) this.remember(mountHash);
    const pick = chooseConfigCopy({
      apiCopy: this.copy?.hash,
      apiSynced,
      mountHash,
      seen: this.seen,
    });
    return pick === "api" && this.copy
      ? { dir: this.o.copyDir, hash: this.copy.hash }
      : { dir: this.o.mountDir, hash: mountHash };
  }

  private async onConfigMap(cm: KubeObjectView | undefined): Promise<void> {
    if (this.stopped) return;
    if (!cm) {
      if (this.copy) this.log.warn("the ConfigMap does not exist; following the mounted copy");
      this.copy = undefined;
      await rm(this.o.copyDir, { recursive: true, force: true }).catch(() => {});
      await mkdir(this.o.copyDir, { recursive: true, mode: 0o700 }).catch(() => {});
      await this.refresh();
      return;
    }
    const files = configMapFiles(cm);
    const hash = contentHash(files);
    try {
      await writeConfigMapDir(this.o.copyDir, Object.fromEntries(files));
    } catch (err) {
      this.log.error(
        { dir: this.o.copyDir, err: String(err) },
        "projecting the ConfigMap failed; following the mounted copy",
      );
      this.copy = undefined;
      await this.refresh();
      return;
    }
    this.copy = { hash, resourceVersion: cm.metadata?.resourceVersion };
    this.remember(hash);
    this.log.debug(
      { resourceVersion: cm.metadata?.resourceVersion, hash },
      "ConfigMap from the API",
    );
    await this.refresh();
  }

  /** Reloads when the copy to read, or its content, is not what the ConfigSource last read. */
  private async refresh(): Promise<void> {
    if (this.stopped) return;
    const c = await this.decide();
    if (c.dir === this.handed?.dir && c.hash === this.handed?.hash) return;
    await this.o.reload().catch((err) => this.log.error({ err: String(err) }, "reload failed"));
  }

  private remember(hash: string): void {
    this.seen.delete(hash);
    this.seen.add(hash);
    if (this.seen.size > SEEN_LIMIT) this.seen.delete(this.seen.values().next().value as string);
  }
}
