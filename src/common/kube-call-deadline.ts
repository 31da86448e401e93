/**
 * A deadline on one @kubernetes/client-node call: 1.x sets no timeout of its
 * own, so a call to an API server that accepted the connection and never
 * answers would wait forever. The middleware hands the request an AbortSignal
 * that fires after `timeoutMs`. Takes client-node's Observable class, so the
 * driver can keep loading that library lazily.
 */
type ObservableClass = new <T>(promise: Promise<T>) => unknown;

export function callDeadline(Observable: ObservableClass, timeoutMs: number) {
  const deadline = {
    pre: (ctx: { setSignal(s: AbortSignal): void }) => {
      ctx.setSignal(AbortSignal.timeout(timeoutMs));
      return new Observable(Promise.resolve(ctx));
    },
    post: <R>(rsp: R) => new Observable(Promise.resolve(rsp)),
  };
  // biome-ignore lint/suspicious/noExplicitAny: client-node's middleware types are generated per request kind.
  return { middleware: [deadline as any], middlewareMergeStrategy: "append" as const };
}
