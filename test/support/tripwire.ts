/**
 * A unix socket that counts connections and hangs up on each: where a test
 * puts the driver's socket to prove that a call never reached it (bad input
 * changes nothing), or that one did.
 */
import { EventEmitter } from "node:events";
import net from "node:net";

export class Tripwire extends EventEmitter {
  connections = 0;
  private readonly server = net.createServer((s) => {
    this.connections++;
    s.destroy();
    this.emit("connection");
  });

  constructor(readonly path: string) {
    super();
  }

  listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(this.path, () => resolve());
    });
  }

  /** Resolves at the next connection. */
  nextConnection(): Promise<void> {
    return new Promise((resolve) => this.once("connection", () => resolve()));
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
