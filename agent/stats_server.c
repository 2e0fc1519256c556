/* One stats request: ImageFsInfo -> ListPodSandboxStats (-> ListContainerStats
 * when that fails) -> the node's figures on the thread pool -> the answer. Each completion records its result and
 * calls step(). The response object is held until the answer (the server
 * keeps it valid; an aborted client only makes the answer go nowhere). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/stats.h"
#include "cri/image.h"
#include "cri/runtime.h"
#include "reactor/log.h"
#include "reactor/metrics.h"
#include "reactor/xalloc.h"

typedef enum { SUMMARY, RESOURCE, CADVISOR } kind_t;

typedef enum { Q_IMAGE_FS, Q_POD_STATS, Q_CONTAINER_STATS, Q_NODE, Q_ANSWER } qstate_t;

typedef struct query {
  nl_stats_server_t *s;
  nl_http_resp_t *resp;
  qstate_t state;
  kind_t kind;
  bool error;    /* a runtime call failed */
  char *image_mount;
  Runtime__V1__ImageFsInfoResponse *img;           /* unpacked copies, owned */
  Runtime__V1__ListPodSandboxStatsResponse *pods;
  Runtime__V1__ListContainerStatsResponse *ctrs; /* when pods came from it */
  uv_work_t work;
  nl_node_sample_t node;
  nl_cadvisor_t cadvisor; /* prepared on the loop, read with the node (RESOURCE: the swap only) */
  nl_summary_sys_t sys;   /* SUMMARY: the same */
} query_t;

static void step(query_t *q);

/* Keeps a response past its callback: the CRI client frees its own. */
static void *keep(const ProtobufCMessage *m) {
  size_t n = protobuf_c_message_get_packed_size(m);
  uint8_t *b = nl_xmalloc(n ? n : 1);
  protobuf_c_message_pack(m, b);
  void *copy = protobuf_c_message_unpack(m->descriptor, NULL, n, b);
  free(b);
  return copy;
}

static void on_image_fs(const nl_grpc_status_t *st, Runtime__V1__ImageFsInfoResponse *r, void *ctx) {
  query_t *q = ctx;
  if (r) {
    q->img = keep(&r->base);
    if (r->n_image_filesystems && r->image_filesystems[0]->fs_id)
      q->image_mount = nl_xstrdup(r->image_filesystems[0]->fs_id->mountpoint);
  } else {
    q->error = true;
    nl_vlog(2, "stats: ImageFsInfo: %s", st->message);
  }
  q->state = Q_POD_STATS;
  step(q);
}

static void on_pod_stats(const nl_grpc_status_t *st, Runtime__V1__ListPodSandboxStatsResponse *r,
                         void *ctx) {
  query_t *q = ctx;
  q->state = Q_NODE;
  if (r) {
    q->pods = keep(&r->base);
  } else {
    nl_vlog(4, "stats: ListPodSandboxStats: %s; asking for container stats", st->message);
    q->state = Q_CONTAINER_STATS;
  }
  step(q);
}

static void on_container_stats(const nl_grpc_status_t *st,
                               Runtime__V1__ListContainerStatsResponse *r, void *ctx) {
  query_t *q = ctx;
  if (r) {
    q->ctrs = keep(&r->base);
    q->pods = nl_stats_pods_from_containers(q->ctrs);
  } else {
    q->error = true;
    nl_vlog(2, "stats: ListContainerStats: %s", st->message);
  }
  q->state = Q_NODE;
  step(q);
}

/* What the thread pool needs of the kubelet's configuration, copied. */
static void sys_prepare(nl_summary_sys_t *x, const nl_stats_meta_t *m, const char *root_dir,
                        int runtime_pid) {
  memset(x, 0, sizeof *x);
  if (m->cgroup_fs) x->fs_root = nl_xstrdup(m->cgroup_fs);
  x->v2 = m->cgroup_v2;
  if (m->pods_cgroup) x->pods_cgroup = nl_xstrdup(m->pods_cgroup);
  const char *ep = m->runtime_endpoint;
  if (ep && !strncmp(ep, "unix://", 7)) x->runtime_sock = nl_xstrdup(ep + 7);
  /* upstream's "misc" is its systemCgroups, set by its node suite when the
   * host does not run systemd */
  x->misc = access("/run/systemd/system", F_OK) != 0;
  x->root_dir = nl_xstrdup(root_dir);
  x->runtime_pid = runtime_pid;
  if (m->pod_logs_dir) x->logs_dir = nl_xstrdup(m->pod_logs_dir);
}

static void node_work(uv_work_t *w) {
  query_t *q = w->data;
  nl_node_sample_read(&q->node, q->s->root_dir, q->image_mount, q->cadvisor.fs_root,
                      q->cadvisor.v2);
  if (q->kind != RESOURCE)
    nl_cadvisor_read(&q->cadvisor, q->pods, q->s->root_dir, q->image_mount);
  else
    nl_cadvisor_read_swap(&q->cadvisor, q->pods);
  if (q->kind == SUMMARY) nl_summary_sys_read(&q->sys, &q->cadvisor, q->pods);
}

static void node_done(uv_work_t *w, int status) {
  query_t *q = w->data;
  (void)status; /* never cancelled: stop waits for the query */
  q->state = Q_ANSWER;
  step(q);
}

static void answer(query_t *q) {
  nl_stats_server_t *s = q->s;
  nl_buf_t out = NL_BUF_INIT;
  if (q->kind == RESOURCE) {
    nl_stats_resource_metrics(&q->node, q->pods, &q->cadvisor, q->error, &out);
    nl_cadvisor_free(&q->cadvisor);
    nl_http_resp_header(q->resp, "Content-Type", NL_METRICS_CONTENT_TYPE);
  } else if (q->kind == CADVISOR) {
    nl_stats_cadvisor_metrics(&q->node, q->pods, &q->cadvisor, q->error, &out);
    nl_cadvisor_free(&q->cadvisor);
    nl_http_resp_header(q->resp, "Content-Type", NL_METRICS_CONTENT_TYPE);
  } else {
    nl_stats_summary_json_ext(&s->stats, s->node_name, &q->node, q->pods, q->img, &q->sys,
                              &q->cadvisor, &out);
    if (q->sys.runtime_pid > 0) s->runtime_pid = q->sys.runtime_pid;
    nl_summary_sys_free(&q->sys);
    nl_cadvisor_free(&q->cadvisor);
    nl_http_resp_header(q->resp, "Content-Type", "application/json");
  }
  nl_http_resp_send(q->resp, 200, out.data ? out.data : "", out.len);
  nl_buf_free(&out);
  if (q->img) protobuf_c_message_free_unpacked(&q->img->base, NULL);
  if (q->ctrs) {
    nl_stats_pods_free(q->pods);
    protobuf_c_message_free_unpacked(&q->ctrs->base, NULL);
  } else if (q->pods) {
    protobuf_c_message_free_unpacked(&q->pods->base, NULL);
  }
  free(q->image_mount);
  free(q);
  assert(s->inflight > 0);
  if (--s->inflight == 0 && s->stopping) {
    nl_stats_free(&s->stats);
    free(s->pods_cgroup), s->pods_cgroup = NULL;
    if (s->stop_done) s->stop_done(s->stop_ctx);
  }
}

static void step(query_t *q) {
  switch (q->state) {
  case Q_IMAGE_FS: {
    Runtime__V1__ImageFsInfoRequest r = RUNTIME__V1__IMAGE_FS_INFO_REQUEST__INIT;
    nl_cri_image_fs_info(q->s->cri, &r, on_image_fs, q);
    break;
  }
  case Q_POD_STATS: {
    Runtime__V1__ListPodSandboxStatsRequest r = RUNTIME__V1__LIST_POD_SANDBOX_STATS_REQUEST__INIT;
    nl_cri_list_pod_sandbox_stats(q->s->cri, &r, on_pod_stats, q);
    break;
  }
  case Q_CONTAINER_STATS: {
    Runtime__V1__ListContainerStatsRequest r = RUNTIME__V1__LIST_CONTAINER_STATS_REQUEST__INIT;
    nl_cri_list_container_stats(q->s->cri, &r, on_container_stats, q);
    break;
  }
  case Q_NODE:
    /* resource too: the containers' creation times and cgroups (their swap) */
    nl_cadvisor_prepare(&q->cadvisor, q->pods, &q->s->meta);
    if (q->kind == SUMMARY) sys_prepare(&q->sys, &q->s->meta, q->s->root_dir, q->s->runtime_pid);
    q->work.data = q;
    if (uv_queue_work(q->s->loop, &q->work, node_work, node_done) != 0) {
      q->state = Q_ANSWER;
      step(q);
    }
    break;
  case Q_ANSWER:
    answer(q);
    break;
  }
}

static void start(nl_stats_server_t *s, nl_http_resp_t *resp, kind_t kind) {
  if (s->stopping) {
    nl_http_resp_send_str(resp, 503, "stopping");
    return;
  }
  query_t *q = nl_xcalloc(1, sizeof *q);
  q->s = s;
  q->resp = resp;
  q->kind = kind;
  s->inflight++;
  step(q);
}

void nl_stats_summary_handler(void *ctx, const nl_http_req_t *req, const nl_kserver_user_t *user,
                              nl_http_resp_t *resp) {
  (void)req, (void)user;
  start(ctx, resp, SUMMARY);
}

void nl_stats_resource_handler(void *ctx, const nl_http_req_t *req,
                               const nl_kserver_user_t *user, nl_http_resp_t *resp) {
  (void)req, (void)user;
  start(ctx, resp, RESOURCE);
}

void nl_stats_cadvisor_handler(void *ctx, const nl_http_req_t *req,
                               const nl_kserver_user_t *user, nl_http_resp_t *resp) {
  (void)req, (void)user;
  start(ctx, resp, CADVISOR);
}

void nl_stats_server_init(nl_stats_server_t *s, uv_loop_t *loop, nl_cri_client_t *cri,
                          const char *node_name, const char *root_dir) {
  memset(s, 0, sizeof *s);
  s->loop = loop;
  s->cri = cri;
  s->node_name = node_name;
  s->root_dir = root_dir;
  nl_stats_init(&s->stats);
}

void nl_stats_server_stop(nl_stats_server_t *s, void (*done)(void *ctx), void *ctx) {
  s->stopping = true;
  s->stop_done = done;
  s->stop_ctx = ctx;
  if (s->inflight == 0) {
    nl_stats_free(&s->stats);
    free(s->pods_cgroup), s->pods_cgroup = NULL;
    if (done) done(ctx);
  }
}
