/* The commands of `nanolet cri`. Each is a chain of CRI calls on the
 * invocation's own loop: a callback formats what it got into x->out and either
 * starts the next call or finishes. Nothing is written while the loop runs;
 * cmd_cri.c prints x->out and x->err once it has ended. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/cmd_cri_fmt.h"
#include "agent/cmd_cri_follow.h"
#include "agent/cmd_cri_impl.h"
#include "agent/cmd_cri_json.h"
#include "cri/image.h"
#include "cri/runtime.h"
#include "reactor/xalloc.h"

void nl_cmd_cri__finish(nl_cmd_cri_ctx_t *x, int rc) {
  if (x->finished) return;
  x->finished = true;
  x->rc = rc;
  nl_cri_client_stop(&x->client, NULL);
}

void nl_cmd_cri__fail(nl_cmd_cri_ctx_t *x, const char *fmt, ...) {
  if (x->finished) return;
  va_list ap;
  va_start(ap, fmt);
  char *m = NULL;
  if (vasprintf(&m, fmt, ap) < 0) m = NULL;
  va_end(ap);
  nl_buf_printf(&x->err, "nanolet cri: %s: %s\n", x->verb->name, m ? m : fmt);
  free(m);
  nl_cmd_cri__finish(x, 1);
}

/* Fails x when st is not OK; returns true then. */
static bool failed(nl_cmd_cri_ctx_t *x, const nl_grpc_status_t *st) {
  if (st->code == NL_GRPC_OK) return false;
  char *m = nl_grpc_status_format(st);
  nl_cmd_cri__fail(x, "%s", m);
  free(m);
  return true;
}

static void emit_json(nl_cmd_cri_ctx_t *x, json_t *v) {
  char *s = json_dumps(v, JSON_INDENT(2) | JSON_ENCODE_ANY);
  nl_buf_puts(&x->out, s);
  nl_buf_puts(&x->out, "\n");
  free(s);
  json_decref(v);
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- ID prefixes ---------------------------------------------------------------
 * crictl hands IDs to the runtime, and containerd resolves unique prefixes
 * itself; other runtimes need not, so nanolet resolves them from a listing. */

/* Picks the one ID equal to want, else the one starting with it. */
static void resolve(nl_cmd_cri_ctx_t *x, const char *what, size_t n,
                    const char *(*id_of)(void *, size_t), void *items) {
  const char *want = x->args[0], *hit = NULL;
  size_t matches = 0, wl = strlen(want);
  for (size_t i = 0; i < n; i++) {
    const char *id = id_of(items, i);
    if (!strcmp(id, want)) {
      hit = id;
      matches = 1;
      break;
    }
    if (wl && !strncmp(id, want, wl)) {
      hit = id;
      matches++;
    }
  }
  if (matches == 0)
    return nl_cmd_cri__fail(x, "%s \"%s\" not found (no ID or ID prefix matches)", what, want);
  if (matches > 1)
    return nl_cmd_cri__fail(x, "ID prefix \"%s\" is ambiguous: it matches %zu %ss", want, matches,
                            what);
  x->id = nl_xstrdup(hit);
  x->next(x);
}

static const char *container_id_at(void *items, size_t i) {
  return ((Runtime__V1__Container **)items)[i]->id;
}
static const char *sandbox_id_at(void *items, size_t i) {
  return ((Runtime__V1__PodSandbox **)items)[i]->id;
}

static void on_resolve_container(const nl_grpc_status_t *st, Runtime__V1__ListContainersResponse *r,
                                 void *ctx) {
  nl_cmd_cri_ctx_t *x = ctx;
  if (failed(x, st)) return;
  resolve(x, "container", r->n_containers, container_id_at, r->containers);
}

static void resolve_container(nl_cmd_cri_ctx_t *x, nl_cmd_cri_step next) {
  Runtime__V1__ListContainersRequest req = RUNTIME__V1__LIST_CONTAINERS_REQUEST__INIT;
  x->next = next;
  nl_cri_list_containers(&x->client, &req, on_resolve_container, x);
}

static void on_resolve_sandbox(const nl_grpc_status_t *st, Runtime__V1__ListPodSandboxResponse *r,
                               void *ctx) {
  nl_cmd_cri_ctx_t *x = ctx;
  if (failed(x, st)) return;
  resolve(x, "pod sandbox", r->n_items, sandbox_id_at, r->items);
}

/* ---- version, info --------------------------------------------------------------- */

static void on_version(const nl_grpc_status_t *st, Runtime__V1__VersionResponse *r, void *ctx) {
  nl_cmd_cri_ctx_t *x = ctx;
  if (failed(x, st)) return;
  if (x->json) {
    emit_json(x, nl_cmd_cri__to_json(&r->base));
  } else {
    nl_buf_printf(&x->out,
                  "Version:  %s\nRuntimeName:  %s\nRuntimeVersion:  %s\nRuntimeApiVersion:  %s\n",
                  r->version, r->runtime_name, r->runtime_version, r->runtime_api_version);
  }
  nl_cmd_cri__finish(x, 0);
}

static void start_version(nl_cmd_cri_ctx_t *x) {
  Runtime__V1__VersionRequest req = RUNTIME__V1__VERSION_REQUEST__INIT;
  req.version = "v1";
  nl_cri_version(&x->client, &req, on_version, x);
}

/* info, inspect, inspectp: the status (may be NULL) with the verbose info map
 * merged in, as JSON. */
static void emit_status(nl_cmd_cri_ctx_t *x, const nl_grpc_status_t *st,
                        const ProtobufCMessage *status, size_t n_info, void **info) {
  if (failed(x, st)) return;
  emit_json(x, nl_cmd_cri__with_info(nl_cmd_cri__to_json(status), n_info, info));
  nl_cmd_cri__finish(x, 0);
}

/* As crictl info: the status, the runtime handlers and their features (a
 * runtime that lists none, such as containerd 1.6, has none), the runtime's
 * features (none from 1.6 either), the info map. */
static void on_info(const nl_grpc_status_t *st, Runtime__V1__StatusResponse *r, void *ctx) {
  nl_cmd_cri_ctx_t *x = ctx;
  if (failed(x, st)) return;
  json_t *o = nl_cmd_cri__with_info(nl_cmd_cri__to_json(r->status ? &r->status->base : NULL),
                                    r->n_info, (void **)r->info);
  json_t *handlers = json_array();
  for (size_t i = 0; i < r->n_runtime_handlers; i++)
    json_array_append_new(handlers, nl_cmd_cri__to_json(&r->runtime_handlers[i]->base));
  json_object_set_new(o, "runtimeHandlers", handlers);
  if (r->features) json_object_set_new(o, "features", nl_cmd_cri__to_json(&r->features->base));
  emit_json(x, o);
  nl_cmd_cri__finish(x, 0);
}

static void start_info(nl_cmd_cri_ctx_t *x) {
  Runtime__V1__StatusRequest req = RUNTIME__V1__STATUS_REQUEST__INIT;
  req.verbose = true;
  nl_cri_status(&x->client, &req, on_info, x);
}

/* ---- pods, ps, images -------------------------------------------------------------- */

static int newest_first(int64_t x, int64_t y) { return x < y ? 1 : x > y ? -1 : 0; } /* as crictl */

static int cmp_sandbox(const void *a, const void *b) {
  return newest_first((*(Runtime__V1__PodSandbox *const *)a)->created_at,
                      (*(Runtime__V1__PodSandbox *const *)b)->created_at);
}

/* What pods, ps and images share: -o json prints the whole response, -q the ID
 * (the char * at id_offset) of each of the n items, a line each. Returns true
 * when it wrote the output and finished, false when the caller prints its
 * table. */
static bool json_or_ids(nl_cmd_cri_ctx_t *x, ProtobufCMessage *resp, void **items, size_t n,
                        size_t id_offset) {
  if (x->json) {
    emit_json(x, nl_cmd_cri__to_json(resp));
  } else if (x->quiet) {
    for (size_t i = 0; i < n; i++)
      nl_buf_printf(&x->out, "%s\n", *(char **)((char *)items[i] + id_offset));
  } else {
    return false;
  }
  nl_cmd_cri__finish(x, 0);
  return true;
}

static void on_pods(const nl_grpc_status_t *st, Runtime__V1__ListPodSandboxResponse *r, void *ctx) {
  nl_cmd_cri_ctx_t *x = ctx;
  if (failed(x, st)) return;
  if (r->n_items > 1) qsort(r->items, r->n_items, sizeof *r->items, cmp_sandbox);
  if (json_or_ids(x, &r->base, (void **)r->items, r->n_items,
                  offsetof(Runtime__V1__PodSandbox, id)))
    return;
  nl_cmd_cri_table_t t;
  static const char *const head[] = {"POD ID", "CREATED", "STATE", "NAME", "NAMESPACE", "ATTEMPT"};
  nl_cmd_cri__table_init(&t, 6, head);
  int64_t now = now_ns();
  for (size_t i = 0; i < r->n_items; i++) {
    Runtime__V1__PodSandbox *p = r->items[i];
    char idb[16], ago[48], att[16];
    const char *id = nl_cmd_cri__short_id(p->id, 0, x->no_trunc, idb, sizeof idb);
    snprintf(att, sizeof att, "%u", p->metadata ? p->metadata->attempt : 0);
    const char *row[] = {
        id,
        nl_cmd_cri__ago(now, p->created_at, ago, sizeof ago),
        p->state == RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY ? "Ready" : "NotReady",
        p->metadata ? p->metadata->name : "",
        p->metadata ? p->metadata->namespace_ : "",
        att};
    nl_cmd_cri__table_row(&t, row);
  }
  nl_cmd_cri__table_flush(&t, &x->out);
  nl_cmd_cri__finish(x, 0);
}

static void start_pods(nl_cmd_cri_ctx_t *x) {
  Runtime__V1__ListPodSandboxRequest req = RUNTIME__V1__LIST_POD_SANDBOX_REQUEST__INIT;
  nl_cri_list_pod_sandbox(&x->client, &req, on_pods, x);
}

static const char *container_state(Runtime__V1__ContainerState s) {
  switch (s) {
    case RUNTIME__V1__CONTAINER_STATE__CONTAINER_CREATED: return "Created";
    case RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING: return "Running";
    case RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED: return "Exited";
    default: return "Unknown";
  }
}

static int cmp_container(const void *a, const void *b) {
  return newest_first((*(Runtime__V1__Container *const *)a)->created_at,
                      (*(Runtime__V1__Container *const *)b)->created_at);
}

static void on_ps(const nl_grpc_status_t *st, Runtime__V1__ListContainersResponse *r, void *ctx) {
  nl_cmd_cri_ctx_t *x = ctx;
  if (failed(x, st)) return;
  if (r->n_containers > 1) qsort(r->containers, r->n_containers, sizeof *r->containers, cmp_container);
  if (json_or_ids(x, &r->base, (void **)r->containers, r->n_containers,
                  offsetof(Runtime__V1__Container, id)))
    return;
  nl_cmd_cri_table_t t;
  static const char *const head[] = {"CONTAINER", "IMAGE",   "CREATED", "STATE",
                                     "NAME",      "ATTEMPT", "POD ID"};
  nl_cmd_cri__table_init(&t, 7, head);
  int64_t now = now_ns();
  for (size_t i = 0; i < r->n_containers; i++) {
    Runtime__V1__Container *c = r->containers[i];
    char idb[16], imb[16], podb[16], ago[48], att[16];
    const char *image = c->image && *c->image->image ? c->image->image : c->image_ref;
    if (!strncmp(image, "sha256:", 7)) /* an image ID, not a name: short as crictl */
      image = nl_cmd_cri__short_id(image, 1, x->no_trunc, imb, sizeof imb);
    snprintf(att, sizeof att, "%u", c->metadata ? c->metadata->attempt : 0);
    const char *row[] = {
        nl_cmd_cri__short_id(c->id, 0, x->no_trunc, idb, sizeof idb),
        image,
        nl_cmd_cri__ago(now, c->created_at, ago, sizeof ago),
        container_state(c->state),
        c->metadata ? c->metadata->name : "",
        att,
        nl_cmd_cri__short_id(c->pod_sandbox_id, 0, x->no_trunc, podb, sizeof podb)};
    nl_cmd_cri__table_row(&t, row);
  }
  nl_cmd_cri__table_flush(&t, &x->out);
  nl_cmd_cri__finish(x, 0);
}

static void start_ps(nl_cmd_cri_ctx_t *x) {
  Runtime__V1__ListContainersRequest req = RUNTIME__V1__LIST_CONTAINERS_REQUEST__INIT;
  Runtime__V1__ContainerFilter f = RUNTIME__V1__CONTAINER_FILTER__INIT;
  Runtime__V1__ContainerStateValue running = RUNTIME__V1__CONTAINER_STATE_VALUE__INIT;
  running.state = RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING;
  if (!x->all) { /* crictl ps shows running containers unless -a */
    f.state = &running;
    req.filter = &f;
  }
  nl_cri_list_containers(&x->client, &req, on_ps, x);
}

static int cmp_image(const void *a, const void *b) {
  const Runtime__V1__Image *x = *(Runtime__V1__Image *const *)a,
                           *y = *(Runtime__V1__Image *const *)b;
  return strcmp(x->n_repo_tags ? x->repo_tags[0] : "", y->n_repo_tags ? y->repo_tags[0] : "");
}

/* "registry:5000/name:tag" -> repo and tag; the tag is after the last ':' that
 * follows the last '/'. */
static void split_ref(const char *ref, char sep, char **repo, const char **tag) {
  const char *slash = strrchr(ref, '/'), *c = strrchr(ref, sep);
  if (!c || (slash && c < slash)) {
    *repo = nl_xstrdup(ref);
    *tag = "<none>";
    return;
  }
  *repo = nl_xstrndup(ref, (size_t)(c - ref));
  *tag = c + 1;
}

static void on_images(const nl_grpc_status_t *st, Runtime__V1__ListImagesResponse *r, void *ctx) {
  nl_cmd_cri_ctx_t *x = ctx;
  if (failed(x, st)) return;
  if (r->n_images > 1) qsort(r->images, r->n_images, sizeof *r->images, cmp_image);
  if (json_or_ids(x, &r->base, (void **)r->images, r->n_images, offsetof(Runtime__V1__Image, id)))
    return;
  nl_cmd_cri_table_t t;
  static const char *const head[] = {"IMAGE", "TAG", "IMAGE ID", "SIZE"};
  nl_cmd_cri__table_init(&t, 4, head);
  for (size_t i = 0; i < r->n_images; i++) {
    Runtime__V1__Image *im = r->images[i];
    char idb[16], size[32];
    const char *id = nl_cmd_cri__short_id(im->id, 1, x->no_trunc, idb, sizeof idb);
    nl_cmd_cri__size(im->size, size, sizeof size);
    /* One row per tag; untagged images show their digests' repositories. */
    size_t n = im->n_repo_tags ? im->n_repo_tags : im->n_repo_digests;
    for (size_t j = 0; j < n || (n == 0 && j == 0); j++) {
      char *repo;
      const char *tag;
      if (im->n_repo_tags)
        split_ref(im->repo_tags[j], ':', &repo, &tag);
      else if (n)
        split_ref(im->repo_digests[j], '@', &repo, &tag), tag = "<none>";
      else
        repo = nl_xstrdup("<none>"), tag = "<none>";
      const char *row[] = {repo, tag, id, size};
      nl_cmd_cri__table_row(&t, row);
      free(repo);
    }
  }
  nl_cmd_cri__table_flush(&t, &x->out);
  nl_cmd_cri__finish(x, 0);
}

static void start_images(nl_cmd_cri_ctx_t *x) {
  Runtime__V1__ListImagesRequest req = RUNTIME__V1__LIST_IMAGES_REQUEST__INIT;
  nl_cri_list_images(&x->client, &req, on_images, x);
}

/* ---- inspect, inspectp -------------------------------------------------------------- */

static void on_inspect(const nl_grpc_status_t *st, Runtime__V1__ContainerStatusResponse *r,
                       void *ctx) {
  emit_status(ctx, st, r->status ? &r->status->base : NULL, r->n_info, (void **)r->info);
}

static void inspect_resolved(nl_cmd_cri_ctx_t *x) {
  Runtime__V1__ContainerStatusRequest req = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
  req.container_id = x->id;
  req.verbose = true;
  nl_cri_container_status(&x->client, &req, on_inspect, x);
}

static void start_inspect(nl_cmd_cri_ctx_t *x) { resolve_container(x, inspect_resolved); }

static void on_inspectp(const nl_grpc_status_t *st, Runtime__V1__PodSandboxStatusResponse *r,
                        void *ctx) {
  emit_status(ctx, st, r->status ? &r->status->base : NULL, r->n_info, (void **)r->info);
}

static void inspectp_resolved(nl_cmd_cri_ctx_t *x) {
  Runtime__V1__PodSandboxStatusRequest req = RUNTIME__V1__POD_SANDBOX_STATUS_REQUEST__INIT;
  req.pod_sandbox_id = x->id;
  req.verbose = true;
  nl_cri_pod_sandbox_status(&x->client, &req, on_inspectp, x);
}

static void start_inspectp(nl_cmd_cri_ctx_t *x) {
  Runtime__V1__ListPodSandboxRequest req = RUNTIME__V1__LIST_POD_SANDBOX_REQUEST__INIT;
  x->next = inspectp_resolved;
  nl_cri_list_pod_sandbox(&x->client, &req, on_resolve_sandbox, x);
}

/* ---- exec ------------------------------------------------------------------------------ */

static void on_exec(const nl_grpc_status_t *st, Runtime__V1__ExecSyncResponse *r, void *ctx) {
  nl_cmd_cri_ctx_t *x = ctx;
  if (failed(x, st)) return;
  nl_buf_append(&x->out, r->stdout.data, r->stdout.len);
  nl_buf_append(&x->err, r->stderr.data, r->stderr.len);
  nl_cmd_cri__finish(x, r->exit_code);
}

static void exec_resolved(nl_cmd_cri_ctx_t *x) {
  Runtime__V1__ExecSyncRequest req = RUNTIME__V1__EXEC_SYNC_REQUEST__INIT;
  req.container_id = x->id;
  req.cmd = x->args + 1;
  req.n_cmd = (size_t)(x->nargs - 1);
  /* As crictl exec: no time limit on the command unless --timeout is given. */
  req.timeout = x->timeout_set ? (int64_t)((x->timeout_ms + 999) / 1000) : 0;
  nl_cri_exec_sync(&x->client, &req, on_exec, x);
}

static void start_exec(nl_cmd_cri_ctx_t *x) { resolve_container(x, exec_resolved); }

/* ---- logs -------------------------------------------------------------------------------- */

static void on_logs_status(const nl_grpc_status_t *st, Runtime__V1__ContainerStatusResponse *r,
                           void *ctx) {
  nl_cmd_cri_ctx_t *x = ctx;
  if (failed(x, st)) return;
  if (!r->status || !*r->status->log_path)
    return nl_cmd_cri__fail(x, "container %s has no log file (log_path is empty)", x->id);
  x->log_path = nl_xstrdup(r->status->log_path);
  if (x->follow) {
    nl_cmd_cri__follow_start(x);
    return;
  }
  nl_cmd_cri__finish(x, 0); /* the file is read once the loop is done: after_logs */
}

static void logs_resolved(nl_cmd_cri_ctx_t *x) {
  Runtime__V1__ContainerStatusRequest req = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
  req.container_id = x->id;
  nl_cri_container_status(&x->client, &req, on_logs_status, x);
}

static void start_logs(nl_cmd_cri_ctx_t *x) { resolve_container(x, logs_resolved); }

/* Runs after the loop has ended: plain blocking reads and writes are the
 * simple thing here. */
static void after_logs(nl_cmd_cri_ctx_t *x) {
  if (x->follow) return; /* printed while following */
  FILE *f = fopen(x->log_path, "rb");
  if (!f) {
    nl_buf_printf(&x->err, "nanolet cri: logs: open %s: %m\n", x->log_path);
    x->rc = 1;
    return;
  }
  nl_buf_t data = NL_BUF_INIT;
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) nl_buf_append(&data, chunk, n);
  fclose(f);
  nl_cmd_cri_log_line_t *lines;
  size_t bad, nl = nl_cmd_cri__log_parse(data.data ? data.data : "", data.len, &lines, &bad);
  nl_cmd_cri__log_print(lines, nl, x->tail);
  nl_cmd_cri__log_free(lines, nl);
  nl_buf_free(&data);
}

const nl_cmd_cri_verb_t nl_cmd_cri__verbs[] = {
    {"version", "o", 0, 0, false, "", "Show the runtime's name and version", start_version, NULL},
    {"info", "o", 0, 0, true, "", "Show the runtime's status and configuration (JSON)", start_info,
     NULL},
    {"pods", "oqn", 0, 0, false, "", "List pod sandboxes", start_pods, NULL},
    {"ps", "oqna", 0, 0, false, "", "List containers (running ones unless -a)", start_ps, NULL},
    {"images", "oqn", 0, 0, false, "", "List images", start_images, NULL},
    {"inspectp", "o", 1, 1, true, "POD-ID", "Show a pod sandbox's status (JSON)", start_inspectp,
     NULL},
    {"inspect", "o", 1, 1, true, "CONTAINER-ID", "Show a container's status (JSON)", start_inspect,
     NULL},
    {"exec", "ti", 2, -1, false, "CONTAINER-ID [--] COMMAND [ARG...]",
     "Run a command in a container (ExecSync) and exit with its code", start_exec, NULL},
    {"logs", "lf", 1, 1, false, "CONTAINER-ID", "Print a container's log", start_logs, after_logs},
    {NULL, NULL, 0, 0, false, NULL, NULL, NULL, NULL},
};
