/**
 * The driver's own CNI error codes (the spec reserves 100 and up for plugins).
 * Stable: runtimes and operators may match on them.
 */
export const DriverErrorCode = {
  /** Creating, configuring or removing a link, address or route failed. */
  PlumbingFailed: 100,
  /** CHECK found the attachment different from its cached result. */
  CheckFailed: 101,
  /** IPAM answered without what the driver needs (e.g. no address). */
  IpamFailed: 102,
} as const;
