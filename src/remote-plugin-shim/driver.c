#include "driver.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "grpc.h"
#include "shim.pb-c.h"
#include "text.h"

#define SERVICE_PATH "/cnidriver.v1.CNIDriver/"
#define API_VERSION 1

static const char *const METHOD_NAMES[] = {"SetUpPod", "TearDownPod", "CheckPod", "CniStatus",
                                           "GarbageCollect"};

static void transport_error(struct driver_answer *ans, const char *socket, int status,
                            const char *message) {
  const char *name = grpc_status_name(status);
  unsigned code = status == GRPC_UNAVAILABLE || status == GRPC_DEADLINE_EXCEEDED ? CNI_TRY_AGAIN_LATER
                  : status == GRPC_UNIMPLEMENTED                                 ? CNI_INCOMPATIBLE_VERSION
                                                                                 : CNI_INTERNAL;
  ans->transport_error = true;
  cni_fail_take(&ans->error, code, xprintf("cni-driver at %s: %s: %s", socket, name, message),
                xprintf("gRPC status %s", name));
}

static void set_driver_error(struct driver_answer *ans, const Cnidriver__V1__CniError *e) {
  if (!e || e->code == 0) return;
  ans->not_ready = e->not_ready;
  cni_fail_take(&ans->error, e->code, xstrdup(e->msg ? e->msg : ""),
                xstrdup(e->details ? e->details : ""));
}

/* Each method's answer; every one holds the driver's CniError in its field `error`. */
static const ProtobufCMessageDescriptor *const ANSWERS[] = {
    &cnidriver__v1__pod_response__descriptor,
    &cnidriver__v1__tear_down_pod_response__descriptor,
    &cnidriver__v1__check_pod_response__descriptor,
    &cnidriver__v1__cni_status_response__descriptor,
    &cnidriver__v1__garbage_collect_response__descriptor,
};

/* Calls `method` with a packed request (freed here). Returns the decoded answer,
 * its `error` already in `ans`, or NULL with `ans` holding the transport's failure. */
static ProtobufCMessage *call(const char *socket, enum driver_method method, uint8_t *request,
                              size_t len, long long timeout_ms, long long connect_timeout_ms,
                              struct driver_answer *ans) {
  memset(ans, 0, sizeof *ans);
  char path[64];
  snprintf(path, sizeof path, "%s%s", SERVICE_PATH, METHOD_NAMES[method]);
  struct grpc_call c = {
      .socket_path = socket,
      .path = path,
      .request = request,
      .request_len = len,
      .timeout_ms = timeout_ms,
      .connect_timeout_ms = connect_timeout_ms < timeout_ms ? connect_timeout_ms : timeout_ms,
  };
  struct grpc_outcome out;
  grpc_unary(&c, &out);
  free(request);
  ProtobufCMessage *answer = NULL;
  if (out.connect_errno == EACCES || out.connect_errno == EPERM) {
    cni_fail_take(&ans->error, CNI_IO_FAILURE,
                  xprintf("cni-driver at %s: permission denied: the shim (uid %u) may not open the "
                          "driver's socket: %s",
                          socket, (unsigned)geteuid(), strerror(out.connect_errno)),
                  xstrdup("the socket is the driver's (mode 0600, root): the runtime must exec "
                          "the shim as root"));
    ans->transport_error = true;
  } else if (out.status != GRPC_OK) {
    transport_error(ans, socket, out.status, out.message ? out.message : "");
  } else {
    const ProtobufCMessageDescriptor *d = ANSWERS[method];
    answer = protobuf_c_message_unpack(d, NULL, out.response_len, out.response);
    if (!answer) {
      char *why = xprintf("cannot decode the %s", d->short_name);
      transport_error(ans, socket, GRPC_INTERNAL, why);
      free(why);
    } else {
      const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, "error");
      set_driver_error(ans, *(Cnidriver__V1__CniError **)((char *)answer + f->offset));
    }
  }
  grpc_outcome_free(&out);
  return answer;
}

void driver_pod(enum driver_method method, const struct pod_call *pc, long long timeout_ms,
                struct driver_answer *ans) {
  Cnidriver__V1__PodRequest req = CNIDRIVER__V1__POD_REQUEST__INIT;
  req.api_version = API_VERSION;
  req.container_id = (char *)pc->env->container_id;
  req.netns = (char *)(pc->env->netns ? pc->env->netns : "");
  req.ifname = (char *)pc->env->ifname;
  req.network = (char *)pc->conf->network;
  req.cni_version = (char *)pc->conf->cni_version;
  Cnidriver__V1__KeyValue *kvs = xmalloc(pc->arg_count * sizeof *kvs);
  Cnidriver__V1__KeyValue **kvp = xmalloc(pc->arg_count * sizeof *kvp);
  for (size_t i = 0; i < pc->arg_count; i++) {
    cnidriver__v1__key_value__init(&kvs[i]);
    kvs[i].key = pc->args[i].key;
    kvs[i].value = pc->args[i].value;
    kvp[i] = &kvs[i];
  }
  req.n_cni_args = pc->arg_count;
  req.cni_args = kvp;
  /* The driver reads runtimeConfig, args and the rest from the runtime's own bytes. */
  req.stdin_config.data = (uint8_t *)pc->stdin_data;
  req.stdin_config.len = pc->stdin_len;
  size_t len = cnidriver__v1__pod_request__get_packed_size(&req);
  uint8_t *buf = xmalloc(len);
  cnidriver__v1__pod_request__pack(&req, buf);
  free(kvs);
  free(kvp);

  ProtobufCMessage *answer =
      call(pc->conf->socket, method, buf, len, timeout_ms, CONNECT_TIMEOUT_MS, ans);
  if (!answer) return;
  if (method == SET_UP_POD && !ans->error.code) {
    const char *json = ((Cnidriver__V1__PodResponse *)answer)->result_json;
    ans->result_json = xstrdup(json ? json : "");
  }
  protobuf_c_message_free_unpacked(answer, NULL);
}

void driver_status(const struct shim_config *conf, long long timeout_ms, struct driver_answer *ans) {
  Cnidriver__V1__CniStatusRequest req = CNIDRIVER__V1__CNI_STATUS_REQUEST__INIT;
  req.api_version = API_VERSION;
  req.network = (char *)conf->network;
  req.cni_version = (char *)conf->cni_version;
  size_t len = cnidriver__v1__cni_status_request__get_packed_size(&req);
  uint8_t *buf = xmalloc(len);
  cnidriver__v1__cni_status_request__pack(&req, buf);
  ProtobufCMessage *answer =
      call(conf->socket, CNI_STATUS, buf, len, timeout_ms, CONNECT_TIMEOUT_MS, ans);
  if (answer) protobuf_c_message_free_unpacked(answer, NULL);
}

void driver_gc(const struct shim_config *conf, const struct gc_attachment *valid, size_t count,
               struct driver_answer *ans) {
  Cnidriver__V1__Attachment *atts = xmalloc(count * sizeof *atts);
  Cnidriver__V1__Attachment **attp = xmalloc(count * sizeof *attp);
  for (size_t i = 0; i < count; i++) {
    cnidriver__v1__attachment__init(&atts[i]);
    atts[i].container_id = (char *)valid[i].container_id;
    atts[i].ifname = (char *)valid[i].ifname;
    attp[i] = &atts[i];
  }
  Cnidriver__V1__NetworkAttachments network = CNIDRIVER__V1__NETWORK_ATTACHMENTS__INIT;
  network.network = (char *)conf->network;
  network.n_valid_attachments = count;
  network.valid_attachments = attp;
  Cnidriver__V1__NetworkAttachments *networks[] = {&network};
  Cnidriver__V1__GarbageCollectRequest req = CNIDRIVER__V1__GARBAGE_COLLECT_REQUEST__INIT;
  req.api_version = API_VERSION;
  req.n_networks = 1;
  req.networks = networks;
  req.cni_version = (char *)conf->cni_version;
  size_t len = cnidriver__v1__garbage_collect_request__get_packed_size(&req);
  uint8_t *buf = xmalloc(len);
  cnidriver__v1__garbage_collect_request__pack(&req, buf);
  free(atts);
  free(attp);
  ProtobufCMessage *answer =
      call(conf->socket, GARBAGE_COLLECT, buf, len, conf->timeout_ms, CONNECT_TIMEOUT_MS, ans);
  if (!answer) return;
  Cnidriver__V1__GarbageCollectResponse *r = (Cnidriver__V1__GarbageCollectResponse *)answer;
  if (ans->error.code && r->n_errors > 1) {
    ans->more_error_count = r->n_errors - 1;
    ans->more_errors = xmalloc(ans->more_error_count * sizeof(char *));
    for (size_t i = 1; i < r->n_errors; i++)
      ans->more_errors[i - 1] = xprintf("%u: %s", r->errors[i]->code, r->errors[i]->msg);
  }
  protobuf_c_message_free_unpacked(answer, NULL);
}

/* The last pause leaves the last attempt some time to connect and be answered. */
#define LAST_ATTEMPT_MS 50
#define INITIAL_BACKOFF_MS 100
#define MAX_BACKOFF_MS 1000

static void sleep_ms(long long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

int driver_pod_retrying(enum driver_method method, const struct pod_call *pc,
                        struct driver_answer *ans) {
  long long deadline = monotonic_ms() + pc->conf->timeout_ms;
  long long backoff = INITIAL_BACKOFF_MS;
  for (int attempts = 1;; attempts++) {
    long long remaining = deadline - monotonic_ms();
    driver_pod(method, pc, remaining < 1 ? 1 : remaining, ans);
    if (ans->error.code != CNI_TRY_AGAIN_LATER) return attempts;
    long long left = deadline - monotonic_ms() - LAST_ATTEMPT_MS;
    if (left <= 0) return attempts;
    sleep_ms(backoff < left ? backoff : left);
    backoff = backoff * 2 < MAX_BACKOFF_MS ? backoff * 2 : MAX_BACKOFF_MS;
    driver_answer_free(ans);
  }
}

void driver_answer_free(struct driver_answer *ans) {
  cni_error_free(&ans->error);
  free(ans->result_json);
  for (size_t i = 0; i < ans->more_error_count; i++) free(ans->more_errors[i]);
  free(ans->more_errors);
  memset(ans, 0, sizeof *ans);
}
