/**
 * The Prometheus text exposition format 0.0.4, the pieces every registry of ours
 * shares (the driver's and the MidoNet controller's). A general client library
 * would only add weight to daemons whose series are known in advance.
 */

/** Upper bounds of the call-latency histogram, in seconds: 1 ms to 60 s. */
export const DURATION_BUCKETS: readonly number[] = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
];

export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** Label values escape backslash, double quote and newline (exposition format spec). */
export function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

/** HELP text escapes backslash and newline only. */
export function escapeHelp(text: string): string {
  return text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

/** Sample values as Go's strconv.FormatFloat(v, 'g', -1, 64) spells the special ones. */
export function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Number.POSITIVE_INFINITY) return "+Inf";
  if (v === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(v);
}
