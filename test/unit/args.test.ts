import { expect } from "chai";
import {
  type CniArgPair,
  formatCniArgs,
  loadArgs,
  parseArgBool,
  parseCniArgs,
  podIdentityFromArgs,
  RUNTIME_ARG_KEYS,
  withIgnoreUnknown,
} from "../../src/cni/args.js";
import { CniError } from "../../src/cni/errors.js";
import { cniErrorOf } from "../support/cni-error.js";

describe("cni/args", () => {
  describe("parseCniArgs", () => {
    for (const [text, want] of [
      ["", []],
      ["a=b", [["a", "b"]]],
      [
        "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0",
        [
          ["IgnoreUnknown", "1"],
          ["K8S_POD_NAMESPACE", "default"],
          ["K8S_POD_NAME", "web-0"],
        ],
      ],
      ["K=", [["K", ""]]],
      ["=v", [["", "v"]]],
      [
        "b=2;a=1;b=3",
        [
          ["b", "2"],
          ["a", "1"],
          ["b", "3"],
        ],
      ],
      ["IP=10.1.2.3/24", [["IP", "10.1.2.3/24"]]],
    ] as const) {
      it(`${JSON.stringify(text)} keeps pairs in order`, () => {
        expect(parseCniArgs(text)).to.deep.equal(want);
      });
    }

    for (const [text, pair] of [
      ["a=b=c", "a=b=c"],
      ["a", "a"],
      ["a=1;b", "b"],
      ["a=1;", ""],
      [";a=1", ""],
      ["MAC=aa:bb=cc", "MAC=aa:bb=cc"],
    ] as const) {
      it(`${JSON.stringify(text)} is an error (code 4) naming ${JSON.stringify(pair)}`, () => {
        const err = cniErrorOf(() => parseCniArgs(text));
        expect(err.code).to.equal(4);
        expect(err.message).to.equal(`ARGS: invalid pair ${JSON.stringify(pair)}`);
        expect(err.details).to.include("CNI_ARGS");
      });
    }
  });

  describe("formatCniArgs", () => {
    it("joins K=V with ;", () => {
      expect(
        formatCniArgs([
          ["IgnoreUnknown", "1"],
          ["K8S_POD_NAME", "web"],
        ]),
      ).to.equal("IgnoreUnknown=1;K8S_POD_NAME=web");
    });

    it("no pairs is the empty string", () => {
      expect(formatCniArgs([])).to.equal("");
    });

    for (const text of ["", "a=b", "K8S_POD_UID=u;IgnoreUnknown=true;K=", "=v;x=y"]) {
      it(`round-trips ${JSON.stringify(text)}`, () => {
        expect(formatCniArgs(parseCniArgs(text))).to.equal(text);
      });
    }

    for (const pair of [
      ["a", "b=c"],
      ["a;b", "c"],
      ["a", "x;y=z"],
    ] as const) {
      it(`refuses ${JSON.stringify(pair)}, which could not be read back`, () => {
        expect(cniErrorOf(() => formatCniArgs([pair])).code).to.equal(4);
      });
    }
  });

  describe("parseArgBool", () => {
    for (const [text, want] of [
      ["1", true],
      ["true", true],
      ["True", true],
      ["TRUE", true],
      ["0", false],
      ["false", false],
      ["False", false],
      ["yes", undefined],
      ["", undefined],
      ["2", undefined],
    ] as const) {
      it(`${JSON.stringify(text)} → ${String(want)}`, () => {
        expect(parseArgBool(text)).to.equal(want);
      });
    }
  });

  describe("loadArgs", () => {
    const known = ["K8S_POD_NAME", "IP"] as const;

    it("returns the known keys present", () => {
      expect(loadArgs(parseCniArgs("K8S_POD_NAME=web;IP=10.0.0.5"), known)).to.deep.equal({
        K8S_POD_NAME: "web",
        IP: "10.0.0.5",
      });
    });

    it("no pairs, no values", () => {
      expect(loadArgs([], known)).to.deep.equal({});
    });

    it("a repeated key takes its last value", () => {
      expect(loadArgs(parseCniArgs("IP=10.0.0.1;IP=10.0.0.2"), known)).to.deep.equal({
        IP: "10.0.0.2",
      });
    });

    for (const flag of ["1", "true", "True"]) {
      it(`IgnoreUnknown=${flag} skips unknown keys, wherever it stands`, () => {
        const before = parseCniArgs(`IgnoreUnknown=${flag};FOO=bar;K8S_POD_NAME=web`);
        const after = parseCniArgs(`FOO=bar;K8S_POD_NAME=web;IgnoreUnknown=${flag}`);
        expect(loadArgs(before, known)).to.deep.equal({ K8S_POD_NAME: "web" });
        expect(loadArgs(after, known)).to.deep.equal({ K8S_POD_NAME: "web" });
      });
    }

    it("an unknown key without IgnoreUnknown is an error (code 4) listing every unknown pair", () => {
      const err = cniErrorOf(() => loadArgs(parseCniArgs("FOO=bar;K8S_POD_NAME=web;BAZ=1"), known));
      expect(err.code).to.equal(4);
      expect(err.message).to.equal('ARGS: unknown args ["FOO=bar" "BAZ=1"]');
      expect(err.details).to.include("K8S_POD_NAME, IP");
    });

    for (const flag of ["0", "false"]) {
      it(`IgnoreUnknown=${flag} still rejects unknown keys`, () => {
        expect(
          cniErrorOf(() => loadArgs(parseCniArgs(`IgnoreUnknown=${flag};FOO=bar`), known)).code,
        ).to.equal(4);
      });
    }

    it("IgnoreUnknown=yes is an error, even with no unknown key", () => {
      const err = cniErrorOf(() => loadArgs(parseCniArgs("IgnoreUnknown=yes;IP=10.0.0.5"), known));
      expect(err.code).to.equal(4);
      expect(err.message).to.include('"IgnoreUnknown=yes"');
      expect(err.message).to.include("invalid input yes");
    });

    it("IgnoreUnknown=yes does not ignore an unknown key either", () => {
      expect(() => loadArgs(parseCniArgs("IgnoreUnknown=yes;FOO=bar"), known)).to.throw(CniError);
    });

    it("keys are case-sensitive", () => {
      const err = cniErrorOf(() => loadArgs(parseCniArgs("k8s_pod_name=web"), known));
      expect(err.message).to.include("k8s_pod_name=web");
      expect(() => loadArgs(parseCniArgs("ignoreunknown=1;FOO=bar"), known)).to.throw(CniError);
    });

    it("IgnoreUnknown is always known, and returned only when asked for", () => {
      expect(loadArgs(parseCniArgs("IgnoreUnknown=1"), known)).to.deep.equal({});
      expect(loadArgs(parseCniArgs("IgnoreUnknown=1"), ["IgnoreUnknown"])).to.deep.equal({
        IgnoreUnknown: "1",
      });
    });

    it("accepts every key runtimes send when given RUNTIME_ARG_KEYS", () => {
      const text =
        "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=c1;K8S_POD_UID=u;IP=10.0.0.9;MAC=0a:58:0a:00:00:09";
      expect(Object.keys(loadArgs(parseCniArgs(text), RUNTIME_ARG_KEYS))).to.have.length(7);
    });
  });

  describe("podIdentityFromArgs", () => {
    const containerd: CniArgPair[] = [
      ["IgnoreUnknown", "1"],
      ["K8S_POD_NAMESPACE", "default"],
      ["K8S_POD_NAME", "web-0"],
      ["K8S_POD_INFRA_CONTAINER_ID", "3c1c9d32abcd"],
      ["K8S_POD_UID", "9d6e0f1e-2d3c-4b5a-8f7e-6d5c4b3a2910"],
    ];
    const want = {
      namespace: "default",
      name: "web-0",
      infraContainerId: "3c1c9d32abcd",
      uid: "9d6e0f1e-2d3c-4b5a-8f7e-6d5c4b3a2910",
    };

    // Every rotation and the reverse: containerd builds CNI_ARGS from a map.
    const orders = [
      ...containerd.map((_, i) => [...containerd.slice(i), ...containerd.slice(0, i)]),
      [...containerd].reverse(),
    ];
    for (const [i, pairs] of orders.entries()) {
      it(`shuffled containerd args #${i} give the same identity`, () => {
        const text = formatCniArgs(pairs);
        expect(podIdentityFromArgs(parseCniArgs(text))).to.deep.equal(want);
      });
    }

    it("podman sends only K8S_POD_NAME", () => {
      expect(
        podIdentityFromArgs(parseCniArgs("IgnoreUnknown=1;K8S_POD_NAME=happy_turing")),
      ).to.deep.equal({ name: "happy_turing" });
    });

    it("ignores other keys and empty values", () => {
      expect(
        podIdentityFromArgs([
          ["IP", "10.0.0.1"],
          ["K8S_POD_UID", ""],
          ["toString", "x"],
          ["K8S_POD_NAMESPACE", "kube-system"],
        ]),
      ).to.deep.equal({ namespace: "kube-system" });
    });

    it("nothing known, empty identity", () => {
      expect(podIdentityFromArgs([])).to.deep.equal({});
    });
  });
});

describe("cni/args withIgnoreUnknown", () => {
  it("adds IgnoreUnknown=1 first when absent, so reference plugins accept K8S_POD_* keys", () => {
    const pairs: [string, string][] = [["K8S_POD_NAME", "p"]];
    expect(withIgnoreUnknown(pairs)).to.deep.equal([
      ["IgnoreUnknown", "1"],
      ["K8S_POD_NAME", "p"],
    ]);
  });
  it("keeps a runtime's own IgnoreUnknown as it is", () => {
    const pairs: [string, string][] = [
      ["IgnoreUnknown", "true"],
      ["K8S_POD_NAME", "p"],
    ];
    expect(withIgnoreUnknown(pairs)).to.deep.equal([
      ["IgnoreUnknown", "true"],
      ["K8S_POD_NAME", "p"],
    ]);
  });
});
