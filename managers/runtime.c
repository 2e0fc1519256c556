/* The runtime manager: lifetime of operations, stop, and the public entry points.
 * Every operation is a heap object on rt->ops that outlives its callback while
 * CRI calls or fs jobs it started are outstanding (op->pending); completions of a
 * cancelled operation only count down and free. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "managers/hooks.h"
#include "managers/runtime_internal.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

static char *dup0(const char *s) { return s ? nl_xstrdup(s) : NULL; }

int nl_runtime_init(nl_runtime_t *rt, uv_loop_t *loop, nl_cri_client_t *cri,
                    const nl_runtime_opts_t *opts, nl_err_t **err) {
  if (!opts || !opts->root_dir || !*opts->root_dir)
    return nl_err_set(err, NL_EINVAL, "runtime: root directory is required");
  if (!opts->pod_logs_dir || !*opts->pod_logs_dir)
    return nl_err_set(err, NL_EINVAL, "runtime: pod logs directory is required");
  memset(rt, 0, sizeof *rt);
  rt->loop = loop;
  rt->cri = cri;
  rt->opts = *opts;
  rt->opts.node_name = dup0(opts->node_name);
  rt->opts.root_dir = dup0(opts->root_dir);
  rt->opts.pod_logs_dir = dup0(opts->pod_logs_dir);
  rt->opts.cluster_domain = dup0(opts->cluster_domain);
  rt->opts.resolv_conf = dup0(opts->resolv_conf ? opts->resolv_conf : "/etc/resolv.conf");
  rt->opts.node_ip = dup0(opts->node_ip);
  rt->opts.cluster_dns = opts->n_cluster_dns ? nl_xcalloc(opts->n_cluster_dns, sizeof(char *)) : NULL;
  for (size_t i = 0; i < opts->n_cluster_dns; i++)
    rt->opts.cluster_dns[i] = nl_xstrdup(opts->cluster_dns[i]);
  if (!opts->cpu_cfs_quota_set) rt->opts.cpu_cfs_quota = true;
  if (rt->opts.node_cpu_milli <= 0) rt->opts.node_cpu_milli = sysconf(_SC_NPROCESSORS_ONLN) * 1000;
  if (rt->opts.node_memory_bytes <= 0)
    rt->opts.node_memory_bytes = (int64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
  nl_backoff_table_init(&rt->backoff,
                        opts->backoff_initial_ms ? opts->backoff_initial_ms
                                                 : NL_RUNTIME_BACKOFF_INITIAL_MS,
                        opts->backoff_max_ms ? opts->backoff_max_ms : NL_RUNTIME_BACKOFF_MAX_MS);
  nl_images_init(&rt->images, loop, cri, opts->serialize_image_pulls,
                 opts->max_parallel_image_pulls, opts->image_backoff_initial_ms,
                 opts->image_backoff_max_ms);
  rt->images.events = opts->events;
  rt->images.credprov = opts->credprov;
  rt->now_ms = nl__wall_ms;
  nl_list_init(&rt->ops);
  return 0;
}

void nl_runtime_set_probe_source(nl_runtime_t *rt, nl_runtime_probe_fn fn, void *ctx) {
  rt->probe = fn;
  rt->probe_ctx = ctx;
}

void nl_runtime_set_stop_listener(nl_runtime_t *rt, nl_runtime_stopping_fn fn, void *ctx) {
  rt->stop_listener = fn;
  rt->stop_listener_ctx = ctx;
}

void nl_runtime_set_version(nl_runtime_t *rt, const char *name, const char *version) {
  free(rt->runtime_name);
  free(rt->runtime_version);
  rt->runtime_name = name ? nl_xstrdup(name) : NULL;
  rt->runtime_version = version ? nl_xstrdup(version) : NULL;
}

void nl__stop_container(nl_runtime_t *rt, const char *id, int64_t grace,
                        nl_cri_stop_container_cb cb, void *ctx) {
  if (rt->stop_listener) rt->stop_listener(rt->stop_listener_ctx, id);
  Runtime__V1__StopContainerRequest req = RUNTIME__V1__STOP_CONTAINER_REQUEST__INIT;
  req.container_id = (char *)id;
  req.timeout = grace;
  nl_cri_stop_container(rt->cri, &req, cb, ctx);
}

static void free_opts(nl_runtime_opts_t *o) {
  free((char *)o->node_name);
  free((char *)o->root_dir);
  free((char *)o->pod_logs_dir);
  free((char *)o->cluster_domain);
  free((char *)o->resolv_conf);
  free((char *)o->node_ip);
  for (size_t i = 0; i < o->n_cluster_dns; i++) free(o->cluster_dns[i]);
  free(o->cluster_dns);
}

static void maybe_stopped(nl_runtime_t *rt) {
  if (!rt->stopping || !nl_list_empty(&rt->ops)) return;
  nl_backoff_table_free(&rt->backoff);
  nl_images_free(&rt->images);
  free_opts(&rt->opts);
  nl_runtime_set_version(rt, NULL, NULL);
  rt->stopping = false;
  nl_runtime_stop_cb cb = rt->stop_cb;
  rt->stop_cb = NULL;
  if (cb) cb(rt);
}

void nl_runtime_stop(nl_runtime_t *rt, nl_runtime_stop_cb done_cb) {
  rt->stopping = true;
  rt->stop_cb = done_cb;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &rt->ops) {
    nl_runtime_op_t *op = nl_list_entry(pos, nl_runtime_op_t, link);
    nl__op_hooks_cancel(op);
    if (!op->finished) {
      op->result.cancelled = true;
      if (!op->result.err) nl_err_set(&op->result.err, NL_ECLOSED, "runtime stopped");
      nl__op_finish(op);
    }
  }
  maybe_stopped(rt);
}

/* ---- operations ---- */

nl_runtime_op_t *nl__op_new(nl_runtime_t *rt, nl__op_kind_t kind, const nl_pod_t *pod,
                            const nl_rt_pod_status_t *status, nl_runtime_sync_cb cb, void *ctx) {
  nl_runtime_op_t *op = nl_xcalloc(1, sizeof *op);
  op->rt = rt;
  op->kind = kind;
  op->pod = pod ? nl_pod_ref(pod) : NULL;
  op->status = nl_rt_pod_status_dup(status);
  if (pod) {
    op->uid = dup0(pod->metadata.uid);
    op->desc = nl__pod_desc(pod);
  } else {
    op->uid = dup0(status && status->uid ? status->uid : "");
    op->desc = nl_xasprintf("%s_%s(%s)", status && status->name ? status->name : "",
                            status && status->namespace_ ? status->namespace_ : "", op->uid);
  }
  op->cb = cb;
  op->ctx = ctx;
  op->grace_override = -1;
  nl_list_insert_tail(&rt->ops, &op->link);
  return op;
}

static void op_free(nl_runtime_op_t *op) {
  nl_runtime_t *rt = op->rt;
  nl_list_remove(&op->link);
  if (op->pod) nl_pod_free(op->pod);
  nl_rt_pod_status_free(op->status);
  free(op->uid);
  free(op->desc);
  nl__sync_result_clear(&op->result);
  nl_pod_actions_free(&op->actions);
  nl__resize_run_free(op->resize_run);
  free(op->sandbox_id);
  for (size_t i = 0; i < op->n_pod_ips; i++) free(op->pod_ips[i]);
  free(op->pod_ips);
  nl_host_dns_free(&op->host_dns);
  nl_err_free(&op->userns_err);
  if (op->sandbox_config) protobuf_c_message_free_unpacked(&op->sandbox_config->base, NULL);
  free(op->cur_image_ref);
  nl__image_volumes_free(op);
  free(op->cur_term_path);
  free(op->cur_hosts_path);
  nl_env_free(op->cur_file_env, op->n_cur_file_env);
  free(op->cur_id);
  free(op->kill_order);
  free(op->reset);
  nl_keyring_free(&op->keyring);
  free(op->keyring_msg);
  free(op);
  maybe_stopped(rt);
}

void nl__op_finish(nl_runtime_op_t *op) {
  if (!op->finished) {
    op->finished = true;
    if (!op->cancelled && op->cb) op->cb(&op->result, op->ctx);
  }
  if (op->pending == 0) op_free(op);
}

bool nl__op_resume(nl_runtime_op_t *op) {
  op->pending--;
  if (op->finished || op->cancelled) {
    if (op->pending == 0) {
      op->finished = true;
      op_free(op);
    }
    return false;
  }
  return true;
}

void nl__op_fail(nl_runtime_op_t *op, int code, const char *fmt, ...) {
  if (!op->result.err) {
    va_list ap;
    va_start(ap, fmt);
    nl_err_setv(&op->result.err, code, fmt, ap);
    va_end(ap);
  }
  nl__op_finish(op);
}

void nl_runtime_cancel(nl_runtime_op_t *op) {
  if (!op || op->finished) return;
  op->cancelled = true;
  nl__op_hooks_cancel(op); /* their callbacks come soon and drop their holds */
  if (op->img.job) { /* its callback will not come: release what it held */
    nl_images_cancel(&op->img);
    op->pending--;
  }
  if (op->pending == 0) {
    op->finished = true;
    op_free(op);
  }
}

/* Starts an op on the next loop turn so the callback never runs inside the call. */
typedef struct kick {
  uv_idle_t idle; /* closed at once; a zero timer would also do */
  nl_runtime_op_t *op;
  void (*fn)(nl_runtime_op_t *op);
} kick_t;

static void kick_closed(uv_handle_t *h) { free(container_of((uv_idle_t *)h, kick_t, idle)); }

static void kick_cb(uv_idle_t *h) {
  kick_t *k = container_of(h, kick_t, idle);
  uv_idle_stop(h);
  uv_close((uv_handle_t *)h, kick_closed);
  if (nl__op_resume(k->op)) k->fn(k->op);
}

nl_runtime_op_t *nl__op_kick(nl_runtime_op_t *op, void (*fn)(nl_runtime_op_t *)) {
  kick_t *k = nl_xcalloc(1, sizeof *k);
  k->op = op;
  k->fn = fn;
  op->pending++;
  uv_idle_init(op->rt->loop, &k->idle);
  uv_idle_start(&k->idle, kick_cb);
  return op;
}

nl_runtime_op_t *nl_runtime_sync_pod(nl_runtime_t *rt, const nl_pod_t *pod,
                                     const nl_rt_pod_status_t *status,
                                     nl_runtime_sync_cb cb, void *ctx) {
  return nl__op_kick(nl__op_new(rt, NL__OP_SYNC, pod, status, cb, ctx), nl__sync_start);
}

static void kill_done(nl_runtime_op_t *op, bool ok) {
  (void)ok;
  nl__op_finish(op);
}

static void kill_start(nl_runtime_op_t *op) { nl__kill_pod_start(op, kill_done); }

nl_runtime_op_t *nl_runtime_kill_pod(nl_runtime_t *rt, const nl_pod_t *pod,
                                     const nl_rt_pod_status_t *status, int64_t grace_seconds,
                                     nl_runtime_sync_cb cb, void *ctx) {
  nl_runtime_op_t *op = nl__op_new(rt, NL__OP_KILL, pod, status, cb, ctx);
  op->grace_override = grace_seconds;
  return nl__op_kick(op, kill_start);
}

nl_runtime_op_t *nl_runtime_remove_pod(nl_runtime_t *rt, const nl_rt_pod_status_t *status,
                                       bool remove_dirs, nl_runtime_sync_cb cb, void *ctx) {
  nl_runtime_op_t *op = nl__op_new(rt, NL__OP_REMOVE, NULL, status, cb, ctx);
  op->remove_dirs = remove_dirs;
  return nl__op_kick(op, nl__remove_start);
}
