/**
 * A temporary ConfigMap volume for tests, written as kubelet writes one: the
 * writer itself is the driver's (src/driver/config/configmap-volume.ts), so the tests
 * and the driver's own projection of the API copy share one piece of code.
 */

import { mkdir, mkdtemp, readlink, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type ConfigMapData,
  DATA_DIR,
  writeConfigMapDir,
} from "../../src/driver/config/configmap-volume.js";

export {
  type ConfigMapData,
  DATA_DIR,
  NEW_DATA_DIR,
  writeConfigMapDir,
} from "../../src/driver/config/configmap-volume.js";

/** A temporary ConfigMap volume for one test. */
export class ConfigMapDir {
  private constructor(readonly dir: string) {}

  /** Creates an empty directory under the system temp dir (or `parent`). */
  static async create(parent: string = tmpdir()): Promise<ConfigMapDir> {
    await mkdir(parent, { recursive: true });
    return new ConfigMapDir(await mkdtemp(join(parent, "configmap-")));
  }

  /** One atomic update, as kubelet applies a changed ConfigMap. */
  write(data: ConfigMapData): Promise<boolean> {
    return writeConfigMapDir(this.dir, data);
  }

  /** The timestamped dir `..data` points at now. */
  currentVersionDir(): Promise<string> {
    return readlink(join(this.dir, DATA_DIR));
  }

  async remove(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}
