/**
 * Who owns a pod's midonet.org/mac-address annotation: seeded from the result
 * cache at start (newest ADD of a pod wins; attachments without pod identity
 * or MAC skipped), kept by ADD and DEL, and consulted by the pod observer so
 * that an old sandbox's DEL spares the annotation of a newer one.
 */
import { expect } from "chai";
import pino from "pino";
import { CACHE_KIND_V1 } from "../../src/cni/cache.js";
import type { AnyResult } from "../../src/cni/types.js";
import type { ListedAttachment } from "../../src/driver/chain/result-cache.js";
import {
  type AnnotationOwner,
  AnnotationOwners,
  annotationOwnersFromCache,
} from "../../src/driver/kube/annotation-owners.js";
import type { KubeApi } from "../../src/driver/kube/api.js";
import { KubeIntegration, podObserver } from "../../src/driver/kube/integration.js";
import { PodAnnotationQueue } from "../../src/driver/kube/pod-annotations.js";
import { PodEventRecorder } from "../../src/driver/kube/pod-events.js";
import type { PodAttachmentInfo } from "../../src/driver/rpc/service.js";
import { ANNOTATION_MAC_ADDRESS } from "../../src/midonet/node-contract.js";

const logger = pino({ level: "silent" });

interface Attachment {
  id: string;
  ifName?: string;
  namespace?: string;
  name?: string;
  mac?: string;
  mtimeMs?: number;
  /** Replaces the result built from `mac`. */
  result?: Record<string, unknown>;
  /** Replaces the CNI_ARGS built from `namespace` and `name`. */
  cniArgs?: [string, string][];
}

/** A cached attachment of pod default/web (unless told otherwise), as the driver's ADD caches it. */
function cached(a: Attachment): ListedAttachment {
  const ifName = a.ifName ?? "eth0";
  const namespace = a.namespace ?? "default";
  const name = a.name ?? "web";
  const entry: ListedAttachment = {
    kind: CACHE_KIND_V1,
    containerId: a.id,
    config: new Uint8Array(),
    ifName,
    networkName: "pod-network",
    netns: `/run/netns/${a.id}`,
    cniArgs: a.cniArgs ?? [
      ["IgnoreUnknown", "1"],
      ["K8S_POD_NAMESPACE", namespace],
      ["K8S_POD_NAME", name],
      ["K8S_POD_INFRA_CONTAINER_ID", a.id],
    ],
    result: a.result ?? {
      cniVersion: "1.0.0",
      interfaces: [
        { name: "cdtbr0", mac: "02:00:00:00:00:fe" },
        { name: `mido${a.id}`, mac: "02:00:00:00:00:ff" },
        { name: ifName, mac: a.mac ?? "02:00:00:00:00:01", sandbox: `/run/netns/${a.id}` },
      ],
      ips: [{ address: "10.244.0.5/24", interface: 2 }],
    },
  };
  if (a.mtimeMs !== undefined) entry.mtimeMs = a.mtimeMs;
  return entry;
}

/** An owner as one line: `namespace/name containerId ifName mac`. */
const line = (o: AnnotationOwner): string =>
  `${o.pod.namespace}/${o.pod.name} ${o.attachment.containerId} ${o.attachment.ifName} ${o.mac}`;

describe("annotationOwnersFromCache", () => {
  const cases: [string, Attachment[], string[]][] = [
    ["an empty cache", [], []],
    [
      "one attachment: its MAC, lower-cased",
      [{ id: "a", mac: "0A:58:0A:F4:00:05", mtimeMs: 1 }],
      ["default/web a eth0 0a:58:0a:f4:00:05"],
    ],
    [
      "two sandboxes of a pod: the newer ADD wins",
      [
        { id: "a", mac: "02:00:00:00:00:0a", mtimeMs: 1000 },
        { id: "b", mac: "02:00:00:00:00:0b", mtimeMs: 2000 },
      ],
      ["default/web b eth0 02:00:00:00:00:0b"],
    ],
    [
      "the newer ADD wins when listed first",
      [
        { id: "b", mac: "02:00:00:00:00:0b", mtimeMs: 2000 },
        { id: "a", mac: "02:00:00:00:00:0a", mtimeMs: 1000 },
      ],
      ["default/web b eth0 02:00:00:00:00:0b"],
    ],
    [
      "fractions of a millisecond count",
      [
        { id: "a", mac: "02:00:00:00:00:0a", mtimeMs: 1000.25 },
        { id: "b", mac: "02:00:00:00:00:0b", mtimeMs: 1000.5 },
        { id: "c", mac: "02:00:00:00:00:0c", mtimeMs: 1000.125 },
      ],
      ["default/web b eth0 02:00:00:00:00:0b"],
    ],
    [
      "no mtime counts as oldest",
      [
        { id: "a", mac: "02:00:00:00:00:0a" },
        { id: "b", mac: "02:00:00:00:00:0b", mtimeMs: 0 },
      ],
      ["default/web b eth0 02:00:00:00:00:0b"],
    ],
    [
      "equal mtimes: the first listed keeps it",
      [
        { id: "a", mac: "02:00:00:00:00:0a", mtimeMs: 5 },
        { id: "b", mac: "02:00:00:00:00:0b", mtimeMs: 5 },
      ],
      ["default/web a eth0 02:00:00:00:00:0a"],
    ],
    [
      "each pod its own owner, in the order pods are met; namespaces keep same-named pods apart",
      [
        { id: "a", name: "web", mac: "02:00:00:00:00:0a", mtimeMs: 1 },
        { id: "x", name: "db", mac: "02:00:00:00:00:0d", mtimeMs: 9 },
        { id: "b", name: "web", mac: "02:00:00:00:00:0b", mtimeMs: 2 },
        { id: "y", namespace: "prod", name: "web", mac: "02:00:00:00:00:0e", mtimeMs: 0 },
      ],
      [
        "default/web b eth0 02:00:00:00:00:0b",
        "default/db x eth0 02:00:00:00:00:0d",
        "prod/web y eth0 02:00:00:00:00:0e",
      ],
    ],
    [
      "the MAC of the attachment's own interface, and eth0's only (a second interface owns nothing)",
      [
        {
          id: "a",
          ifName: "net1",
          mtimeMs: 2,
          result: {
            cniVersion: "1.0.0",
            interfaces: [
              { name: "eth0", mac: "02:00:00:00:00:e0", sandbox: "/run/netns/a" },
              { name: "net1", mac: "02:00:00:00:00:e1", sandbox: "/run/netns/a" },
            ],
          },
        },
        {
          id: "a",
          mtimeMs: 1,
          result: {
            cniVersion: "1.0.0",
            interfaces: [
              { name: "net1", mac: "02:00:00:00:00:e1", sandbox: "/run/netns/a" },
              { name: "eth0", mac: "02:00:00:00:00:e0", sandbox: "/run/netns/a" },
            ],
          },
        },
      ],
      ["default/web a eth0 02:00:00:00:00:e0"],
    ],
    [
      "a 0.4.0 result",
      [
        {
          id: "a",
          mtimeMs: 1,
          result: {
            cniVersion: "0.4.0",
            interfaces: [{ name: "eth0", mac: "02:00:00:00:04:00", sandbox: "/run/netns/a" }],
            ips: [{ version: "4", address: "10.244.0.5/24", interface: 0 }],
          },
        },
      ],
      ["default/web a eth0 02:00:00:00:04:00"],
    ],
    [
      "pod identity in any order of CNI_ARGS, the last of a repeated key winning",
      [
        {
          id: "a",
          mac: "02:00:00:00:00:0a",
          mtimeMs: 1,
          cniArgs: [
            ["K8S_POD_NAME", "old"],
            ["K8S_POD_NAME", "web"],
            ["IgnoreUnknown", "1"],
            ["K8S_POD_NAMESPACE", "default"],
          ],
        },
      ],
      ["default/web a eth0 02:00:00:00:00:0a"],
    ],
    ["skips an attachment without CNI_ARGS (podman)", [{ id: "a", cniArgs: [] }], []],
    [
      "skips an attachment without a pod namespace",
      [{ id: "a", cniArgs: [["K8S_POD_NAME", "web"]] }],
      [],
    ],
    [
      "skips an attachment without a pod name",
      [{ id: "a", cniArgs: [["K8S_POD_NAMESPACE", "default"]] }],
      [],
    ],
    [
      "skips an attachment whose pod name is empty",
      [
        {
          id: "a",
          cniArgs: [
            ["K8S_POD_NAMESPACE", "default"],
            ["K8S_POD_NAME", ""],
          ],
        },
      ],
      [],
    ],
    ["skips a result without interfaces", [{ id: "a", result: { cniVersion: "1.0.0" } }], []],
    [
      "skips a result without an interface in the pod",
      [
        {
          id: "a",
          result: {
            cniVersion: "1.0.0",
            interfaces: [{ name: "host0", mac: "02:00:00:00:00:01" }],
          },
        },
      ],
      [],
    ],
    [
      "skips a result that does not read (an unknown version)",
      [{ id: "a", result: { cniVersion: "9.9.9", interfaces: [] } }],
      [],
    ],
    [
      "skips a result that does not read (interfaces not a list)",
      [{ id: "a", result: { cniVersion: "1.0.0", interfaces: "eth0" } }],
      [],
    ],
    [
      "a newer attachment without a MAC does not take the pod from an older one",
      [
        { id: "a", mac: "02:00:00:00:00:0a", mtimeMs: 1 },
        { id: "b", mtimeMs: 2, result: { cniVersion: "1.0.0", interfaces: [] } },
      ],
      ["default/web a eth0 02:00:00:00:00:0a"],
    ],
  ];
  for (const [what, attachments, want] of cases) {
    it(what, () => {
      expect(annotationOwnersFromCache(attachments.map(cached)).map(line)).to.deep.equal(want);
    });
  }

  it("skips an attachment without a cached result", () => {
    const entry = cached({ id: "a", mtimeMs: 1 });
    delete entry.result;
    expect(annotationOwnersFromCache([entry])).to.deep.equal([]);
  });
});

describe("AnnotationOwners", () => {
  const web = { namespace: "default", name: "web" };
  const a = { containerId: "a", ifName: "eth0" };
  const b = { containerId: "b", ifName: "eth0" };

  it("lets only the owner's DEL remove the annotation, and forgets the owner then", () => {
    const owners = new AnnotationOwners();
    owners.claim(web, a);
    owners.claim(web, b);
    expect(owners.release(web, a), "A's DEL after B's ADD").to.equal(false);
    expect(owners.ownerOf(web)).to.deep.equal(b);
    expect(owners.release(web, { containerId: "b", ifName: "net1" }), "another ifname").to.equal(
      false,
    );
    expect(owners.release(web, b)).to.equal(true);
    expect(owners.ownerOf(web)).to.equal(undefined);
    expect(owners.size).to.equal(0);
  });

  it("lets any DEL remove the annotation of a pod with no known owner", () => {
    expect(new AnnotationOwners().release(web, a)).to.equal(true);
  });

  it("seeds pods not yet claimed, and leaves a claimed pod to its claimant", () => {
    const owners = new AnnotationOwners();
    owners.claim(web, b);
    const db = { namespace: "default", name: "db" };
    owners.seed([
      { pod: web, attachment: a, mac: "02:00:00:00:00:0a" },
      { pod: db, attachment: { containerId: "x", ifName: "eth0" }, mac: "02:00:00:00:00:0d" },
    ]);
    expect(owners.ownerOf(web)).to.deep.equal(b);
    expect(owners.ownerOf(db)).to.deep.equal({ containerId: "x", ifName: "eth0" });
    expect(owners.size).to.equal(2);
  });
});

describe("podObserver with owners seeded at start", () => {
  type Patch = { pod: string; annotations: Record<string, string | null> };
  let patches: Patch[];
  let annotations: PodAnnotationQueue;
  let events: PodEventRecorder;

  beforeEach(() => {
    patches = [];
    const api = {
      async patchPodAnnotations(
        ref: { namespace: string; name: string },
        want: Record<string, string | null>,
      ) {
        patches.push({ pod: `${ref.namespace}/${ref.name}`, annotations: { ...want } });
      },
    } as unknown as KubeApi;
    annotations = new PodAnnotationQueue({ api: Promise.resolve(api), logger });
    events = new PodEventRecorder({ api: Promise.resolve(undefined), logger });
  });

  afterEach(() => {
    annotations.close();
    events.close();
  });

  const info = (containerId: string): PodAttachmentInfo => ({
    pod: { namespace: "default", name: "web" },
    containerId,
    ifName: "eth0",
    network: "pod-network",
  });

  /** The cache after ADD A then ADD B of pod default/web, as a restarted driver finds it. */
  const restartedCache = [
    cached({ id: "a", mac: "02:00:00:00:00:0a", mtimeMs: 1000 }),
    cached({ id: "b", mac: "02:00:00:00:00:0b", mtimeMs: 2000 }),
  ];

  it("a late DEL of the old sandbox leaves the annotation; the new one's DEL removes it", async () => {
    const owners = new AnnotationOwners();
    owners.seed(annotationOwnersFromCache(restartedCache));
    const observer = podObserver(annotations, events, owners);
    expect(patches, "seeding writes nothing").to.deep.equal([]);

    observer.detached(info("a"));
    await annotations.idle();
    expect(patches, "A's DEL").to.deep.equal([]);

    observer.detached(info("b"));
    await annotations.idle();
    expect(patches).to.deep.equal([
      { pod: "default/web", annotations: { [ANNOTATION_MAC_ADDRESS]: null } },
    ]);
  });

  it("describes eth0 only: a second interface's ADD and DEL leave eth0's annotation", async () => {
    const observer = podObserver(annotations, events, new AnnotationOwners());
    const result = (ifName: string, mac: string) =>
      ({
        cniVersion: "1.0.0",
        interfaces: [{ name: ifName, mac, sandbox: "/var/run/netns/x" }],
        ips: [],
      }) as never;
    observer.attached(info("a"), result("eth0", "02:00:00:00:00:e0"));
    await annotations.idle();
    const net1 = { ...info("a"), ifName: "net1", network: "second-network" };
    observer.attached(net1, result("net1", "02:00:00:00:00:01"));
    observer.detached(net1);
    await annotations.idle();
    expect(patches).to.deep.equal([
      { pod: "default/web", annotations: { [ANNOTATION_MAC_ADDRESS]: "02:00:00:00:00:e0" } },
    ]);
    observer.detached(info("a"));
    await annotations.idle();
    expect(patches.at(-1)).to.deep.equal({
      pod: "default/web",
      annotations: { [ANNOTATION_MAC_ADDRESS]: null },
    });
  });

  it("without seeding, the old sandbox's DEL removes the newer one's annotation (what seeding prevents)", async () => {
    const observer = podObserver(annotations, events, new AnnotationOwners());
    observer.detached(info("a"));
    await annotations.idle();
    expect(patches).to.deep.equal([
      { pod: "default/web", annotations: { [ANNOTATION_MAC_ADDRESS]: null } },
    ]);
  });

  it("an ADD after the restart takes the annotation over from the seeded owner", async () => {
    const owners = new AnnotationOwners();
    owners.seed(annotationOwnersFromCache(restartedCache));
    const observer = podObserver(annotations, events, owners);
    const result = {
      cniVersion: "1.0.0",
      interfaces: [{ name: "eth0", mac: "02:00:00:00:00:0c", sandbox: "/run/netns/c" }],
      ips: [],
    } as unknown as AnyResult;
    observer.attached(info("c"), result);
    await annotations.idle();
    observer.detached(info("b"));
    await annotations.idle();
    expect(patches).to.deep.equal([
      { pod: "default/web", annotations: { [ANNOTATION_MAC_ADDRESS]: "02:00:00:00:00:0c" } },
    ]);
    expect(owners.ownerOf({ namespace: "default", name: "web" })?.containerId).to.equal("c");
  });
});

describe("KubeIntegration.seedAnnotationOwners", () => {
  const integration = () =>
    new KubeIntegration(
      {
        source: { kind: "kubeconfig", path: "/nonexistent/kubeconfig" },
        podCidrGiven: true,
        mountDir: "/nonexistent/config",
        stateDir: "/nonexistent/state",
      },
      { logger, setPodCidrs: async () => {}, reloadConfig: async () => {} },
    );

  it("seeds the observer's owners from the cache listing", async () => {
    const kube = integration();
    const n = await kube.seedAnnotationOwners({
      list: async () => [
        cached({ id: "a", mtimeMs: 1 }),
        cached({ id: "b", mtimeMs: 2 }),
        cached({ id: "x", name: "db", mtimeMs: 1 }),
        cached({ id: "p", cniArgs: [] }),
      ],
    });
    expect(n).to.equal(2);
    expect(kube.owners.ownerOf({ namespace: "default", name: "web" })).to.deep.equal({
      containerId: "b",
      ifName: "eth0",
    });
    await kube.stop();
  });

  it("starts with no owner known when the cache cannot be listed, without failing", async () => {
    const kube = integration();
    const n = await kube.seedAnnotationOwners({
      list: async () => {
        throw new Error("EACCES: permission denied, scandir '/var/lib/cni-driver/results'");
      },
    });
    expect(n).to.equal(0);
    await kube.stop();
  });
});
