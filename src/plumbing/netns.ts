/** Network namespaces named by path, the way CNI hands them over. */
import { stat } from "node:fs/promises";

/**
 * Whether the netns path still names something. DEL must tolerate a vanished
 * namespace (CRI-O sends a path that is gone; containerd may send "").
 */
export async function netnsExists(path: string | undefined): Promise<boolean> {
  if (!path) return false;
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

/** The name of a netns under /run/netns (what `ip -n` takes); undefined for any other path. */
export function netnsName(path: string): string | undefined {
  return /^(?:\/var)?\/run\/netns\/([^/]+)$/.exec(path)?.[1];
}
