/* EnsureImageExists (upstream pkg/kubelet/images/image_manager.go) and the
 * serialized/parallel pullers (puller.go). */
#include "managers/images.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cri/image.h"
#include "reactor/duration.h"
#include "managers/runtime_internal.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define IMAGE_BACKOFF_INITIAL_MS (10 * 1000)
#define IMAGE_BACKOFF_MAX_MS (300 * 1000)

typedef struct nl_images_job {
  nl_images_t *im;
  nl_images_req_t *req; /* NULL once cancelled */
  nl_list_t link;       /* in im->queue while waiting for a pull slot */
  char *image;          /* with the default tag */
  char *requested;      /* as the spec wrote it (back-off key, messages) */
  char *backoff_key;
  char *pod_desc;
  nl_event_ref_t ref;   /* owned copy: the pull may outlive the pod */
  uint64_t start_ms, pull_ms; /* Pulling announced; PullImage sent (monotonic) */
  char *image_ref;      /* pulled, waiting for its size */
  bool always;
  bool never;
  bool queued;
  uv_timer_t timer; /* only for an invalid name */
  nl_images_creds_fn creds;
  nl_keyring_cred_t *auth; /* copies of the credentials matching the image */
  size_t n_auth, tried;
  nl_keyring_cred_t *prov; /* the credential providers' for the image, tried last */
  size_t n_prov;
  char **errs; /* the distinct errors of the credentials tried */
  size_t n_errs;
  nl_images_cb cb;
  void *ctx;
} job_t;

static void creds_free(nl_keyring_cred_t *c, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(c[i].username);
    free(c[i].password);
  }
  free(c);
}

/* Copies of the credentials k has for image (NULL, *n 0: none). */
static nl_keyring_cred_t *creds_copy(const nl_keyring_t *k, const char *image, size_t *n) {
  const nl_keyring_cred_t **c;
  *n = nl_keyring_lookup(k, image, &c);
  nl_keyring_cred_t *out = *n ? nl_xcalloc(*n, sizeof *out) : NULL;
  for (size_t i = 0; i < *n; i++) {
    out[i].username = nl_xstrdup(c[i]->username);
    out[i].password = nl_xstrdup(c[i]->password);
  }
  free(c);
  return out;
}

static void job_free(job_t *j) {
  free(j->image);
  free(j->requested);
  free(j->backoff_key);
  free(j->pod_desc);
  free(j->image_ref);
  creds_free(j->auth, j->n_auth);
  creds_free(j->prov, j->n_prov);
  for (size_t i = 0; i < j->n_errs; i++) free(j->errs[i]);
  free(j->errs);
  nl_event_ref_free(&j->ref);
  free(j);
}

void nl_images_init(nl_images_t *im, uv_loop_t *loop, nl_cri_client_t *cri, bool serialize,
                    int max_parallel, uint64_t initial_ms, uint64_t max_ms) {
  memset(im, 0, sizeof *im);
  im->loop = loop;
  im->cri = cri;
  im->serialize = serialize;
  im->max_parallel = max_parallel;
  nl_backoff_table_init(&im->backoff, initial_ms ? initial_ms : IMAGE_BACKOFF_INITIAL_MS,
                        max_ms ? max_ms : IMAGE_BACKOFF_MAX_MS);
  nl_list_init(&im->queue);
  nl_map_init(&im->last_fail);
  im->now_ms = nl__wall_ms;
}

void nl_images_free(nl_images_t *im) {
  while (!nl_list_empty(&im->queue)) {
    job_t *j = nl_list_entry(im->queue.next, job_t, link);
    nl_list_remove(&j->link);
    job_free(j);
  }
  nl_backoff_table_free(&im->backoff);
  nl_map_free(&im->last_fail, free);
}

char *nl_images_default_tag(const char *image) {
  if (!image || !*image) return NULL;
  for (const char *p = image; *p; p++)
    if (isspace((unsigned char)*p) || (unsigned char)*p < 0x20) return NULL;
  const char *at = strchr(image, '@');
  const char *slash = strrchr(image, '/');
  const char *name = slash ? slash + 1 : image;
  if (!*name || image[strlen(image) - 1] == ':' || image[0] == '/' || image[0] == ':') return NULL;
  /* Repository path components are lowercase (the registry host may not be). */
  const char *repo = image;
  const char *first_slash = strchr(image, '/');
  if (first_slash) {
    size_t hl = (size_t)(first_slash - image);
    bool host = memchr(image, '.', hl) || memchr(image, ':', hl) || (hl == 9 && !strncmp(image, "localhost", 9));
    if (host) repo = first_slash + 1;
  }
  const char *end = at ? at : image + strlen(image);
  const char *colon = memchr(name, ':', (size_t)(end - name));
  const char *repo_end = colon ? colon : end;
  for (const char *p = repo; p < repo_end; p++)
    if (isupper((unsigned char)*p)) return NULL;
  if (at || colon) return nl_xstrdup(image);
  return nl_xasprintf("%s:latest", image);
}


static void complete(job_t *j, const char *ref, const char *reason, const char *msg) {
  if (j->req) {
    j->req->job = NULL;
    j->cb(ref, reason, msg, j->ctx);
  }
  job_free(j);
}

static void start_pull(job_t *j);

static void event(job_t *j, const char *type, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void event(job_t *j, const char *type, const char *reason, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  nl_event_vrecord(&j->im->events, &j->ref, type, reason, fmt, ap);
  va_end(ap);
}

/* Go's Duration.String of a millisecond count ("393ms", "1.2s"). */
static const char *dur(uint64_t ms, char *buf, size_t len) {
  return nl_duration_format((int64_t)ms * 1000000, buf, len);
}

/* IsInBackOffSinceUpdate(key, now): within the back-off since the last failure. */
static bool in_backoff(nl_images_t *im, const char *key) {
  uint64_t now = im->now_ms(im->now_ctx);
  uint64_t b = nl_backoff_table_get(&im->backoff, key, now);
  uint64_t *last = nl_map_get(&im->last_fail, key);
  return b && last && now - *last < b;
}

static void record_failure(nl_images_t *im, const char *key) {
  uint64_t now = im->now_ms(im->now_ctx);
  nl_backoff_table_next(&im->backoff, key, now);
  uint64_t *last = nl_map_get(&im->last_fail, key);
  if (!last) {
    last = nl_xmalloc(sizeof *last);
    nl_map_put(&im->last_fail, key, last);
  }
  *last = now;
}

static void next_in_queue(nl_images_t *im) {
  while (!nl_list_empty(&im->queue)) {
    int limit = im->serialize ? 1 : im->max_parallel;
    if (limit > 0 && im->running >= limit) return;
    job_t *j = nl_list_entry(im->queue.next, job_t, link);
    nl_list_remove(&j->link);
    j->queued = false;
    if (!j->req) { /* cancelled while waiting */
      job_free(j);
      continue;
    }
    start_pull(j);
  }
}

static void image_status(job_t *j, const char *image,
                         void (*cb)(const nl_grpc_status_t *, Runtime__V1__ImageStatusResponse *,
                                    void *)) {
  Runtime__V1__ImageStatusRequest req = RUNTIME__V1__IMAGE_STATUS_REQUEST__INIT;
  Runtime__V1__ImageSpec s = RUNTIME__V1__IMAGE_SPEC__INIT;
  s.image = (char *)image;
  req.image = &s;
  nl_cri_image_status(j->im->cri, &req, cb, j);
}

static void size_done(const nl_grpc_status_t *st, Runtime__V1__ImageStatusResponse *resp,
                      void *ctx) {
  job_t *j = ctx;
  char a[32], b[32], size[64] = "";
  if (st->code == NL_GRPC_OK && resp->image)
    snprintf(size, sizeof size, " Image size: %llu bytes.", (unsigned long long)resp->image->size);
  event(j, NL_EVENT_NORMAL, "Pulled", "Successfully pulled image \"%s\" in %s (%s including waiting).%s",
        j->requested, dur(j->pull_ms, a, sizeof a),
        dur(uv_now(j->im->loop) - j->start_ms, b, sizeof b), size);
  complete(j, j->image_ref, NULL, NULL);
}

static void send_pull(job_t *j);

/* utilerrors.NewAggregate's text: one error as it is, several deduplicated in
 * brackets. Takes e. */
static char *aggregate(job_t *j, char *e) {
  bool seen = false;
  for (size_t i = 0; i < j->n_errs; i++) seen = seen || !strcmp(j->errs[i], e);
  if (seen) {
    free(e);
  } else {
    j->errs = nl_xrealloc(j->errs, (j->n_errs + 1) * sizeof *j->errs);
    j->errs[j->n_errs++] = e;
  }
  if (j->n_errs == 1) return nl_xstrdup(j->errs[0]);
  size_t len = 3;
  for (size_t i = 0; i < j->n_errs; i++) len += strlen(j->errs[i]) + 2;
  char *m = nl_xmalloc(len);
  strcpy(m, "[");
  for (size_t i = 0; i < j->n_errs; i++) {
    if (i) strcat(m, ", ");
    strcat(m, j->errs[i]);
  }
  strcat(m, "]");
  return m;
}

/* A pull that failed: the event, the back-off, ErrImagePull. */
static void pull_failed(job_t *j, const char *e) {
  nl_warn("pod %s: failed to pull image \"%s\": %s", j->pod_desc, j->requested, e);
  event(j, NL_EVENT_WARNING, "Failed", "Failed to pull image \"%s\": %s", j->requested, e);
  record_failure(j->im, j->backoff_key);
  complete(j, NULL, NL_IMAGE_ERR_PULL, e);
}

static void pulled(const nl_grpc_status_t *st, Runtime__V1__PullImageResponse *resp, void *ctx) {
  job_t *j = ctx;
  nl_images_t *im = j->im;
  if (st->code != NL_GRPC_OK) {
    char *e = aggregate(j, nl_grpc_status_format(st));
    if (j->req && j->tried + 1 < j->n_auth) { /* the next credential, in the same slot */
      free(e);
      j->tried++;
      send_pull(j);
      return;
    }
    im->running--;
    pull_failed(j, e);
    free(e);
  } else {
    im->running--;
    nl_info("pod %s: successfully pulled image \"%s\"", j->pod_desc, j->requested);
    nl_backoff_table_gc(&im->backoff, im->now_ms(im->now_ctx));
    /* The Pulled event tells the image's size, which ImageStatus knows. */
    j->pull_ms = uv_now(im->loop) - j->pull_ms;
    j->image_ref = nl_xstrdup(resp->image_ref);
    image_status(j, j->image_ref, size_done);
  }
  next_in_queue(im);
}

static void send_pull(job_t *j) {
  j->im->stats_pulls++;
  Runtime__V1__PullImageRequest req = RUNTIME__V1__PULL_IMAGE_REQUEST__INIT;
  Runtime__V1__ImageSpec s = RUNTIME__V1__IMAGE_SPEC__INIT;
  Runtime__V1__AuthConfig auth = RUNTIME__V1__AUTH_CONFIG__INIT;
  s.image = j->image;
  req.image = &s;
  if (j->tried < j->n_auth) {
    auth.username = j->auth[j->tried].username;
    auth.password = j->auth[j->tried].password;
    req.auth = &auth;
  }
  nl_cri_pull_image(j->im->cri, &req, pulled, j);
}

/* Copies the credentials the keyring has for the image; false when the job
 * was completed instead (see nl_images_creds_fn). */
static bool take_creds(job_t *j) {
  if (!j->creds) return true;
  const nl_keyring_t *k = NULL;
  char *msg = NULL;
  int rc = j->creds(j->ctx, &k, &msg);
  if (rc < 0) {
    pull_failed(j, msg);
  } else if (rc > 0) {
    nl_info("pod %s: not pulling image \"%s\" yet: %s", j->pod_desc, j->requested, msg);
    complete(j, NULL, NL_IMAGE_ERR_PULL, msg);
  } else if (k) {
    j->auth = creds_copy(k, j->image, &j->n_auth);
  }
  free(msg);
  if (rc == 0 && j->n_prov) { /* the pull secrets' first, as upstream's union keyring */
    j->auth = nl_xrealloc(j->auth, (j->n_auth + j->n_prov) * sizeof *j->auth);
    memcpy(j->auth + j->n_auth, j->prov, j->n_prov * sizeof *j->prov);
    j->n_auth += j->n_prov;
    free(j->prov);
    j->prov = NULL;
    j->n_prov = 0;
  }
  return rc == 0;
}

static void start_pull(job_t *j) {
  nl_images_t *im = j->im;
  if (!take_creds(j)) return;
  im->running++;
  nl_info("pod %s: pulling image \"%s\"%s", j->pod_desc, j->requested,
          j->n_auth ? " with credentials from its pull secrets or the credential providers" : "");
  j->pull_ms = uv_now(im->loop);
  send_pull(j);
}

static void queue_pull(job_t *j) {
  nl_images_t *im = j->im;
  event(j, NL_EVENT_NORMAL, "Pulling", "Pulling image \"%s\"", j->requested);
  j->start_ms = uv_now(im->loop);
  j->queued = true;
  nl_list_insert_tail(&im->queue, &j->link);
  next_in_queue(im);
}

/* The credential providers answered (k NULL: nothing); the pull goes on. */
static void provider_creds(const nl_keyring_t *k, void *ctx) {
  job_t *j = ctx;
  if (!j->req) { /* cancelled while the plugins ran */
    job_free(j);
    return;
  }
  if (k) j->prov = creds_copy(k, j->image, &j->n_prov);
  queue_pull(j);
}

static void status_done(const nl_grpc_status_t *st, Runtime__V1__ImageStatusResponse *resp,
                        void *ctx) {
  job_t *j = ctx;
  nl_images_t *im = j->im;
  if (!j->req) {
    job_free(j);
    return;
  }
  if (st->code != NL_GRPC_OK) {
    char *e = nl_grpc_status_format(st);
    char *m = nl_xasprintf("Failed to inspect image \"%s\": %s", j->image, e);
    event(j, NL_EVENT_WARNING, "InspectFailed", "%s", m);
    complete(j, NULL, NL_IMAGE_ERR_INSPECT, m);
    free(m);
    free(e);
    return;
  }
  const char *ref = resp->image && resp->image->id && *resp->image->id ? resp->image->id : NULL;
  if (ref && !j->always) { /* shouldPullImage: present and not Always */
    nl_vlog(4, "pod %s: container image \"%s\" already present on machine", j->pod_desc,
            j->requested);
    event(j, NL_EVENT_NORMAL, "Pulled",
          "Container image \"%s\" already present on machine and can be accessed by the pod",
          j->requested);
    complete(j, ref, NULL, NULL);
    return;
  }
  if (!ref && j->never) {
    char *m = nl_xasprintf("Container image \"%s\" is not present with pull policy of Never",
                           j->requested);
    event(j, NL_EVENT_WARNING, "ErrImageNeverPull", "%s", m);
    complete(j, NULL, NL_IMAGE_ERR_NEVER_PULL, m);
    free(m);
    return;
  }
  if (in_backoff(im, j->backoff_key)) {
    char *m = nl_xasprintf("Back-off pulling image \"%s\"", j->requested);
    event(j, NL_EVENT_NORMAL, "BackOff", "%s", m);
    complete(j, NULL, NL_IMAGE_ERR_PULL_BACKOFF, m);
    free(m);
    return;
  }
  if (nl_credprov_wants(im->credprov, j->image)) {
    nl_credprov_lookup(im->credprov, j->image, provider_creds, j);
    return;
  }
  queue_pull(j);
}

static void timer_closed(uv_handle_t *h) { job_free(container_of((uv_timer_t *)h, job_t, timer)); }

static void invalid_name(uv_timer_t *t) {
  job_t *j = container_of(t, job_t, timer);
  if (j->req) {
    char *m = nl_xasprintf("Failed to apply default image tag \"%s\": invalid reference format",
                           j->requested);
    event(j, NL_EVENT_WARNING, "InspectFailed", "%s", m);
    j->req->job = NULL;
    j->cb(NULL, NL_IMAGE_ERR_INVALID_NAME, m, j->ctx);
    free(m);
  }
  uv_close((uv_handle_t *)t, timer_closed);
}

void nl_images_ensure(nl_images_t *im, nl_images_req_t *req, const nl_event_ref_t *ref,
                      const char *pod_desc, const char *image, const char *pull_policy,
                      nl_images_creds_fn creds, nl_images_cb cb, void *ctx) {
  job_t *j = nl_xcalloc(1, sizeof *j);
  j->im = im;
  j->req = req;
  req->job = j;
  j->creds = creds;
  j->cb = cb;
  j->ctx = ctx;
  j->requested = nl_xstrdup(image ? image : "");
  j->pod_desc = nl_xstrdup(pod_desc ? pod_desc : "");
  j->ref = nl_event_ref_dup(ref);
  nl_list_init(&j->link);
  bool never = pull_policy && strcmp(pull_policy, "Never") == 0;
  j->always = pull_policy && strcmp(pull_policy, "Always") == 0;
  j->never = never;
  j->backoff_key = nl_xasprintf("%s_%s", ref->uid ? ref->uid : "", j->requested);
  j->image = nl_images_default_tag(image);
  if (!j->image) { /* answered on the next loop turn, never inline */
    uv_timer_init(im->loop, &j->timer);
    uv_timer_start(&j->timer, invalid_name, 0, 0);
    return;
  }
  image_status(j, j->image, status_done);
}

void nl_images_cancel(nl_images_req_t *req) {
  if (!req->job) return;
  req->job->req = NULL;
  req->job = NULL;
}
