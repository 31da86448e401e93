/**
 * `node:http` and `node:https`, loaded through `require` rather than `import`.
 *
 * Why: Node builds an ES module's view of a builtin by reading every one of its
 * exports, and `node:http`'s include lazy getters (WebSocket, CloseEvent,
 * MessageEvent) that load Node's bundled undici to answer. An `import` of
 * `node:http` therefore compiles and keeps undici, fetch and WebSocket that the
 * daemons never use: 12.9 MiB of RSS on Node 24 against 2.0 MiB through
 * `require` (measured in a bare process; bench/memory shows it on the driver).
 * Every module of src takes these two from here (test/unit/node-http.test.ts).
 */
import type * as Http from "node:http";
import type * as Https from "node:https";
import { createRequire } from "node:module";

const load = createRequire(import.meta.url);

export const http = load("node:http") as typeof Http;
export const https = load("node:https") as typeof Https;
