/**
 * Following objects of the API for the driver: a ListWatch seen through the
 * driver's handlers (its failures as one line, what it knows handed over on
 * every change), one object at a time or a whole collection per burst.
 */
import { describeKubeError } from "../../common/kube-errors.js";
import { ListWatch, type ListWatchOptions } from "../../common/list-watch.js";
import type {
  CollectionWatchHandlers,
  KubeObjectView,
  ObjectRef,
  ObjectWatchHandlers,
} from "./api.js";

/**
 * A common ListWatch seen through the driver's handlers: failures as one line
 * (`lastError`, until it is current again), and a hand-over of what it knows
 * on every change and whenever it is current again.
 */
export class DriverWatch {
  private error: string | undefined;
  private readonly lw: ListWatch<KubeObjectView>;

  constructor(
    options: Omit<ListWatchOptions<KubeObjectView>, "handlers">,
    handlers: { onError?(message: string): void; onSynced?(): void },
    private readonly handOver: (lw: ListWatch<KubeObjectView>) => void,
    /** Whatever the hand-over keeps pending, dropped on stop(). */
    private readonly onStop?: () => void,
    /** Each object's own events, for those who follow a collection object by object. */
    each?: {
      add(o: KubeObjectView): void;
      update(o: KubeObjectView): void;
      delete(o: KubeObjectView): void;
    },
  ) {
    const changed = () => this.handOver(this.lw);
    this.lw = new ListWatch<KubeObjectView>({
      ...options,
      handlers: {
        add: (o) => {
          each?.add(o);
          changed();
        },
        update: (o) => {
          each?.update(o);
          changed();
        },
        delete: (o) => {
          each?.delete(o);
          changed();
        },
        synced: () => {
          this.error = undefined;
          changed();
          handlers.onSynced?.();
        },
        error: (err) => {
          this.error = describeKubeError(err);
          handlers.onError?.(this.error);
        },
      },
    });
  }

  get synced(): boolean {
    return this.lw.synced;
  }

  get lastError(): string | undefined {
    return this.error;
  }

  start(): void {
    this.lw.start();
  }

  async stop(): Promise<void> {
    this.onStop?.();
    await this.lw.stop();
  }
}

/** One object followed: `onObject` whenever its resourceVersion (or its existence) changes. */
export function followObject(
  options: Omit<ListWatchOptions<KubeObjectView>, "handlers">,
  ref: ObjectRef,
  handlers: ObjectWatchHandlers,
): DriverWatch {
  /** The resourceVersion last reported; null: reported absent; undefined: nothing yet. */
  let lastSeen: string | null | undefined;
  return new DriverWatch(options, handlers, (lw) => {
    const obj = lw.get(ref.name, ref.namespace);
    const seen = obj ? (obj.metadata?.resourceVersion ?? "") : null;
    if (seen === lastSeen && seen !== "") return;
    lastSeen = seen;
    handlers.onObject(obj);
  });
}

/**
 * Every object of a collection: the whole list on each change, never before
 * the first list. Each event would hand over (and the handler digest) the
 * whole list: thousands of Nodes appearing at once would cost the square of
 * their number. So one hand-over per burst, after the events already read.
 */
export function followCollection(
  options: Omit<ListWatchOptions<KubeObjectView>, "handlers">,
  handlers: CollectionWatchHandlers,
): DriverWatch {
  let lastVersions: string | undefined;
  let pending: NodeJS.Immediate | undefined;
  const deliver = (lw: ListWatch<KubeObjectView>) => {
    pending = undefined;
    const all = lw.list();
    const versions = all.map((o) => `${o.metadata?.name}@${o.metadata?.resourceVersion}`).join(",");
    if (versions === lastVersions) return;
    lastVersions = versions;
    handlers.onList(all);
  };
  return new DriverWatch(
    options,
    handlers,
    (lw) => {
      if (lw.hasSynced) pending ??= setImmediate(() => deliver(lw));
    },
    () => {
      if (pending) clearImmediate(pending);
      pending = undefined;
    },
  );
}
