/**
 * The host conflist appears only once the driver can serve (AWS #330, Cilium
 * #16602), and is rewritten when it would change. Checked on every config
 * event and once a second until written.
 */
import type pino from "pino";
import type { ConfigSource } from "../config/config-source.js";
import { HOST_CONFLIST_NAME, installHostConflist, type ShimTarget } from "./host-install.js";

export function gateHostConflist(
  dir: string,
  shim: ShimTarget,
  notReadyReasons: () => string[],
  config: ConfigSource,
  logger: pino.Logger,
): { stop(): void } {
  let writing = false;
  const attempt = () => {
    if (writing || notReadyReasons().length > 0) return;
    writing = true;
    installHostConflist(dir, shim)
      .then((written) => {
        if (written) logger.info({ dir, file: HOST_CONFLIST_NAME }, "host conflist written");
      })
      .catch((err) => logger.error({ dir, err: String(err) }, "writing the host conflist failed"))
      .finally(() => {
        writing = false;
      });
  };
  const timer = setInterval(attempt, 1000);
  timer.unref();
  config.on("reload", attempt);
  attempt();
  return {
    stop() {
      clearInterval(timer);
      config.off("reload", attempt);
    },
  };
}
