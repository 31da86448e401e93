/**
 * proto/cni_driver.proto changes only by adding (docs/upgrades.md#compatibility):
 * every message, field, enum value and method of every release (the commits
 * CHANGELOG.md names) is still there with its number, name, type and label,
 * so a shim or a client of a release and the driver of the next read each
 * other. New messages, fields, values and methods may come; nothing may go or
 * change. The check itself is pinned on changes of each kind it must catch.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { expect } from "chai";
import type * as Protobuf from "protobufjs";
import { changelogReleases } from "../support/changelog.js";
import { REPO_ROOT } from "../support/driver-harness.js";
import { requireGitHistory } from "../support/requirements.js";

const protobuf = createRequire(import.meta.url)("protobufjs") as typeof Protobuf;

const PROTO = "proto/cni_driver.proto";

/** The contract's declarations, each as proto syntax, by a key that never changes meaning. */
function declarations(text: string): Map<string, string> {
  const root = protobuf.parse(text, { keepCase: true }).root;
  const out = new Map<string, string>();
  const walk = (ns: Protobuf.NamespaceBase) => {
    for (const obj of ns.nestedArray) {
      const name = obj.fullName.replace(/^\./, "");
      if (obj instanceof protobuf.Type) {
        for (const f of obj.fieldsArray) {
          const label =
            f instanceof protobuf.MapField
              ? `map<${f.keyType}, ${f.type}>`
              : `${f.repeated ? "repeated " : f.options?.proto3_optional ? "optional " : ""}${f.type}`;
          const packed = f.options?.packed === undefined ? "" : ` [packed = ${f.options.packed}]`;
          out.set(`message ${name} field ${f.id}`, `${label} ${f.name} = ${f.id}${packed}`);
        }
        out.set(`message ${name}`, "message");
      } else if (obj instanceof protobuf.Enum) {
        for (const [value, id] of Object.entries(obj.values))
          out.set(`enum ${name} value ${value}`, `${value} = ${id}`);
      } else if (obj instanceof protobuf.Service) {
        for (const m of obj.methodsArray) {
          const stream = (s: boolean | undefined) => (s ? "stream " : "");
          out.set(
            `service ${name} method ${m.name}`,
            `rpc ${m.name}(${stream(m.requestStream)}${m.requestType}) returns (${stream(m.responseStream)}${m.responseType})`,
          );
        }
      }
      if (obj instanceof protobuf.Namespace) walk(obj);
    }
  };
  walk(root);
  return out;
}

/** What `current` breaks of `released`: one line per declaration removed or changed. */
function breaches(released: string, current: string): string[] {
  const now = declarations(current);
  const out: string[] = [];
  for (const [key, was] of declarations(released)) {
    const is = now.get(key);
    if (is === undefined) out.push(`${key} (\`${was}\`) was removed`);
    else if (is !== was) out.push(`${key} changed from \`${was}\` to \`${is}\``);
  }
  return out;
}

const RULE =
  "proto/cni_driver.proto changes only by adding fields, messages, enum values and methods: a released one keeps its number, name, type and label and is never removed (docs/upgrades.md#compatibility)";

describe("the wire contract changes only by adding", () => {
  const current = readFileSync(join(REPO_ROOT, PROTO), "utf8");

  it("keeps every declaration of every release", function () {
    requireGitHistory(this, REPO_ROOT);
    const { releases } = changelogReleases(readFileSync(join(REPO_ROOT, "CHANGELOG.md"), "utf8"));
    expect(
      releases.map((r) => r.version),
      "releases in CHANGELOG.md",
    ).to.include("0.1.0");
    for (const { version, commit } of releases) {
      expect(commit, `the commit of release ${version} in CHANGELOG.md`).to.be.a("string");
      const released = execFileSync("git", ["-C", REPO_ROOT, "show", `${commit}:${PROTO}`], {
        encoding: "utf8",
      });
      const broken = breaches(released, current);
      expect(broken, `against release ${version} (${commit}): ${RULE}:\n  ${broken.join("\n  ")}`)
        .to.be.empty;
    }
  });

  describe("the check", () => {
    const edited = (from: string, to: string) => {
      expect(current, `the contract holds ${from}`).to.contain(from);
      return breaches(current, current.replace(from, to));
    };

    it("lets additions through: a field, a message, a method, an enum value", () => {
      const grown = current
        .replace("  string extra_json = 10;", "  string extra_json = 10;\n  string added = 11;")
        .replace("  API_VERSION_V1 = 1;", "  API_VERSION_V1 = 1;\n  API_VERSION_V2 = 2;")
        .replace(
          "  rpc SetUpPod(PodRequest) returns (PodResponse);",
          "  rpc SetUpPod(PodRequest) returns (PodResponse);\n  rpc Watch(PodRequest) returns (Added);",
        )
        .concat("\nmessage Added { string x = 1; }\n");
      expect(breaches(current, grown)).to.deep.equal([]);
    });

    for (const [what, from, to, breach] of [
      [
        "a field renumbered",
        "  string extra_json = 10;",
        "  string extra_json = 12;",
        "message cnidriver.v1.Capabilities field 10 (`string extra_json = 10`) was removed",
      ],
      [
        "a field's type changed",
        "  string extra_json = 10;",
        "  bytes extra_json = 10;",
        "message cnidriver.v1.Capabilities field 10 changed from `string extra_json = 10` to `bytes extra_json = 10`",
      ],
      [
        "a field renamed",
        "  string extra_json = 10;",
        "  string extra = 10;",
        "message cnidriver.v1.Capabilities field 10 changed from `string extra_json = 10` to `string extra = 10`",
      ],
      [
        "a field made repeated",
        "  string extra_json = 10;",
        "  repeated string extra_json = 10;",
        "message cnidriver.v1.Capabilities field 10 changed from `string extra_json = 10` to `repeated string extra_json = 10`",
      ],
      [
        "a field removed",
        "  string extra_json = 10;",
        "",
        "message cnidriver.v1.Capabilities field 10 (`string extra_json = 10`) was removed",
      ],
      [
        "a method's answer changed",
        "  rpc CheckPod(PodRequest) returns (CheckPodResponse);",
        "  rpc CheckPod(PodRequest) returns (TearDownPodResponse);",
        "service cnidriver.v1.CNIDriver method CheckPod changed from `rpc CheckPod(PodRequest) returns (CheckPodResponse)` to `rpc CheckPod(PodRequest) returns (TearDownPodResponse)`",
      ],
      [
        "a method removed",
        "  rpc CheckPod(PodRequest) returns (CheckPodResponse);",
        "",
        "service cnidriver.v1.CNIDriver method CheckPod (`rpc CheckPod(PodRequest) returns (CheckPodResponse)`) was removed",
      ],
      [
        "an enum value renumbered",
        "  API_VERSION_V1 = 1;",
        "  API_VERSION_V1 = 2;",
        "enum cnidriver.v1.ApiVersion value API_VERSION_V1 changed from `API_VERSION_V1 = 1` to `API_VERSION_V1 = 2`",
      ],
    ] as const) {
      it(`catches ${what}`, () => {
        expect(edited(from, to)).to.include(breach);
      });
    }

    it("catches the package renamed: every message and method goes", () => {
      const broken = edited("package cnidriver.v1;", "package cnidriver.v2;");
      expect(broken).to.include("message cnidriver.v1.PodRequest (`message`) was removed");
      expect(broken).to.include(
        "service cnidriver.v1.CNIDriver method SetUpPod (`rpc SetUpPod(PodRequest) returns (PodResponse)`) was removed",
      );
    });
  });
});
