/**
 * The wire across versions, against a real driver on its unix socket, called
 * by grpc-js as any gRPC client: a method of a later version of the contract is
 * answered UNIMPLEMENTED naming it (clients make that CNI code 1: "the driver
 * predates the method"), and the driver goes on serving; a request carrying
 * fields of a later version (at the top and inside a nested message) is served
 * as if they were not there.
 */
import * as grpc from "@grpc/grpc-js";
import { expect } from "chai";
import { SERVICE_NAME } from "../../src/wire/codec.js";
import { API_VERSION } from "../../src/wire/types.js";
import { DriverHarness, expectNoCniError } from "../support/driver-harness.js";
import { createNetns } from "../support/netns.js";
import {
  decodeWire,
  encodeWithUnknownFields,
  lengthDelimited,
  unknownFields,
  wireType,
} from "../support/proto-unknown-fields.js";
import { requireReferencePlugins, requireRoot } from "../support/requirements.js";

/** PodRequest's field number of `pod` (PodIdentity). */
const POD_FIELD = 2;

describe("cni-driver serve: unknown methods and fields from a later contract (integration)", function () {
  this.timeout(60_000);
  let h: DriverHarness;
  let client: grpc.Client;

  /** One unary call of `method` with `body` as the request's bytes; the answer's bytes or the status. */
  function call(
    method: string,
    body: Buffer,
  ): Promise<{ err: grpc.ServiceError | null; res?: Buffer }> {
    return new Promise((resolve) => {
      client.makeUnaryRequest(
        `/${SERVICE_NAME}/${method}`,
        (b: Buffer) => b,
        (b: Buffer) => b,
        body,
        new grpc.Metadata(),
        { deadline: new Date(Date.now() + 20_000) },
        (err, res) => resolve({ err, res }),
      );
    });
  }

  before(async function () {
    requireRoot(this);
    requireReferencePlugins(this, "host-local");
    h = new DriverHarness({ subnetOctet: 174 });
    await h.writeDefaultConfig();
    await h.start();
    client = new grpc.Client(`unix:${h.socket}`, grpc.credentials.createInsecure());
  });

  after(async () => {
    client?.close();
    await h?.cleanup();
  });

  it("answers a method it does not have UNIMPLEMENTED, naming it, and keeps serving", async () => {
    const { err } = await call("WatchPods", unknownFields());
    expect(err?.code).to.equal(grpc.status.UNIMPLEMENTED);
    expect(err?.details).to.equal(
      `the driver does not serve the method /${SERVICE_NAME}/WatchPods`,
    );
    expect(h.running).to.equal(true);
    const status = await h.client.cniStatus({});
    expect(status.ready).to.equal(true);
  });

  it("serves CniStatus with fields it does not know in the request", async () => {
    const { err, res } = await call(
      "CniStatus",
      encodeWithUnknownFields(wireType("CniStatusRequest"), { api_version: API_VERSION }),
    );
    expect(err).to.equal(null);
    const answer = decodeWire(wireType("CniStatusResponse"), res as Buffer);
    expect(answer.error).to.equal(null);
    expect(answer.ready).to.equal(true);
  });

  it("sets up and tears down a pod from requests with unknown fields, nested ones too", async () => {
    createNetns(h.netnsName(1));
    const { pod, ...rest } = h.podRequest(1, { cni_version: "1.0.0" });
    const podRequest = wireType("PodRequest");
    const body = Buffer.concat([
      podRequest.encode(podRequest.fromObject({ ...rest, api_version: API_VERSION })).finish(),
      lengthDelimited(POD_FIELD, encodeWithUnknownFields(wireType("PodIdentity"), { ...pod })),
      unknownFields(),
    ]);
    const added = await call("SetUpPod", body);
    expect(added.err).to.equal(null);
    const answer = decodeWire(wireType("PodResponse"), added.res as Buffer);
    expectNoCniError(answer as { error: null });
    expect(JSON.parse(answer.result_json as string).ips[0].address).to.match(/^10\.244\.174\./);
    // The pod identity inside the nested message was read: the host veth is named from it.
    expect(h.bridgePorts()).to.deep.equal([h.hostVeth(1)]);

    const removed = await call("TearDownPod", body);
    expect(removed.err).to.equal(null);
    expect(decodeWire(wireType("TearDownPodResponse"), removed.res as Buffer).error).to.equal(null);
    expect(h.leases()).to.deep.equal([]);
    expect(h.bridgePorts()).to.deep.equal([]);
  });
});
