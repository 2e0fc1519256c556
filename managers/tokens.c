/* The service-account token manager (upstream pkg/kubelet/token/token_manager.go). */
#include "managers/tokens.h"

#include <assert.h>
#include <string.h>
#include <time.h>

#include <fcntl.h>
#include <unistd.h>

#include <jansson.h>

#include "reactor/log.h"
#include "reactor/xalloc.h"

#define GC_PERIOD_MS (60 * 1000)
#define MAX_TTL_MS (24LL * 3600 * 1000)
#define MAX_JITTER_MS 10000
#define REQUEST_TIMEOUT_MS (30 * 1000)

typedef struct entry {
  nl_tokens_t *m;
  char *key;
  char *ns, *sa, *audience, *pod_name, *pod_uid;
  int64_t expiration_seconds; /* asked */
  char *token;                /* NULL until fetched */
  int64_t exp_ms;             /* status.expirationTimestamp */
  int64_t ttl_s;              /* the answer's spec.expirationSeconds */
  int64_t jitter_ms;
  nl_err_t *err;              /* the last failure */
  nl_kube_req_t *req;         /* in flight */
  bool forgotten;             /* dropped while in flight: freed on completion */
  /* The token file a volume holds already (an agent restart): read on the
   * thread pool before any request, so that a valid one is kept, not
   * replaced (which would rewrite the volume). */
  bool seeding;
  uv_work_t seed;
  char *seed_path;
  char *seed_data; /* NULL: none */
} entry_t;

typedef struct wait {
  nl_list_t link;
  char **keys;
  size_t n;
  void (*done)(void *dctx);
  void *dctx;
} wait_t;

static int64_t now_ms(nl_tokens_t *m) {
  if (m->now_ms) return (int64_t)m->now_ms(m->now_ctx);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void entry_free(void *p) {
  entry_t *e = p;
  free(e->key);
  free(e->ns);
  free(e->sa);
  free(e->audience);
  free(e->pod_name);
  free(e->pod_uid);
  free(e->token);
  free(e->seed_path);
  free(e->seed_data);
  nl_err_free(&e->err);
  free(e);
}

static const char *sa_name(const nl_pod_t *pod) {
  const char *sa = pod->spec.service_account_name;
  return sa && *sa ? sa : "default";
}

/* upstream keyFunc: name, namespace, audiences, expirationSeconds, bound uid */
static char *key_of(const nl_pod_t *pod, const nl_sa_token_projection_t *p) {
  return nl_xasprintf("%s/%s/%s/%lld/%s", sa_name(pod), pod->metadata.namespace_,
                      p->audience ? p->audience : "", (long long)p->expiration_seconds,
                      pod->metadata.uid);
}

/* upstream requiresRefresh */
static bool due(nl_tokens_t *m, const entry_t *e) {
  if (!e->token) return true;
  int64_t now = now_ms(m), iat = e->exp_ms - e->ttl_s * 1000;
  if (now > iat + MAX_TTL_MS - e->jitter_ms) return true;
  return now > e->exp_ms - e->ttl_s * 200 - e->jitter_ms; /* within 20 % of the TTL */
}

static void complete_waits(nl_tokens_t *m, bool all) {
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &m->waits) {
    wait_t *w = nl_list_entry(pos, wait_t, link);
    bool ready = true;
    for (size_t i = 0; i < w->n && ready && !all; i++) {
      entry_t *e = nl_map_get(&m->cache, w->keys[i]);
      ready = !e || (!e->req && !e->seeding);
    }
    if (!ready) continue;
    nl_list_remove(&w->link);
    for (size_t i = 0; i < w->n; i++) free(w->keys[i]);
    free(w->keys);
    w->done(w->dctx);
    free(w);
  }
}

static void on_kick(uv_timer_t *t) { complete_waits(container_of(t, nl_tokens_t, kick), false); }

static int decode(entry_t *e, const nl_kube_response_t *resp, nl_err_t **err) {
  char *tok = NULL;
  int64_t exp, ttl;
  if (nl__token_answer_parse(resp->body, resp->body_len, &tok, &exp, &ttl, err) < 0)
    return nl_err_wrap(err, "token request for service account \"%s\"", e->sa);
  free(e->token);
  e->token = tok;
  e->exp_ms = exp;
  e->ttl_s = ttl;
  return 0;
}

/* The last request or handle of a stopping manager is gone. */
static void finish(nl_tokens_t *m) {
  if (m->pending > 0 || !m->done) return;
  nl_map_free(&m->cache, entry_free);
  free(m->root_dir);
  m->done(m->done_ctx);
}

static void on_token(void *ctx, const nl_kube_response_t *resp, const nl_err_t *kerr) {
  entry_t *e = ctx;
  nl_tokens_t *m = e->m;
  e->req = NULL;
  m->pending--;
  if (e->forgotten) {
    entry_free(e);
  } else {
    nl_err_t *err = NULL;
    if (kerr)
      nl_err_set(&err, kerr->code, "%s", kerr->msg);
    else if (resp->status / 100 != 2)
      nl_kube_status_err(resp, &err);
    else
      decode(e, resp, &err);
    nl_err_free(&e->err);
    if (err) {
      nl_warn("failed to fetch token for service account %s/%s (pod %s): %s", e->ns, e->sa,
              e->pod_name, err->msg);
      e->err = err;
    } else {
      nl_vlog(4, "token for service account %s/%s (pod %s) fetched, expires in %llds", e->ns,
              e->sa, e->pod_name, (long long)((e->exp_ms - now_ms(m)) / 1000));
    }
  }
  complete_waits(m, m->stopping);
  if (m->stopping) finish(m);
}

static void request(nl_tokens_t *m, entry_t *e) {
  json_t *spec = json_pack("{s:I, s:{s:s, s:s, s:s, s:s}}", "expirationSeconds",
                           (json_int_t)e->expiration_seconds, "boundObjectRef", "apiVersion", "v1",
                           "kind", "Pod", "name", e->pod_name, "uid", e->pod_uid);
  /* no audience: the apiserver's own (upstream passes none) */
  if (*e->audience) json_object_set_new(spec, "audiences", json_pack("[s]", e->audience));
  json_t *body = json_pack("{s:s, s:s, s:o}", "apiVersion", "authentication.k8s.io/v1", "kind",
                           "TokenRequest", "spec", spec);
  char *text = json_dumps(body, JSON_COMPACT);
  char *path = nl_xasprintf("/api/v1/namespaces/%s/serviceaccounts/%s/token", e->ns, e->sa);
  nl_kube_request_opts_t o = {.method = "POST", .path = path, .body = text,
                              .body_len = strlen(text), .timeout_ms = REQUEST_TIMEOUT_MS};
  m->pending++;
  e->req = nl_kube_request(m->kube, &o, on_token, e);
  free(path);
  free(text);
  json_decref(body);
}

static void seed_work(uv_work_t *w) {
  entry_t *e = container_of(w, entry_t, seed);
  int fd = open(e->seed_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[16384];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n > 0) e->seed_data = nl_xstrndup(buf, (size_t)n);
}

/* Takes the token found on disk when it is this pod's, for this audience, and
 * not expired. Its expiry is the TokenRequest's (iat + expirationSeconds), not
 * the JWT's, which the apiserver may extend. */
static void seed_take(entry_t *e) {
  int64_t iat;
  if (!nl__token_jwt_claims(e->seed_data, e->pod_uid, e->audience, &iat)) return;
  int64_t exp = (iat + e->expiration_seconds) * 1000;
  if (exp <= now_ms(e->m)) return;
  e->token = nl_xstrdup(e->seed_data);
  e->exp_ms = exp;
  e->ttl_s = e->expiration_seconds;
}

static void seed_done(uv_work_t *w, int status) {
  entry_t *e = container_of(w, entry_t, seed);
  nl_tokens_t *m = e->m;
  e->seeding = false;
  m->pending--;
  if (e->forgotten) {
    entry_free(e);
  } else {
    if (status == 0 && e->seed_data) seed_take(e);
    free(e->seed_data);
    e->seed_data = NULL;
    if (!m->stopping && due(m, e)) request(m, e);
  }
  complete_waits(m, m->stopping);
  if (m->stopping) finish(m);
}

static void seed(nl_tokens_t *m, entry_t *e, const char *volume, const char *path) {
  e->seed_path = nl_xasprintf("%s/pods/%s/volumes/kubernetes.io~projected/%s/%s", m->root_dir,
                              e->pod_uid, volume, path);
  e->seeding = true;
  m->pending++;
  if (uv_queue_work(m->loop, &e->seed, seed_work, seed_done) < 0) {
    e->seeding = false;
    m->pending--;
    request(m, e);
  }
}

/* Drops the entries for which gone(e, arg) holds; one being read or fetched
 * is freed when that ends. */
static void drop(nl_tokens_t *m, bool (*gone)(const entry_t *e, const void *arg),
                 const void *arg) {
  nl_map_iter_t it;
  const char *key;
  void *v;
  char **keys = NULL;
  size_t n = 0;
  nl_map_iter_init(&it, &m->cache);
  while (nl_map_iter_next(&it, &key, &v)) {
    if (!gone(v, arg)) continue;
    keys = nl_xrealloc(keys, (n + 1) * sizeof *keys);
    keys[n++] = ((entry_t *)v)->key;
  }
  for (size_t i = 0; i < n; i++) {
    entry_t *e = nl_map_del(&m->cache, keys[i]);
    if (e->req || e->seeding) {
      e->forgotten = true; /* on_token or seed_done frees it */
      if (e->req) nl_kube_req_cancel(e->req);
    } else {
      entry_free(e);
    }
  }
  free(keys);
}

static bool expired(const entry_t *e, const void *now) {
  return !e->req && !e->seeding && !(e->token && *(const int64_t *)now < e->exp_ms);
}

/* upstream cleanup: expired tokens go */
static void on_gc(uv_timer_t *t) {
  nl_tokens_t *m = container_of(t, nl_tokens_t, gc);
  int64_t now = now_ms(m);
  drop(m, expired, &now);
  if (nl_map_size(&m->cache) == 0) uv_timer_stop(&m->gc);
}

static void ensure(void *ctx, const nl_pod_t *pod, void (*done)(void *dctx), void *dctx) {
  nl_tokens_t *m = ctx;
  assert(!m->stopping); /* the kubelet takes the source away before stopping */
  wait_t *w = nl_xcalloc(1, sizeof *w);
  w->done = done;
  w->dctx = dctx;
  nl_list_insert_tail(&m->waits, &w->link);
  for (size_t i = 0; i < pod->spec.n_volumes && m->kube; i++) {
    const nl_projected_source_t *p = pod->spec.volumes[i].projected;
    for (size_t j = 0; p && j < p->n_sources; j++) {
      const nl_sa_token_projection_t *t = p->sources[j].service_account_token;
      if (!t) continue;
      char *key = key_of(pod, t);
      entry_t *e = nl_map_get(&m->cache, key);
      if (!e) {
        e = nl_xcalloc(1, sizeof *e);
        *e = (entry_t){.m = m, .key = nl_xstrdup(key), .ns = nl_xstrdup(pod->metadata.namespace_),
                       .sa = nl_xstrdup(sa_name(pod)),
                       .audience = nl_xstrdup(t->audience ? t->audience : ""),
                       .pod_name = nl_xstrdup(pod->metadata.name),
                       .pod_uid = nl_xstrdup(pod->metadata.uid),
                       .expiration_seconds = t->expiration_seconds,
                       .jitter_ms = (int64_t)(uv_hrtime() % MAX_JITTER_MS)};
        nl_map_put(&m->cache, key, e);
      }
      if (!e->seed_path && m->root_dir) /* once per entry */
        seed(m, e, pod->spec.volumes[i].name, t->path);
      else if (!e->req && !e->seeding && due(m, e))
        request(m, e);
      w->keys = nl_xrealloc(w->keys, (w->n + 1) * sizeof *w->keys);
      w->keys[w->n++] = key;
    }
  }
  if (!uv_is_active((uv_handle_t *)&m->gc))
    uv_timer_start(&m->gc, on_gc, GC_PERIOD_MS, GC_PERIOD_MS);
  /* never from inside ensure: the next loop turn at the earliest */
  uv_timer_start(&m->kick, on_kick, 0, 0);
}

static int lookup(void *ctx, const nl_pod_t *pod, const nl_sa_token_projection_t *p,
                  const char **token, nl_err_t **err) {
  nl_tokens_t *m = ctx;
  char *key = key_of(pod, p);
  entry_t *e = nl_map_get(&m->cache, key);
  free(key);
  if (e && e->token && now_ms(m) < e->exp_ms) {
    *token = e->token; /* a valid token even when its refresh failed (upstream) */
    return 0;
  }
  if (e && e->err) return nl_err_set(err, e->err->code, "%s", e->err->msg);
  if (!m->kube) return nl_err_set(err, NL_EINVAL, "cannot get a service account token: no API server");
  return nl_err_set(err, NL_EINVAL, "failed to fetch token: not fetched yet");
}

void nl_tokens_init(nl_tokens_t *m, uv_loop_t *loop, nl_kube_client_t *kube,
                    const char *root_dir) {
  memset(m, 0, sizeof *m);
  m->loop = loop;
  m->kube = kube;
  m->root_dir = root_dir ? nl_xstrdup(root_dir) : NULL;
  nl_map_init(&m->cache);
  nl_list_init(&m->waits);
  uv_timer_init(loop, &m->gc);
  uv_timer_init(loop, &m->kick);
}

nl_tokens_source_t nl_tokens_source(nl_tokens_t *m) {
  return (nl_tokens_source_t){.ensure = ensure, .lookup = lookup, .ctx = m};
}

static bool of_pod(const entry_t *e, const void *uid) { return strcmp(e->pod_uid, uid) == 0; }

void nl_tokens_forget_pod(nl_tokens_t *m, const char *uid) { drop(m, of_pod, uid); }

static void on_closed(uv_handle_t *h) {
  nl_tokens_t *m = h->data;
  m->pending--;
  finish(m);
}

void nl_tokens_stop(nl_tokens_t *m, void (*done)(void *ctx), void *ctx) {
  assert(!m->stopping);
  m->stopping = true;
  m->done = NULL;
  nl_map_iter_t it;
  const char *key;
  void *v;
  nl_map_iter_init(&it, &m->cache);
  while (nl_map_iter_next(&it, &key, &v)) {
    entry_t *e = v;
    if (e->req) nl_kube_req_cancel(e->req);
  }
  m->pending += 2;
  m->gc.data = m->kick.data = m;
  uv_close((uv_handle_t *)&m->gc, on_closed);
  uv_close((uv_handle_t *)&m->kick, on_closed);
  /* the waits whose requests are gone complete in on_token; the others now */
  complete_waits(m, true);
  m->done = done;
  m->done_ctx = ctx;
}
