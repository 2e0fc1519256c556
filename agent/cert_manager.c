/* The certificate manager's state machine. One timer serves the rotation
 * deadline, the back-off and the wait for the CSR; one work item serves key
 * generation and the writing of the pair; every completion carries the
 * generation of its attempt, so a late one after a restart or stop only drops
 * its result. */
#include "agent/cert_manager.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/cert_store.h"
#include "agent/kube/csr.h"
#include "agent/kube/reflector.h"
#include "agent/kube/status.h"
#include "reactor/backoff.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define WAIT_TIMEOUT_MS (15 * 60 * 1000) /* client-go's certificateWaitTimeout */
#define BACKOFF_INITIAL_MS 2000
#define BACKOFF_MAX_MS 32000 /* then client-go polls every 32 s */
/* The rotation deadline is a time on the wall clock, and the wait for it is
 * measured on the monotonic one too: the rotation starts when either says the
 * deadline has come. A wall clock that was wrong when the deadline was
 * computed (NTP yet to correct a gateway's clock) would hold the monotonic
 * wait back by as much as its error, with a short-lived certificate past its
 * expiry; one that goes wrong during the wait would hold back the wall clock's
 * reading. The wall clock is read again at least this often. */
#define RECHECK_MS 60000

struct nl_certmgr {
  uv_loop_t *loop;
  nl_certmgr_state_t state;
  char *signer, **usages, *cn, *org, *dns, *ips, *dir, *prefix, *kubeconfig;
  nl_kubeconfig_t boot; /* the cluster for the kubeconfig; only cluster fields */
  bool rotate;
  uint64_t wait_timeout_ms, recheck_ms;
  nl_kube_client_t *client, *bootstrap;
  nl_certmgr_cert_fn on_cert;
  void *ctx;

  uv_timer_t timer;
  uv_work_t work;
  nl_kube_req_t *req;
  nl_reflector_t *watch;
  uint64_t gen;
  int live; /* the timer, the work item, the request and the reflector in flight */
  nl_backoff_t backoff;

  bool have_cert;
  nl_x509_info_t info; /* of the certificate in use */
  double deadline;     /* the rotation deadline (wall clock, seconds) while WAITING */
  uint64_t due;        /* the same as a time of the loop (monotonic, ms) */

  /* One attempt; the worker thread owns these while a work item runs. */
  char *key_pem, *csr_pem, *csr_name, *cert_pem, *path, *pair_pem;
  nl_x509_info_t new_info;
  nl_err_t *work_err;

  void (*done)(void *ctx);
  void *done_ctx;
};

static const char *const state_names[] = {"idle",    "waiting", "keygen", "creating", "pending",
                                          "storing", "backoff", "done",   "stopping"};

static void step(nl_certmgr_t *m);

/* "2027-11-24 02:48:37 UTC" */
static const char *utc(time_t t, char buf[32]) {
  struct tm tm;
  strftime(buf, 32, "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&t, &tm));
  return buf;
}

static void set_state(nl_certmgr_t *m, nl_certmgr_state_t s) {
  nl_vlog(4, "%s: certificate manager %s -> %s", m->signer, state_names[m->state],
          state_names[s]);
  m->state = s;
}

static void attempt_clear(nl_certmgr_t *m) {
  char **f[] = {&m->key_pem, &m->csr_pem, &m->csr_name, &m->cert_pem, &m->path, &m->pair_pem};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    free(*f[i]);
    *f[i] = NULL;
  }
  nl_x509_info_free(&m->new_info);
  nl_err_free(&m->work_err);
}

static void maybe_free(nl_certmgr_t *m) {
  if (m->state != NL_CERTMGR_STOPPING || m->live > 0) return;
  attempt_clear(m);
  nl_x509_info_free(&m->info);
  char *strs[] = {m->signer, m->cn, m->org, m->dns, m->ips, m->dir, m->prefix, m->kubeconfig};
  for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) free(strs[i]);
  for (size_t i = 0; m->usages[i]; i++) free(m->usages[i]);
  free(m->usages);
  nl_kubeconfig_free(&m->boot);
  void (*done)(void *) = m->done;
  void *ctx = m->done_ctx;
  free(m);
  if (done) done(ctx);
}

static void put(nl_certmgr_t *m) {
  assert(m->live > 0);
  m->live--;
  maybe_free(m);
}

static void put_cb(void *ctx) { put(ctx); }

bool nl_certmgr_valid(const nl_certmgr_t *m) {
  return m->have_cert && time(NULL) < m->info.not_after;
}

nl_certmgr_state_t nl_certmgr_state(const nl_certmgr_t *m) { return m->state; }

/* ---- failures and the timer ------------------------------------------ */

static void on_timer(uv_timer_t *t);

static void timer_in(nl_certmgr_t *m, uint64_t ms) { uv_timer_start(&m->timer, on_timer, ms, 0); }

/* Ends the attempt in flight (stale completions see a new generation). */
static void attempt_end(nl_certmgr_t *m) {
  m->gen++;
  uv_timer_stop(&m->timer);
  if (m->req) {
    nl_kube_req_cancel(m->req);
    m->req = NULL;
  }
  if (m->watch) {
    nl_reflector_t *w = m->watch;
    m->watch = NULL;
    nl_reflector_stop(w, put_cb, m);
  }
}

static void fail(nl_certmgr_t *m, const char *what, const nl_err_t *err) {
  attempt_end(m);
  attempt_clear(m);
  uint64_t delay = nl_backoff_next(&m->backoff);
  nl_error("%s: %s: %s; retrying in %" PRIu64 " ms", m->signer, what, err ? nl_err_msg(err) : "",
           delay);
  set_state(m, NL_CERTMGR_BACKOFF);
  timer_in(m, delay);
}

/* ---- storing the pair ---------------------------------------------------- */

static void store_work(uv_work_t *w) {
  nl_certmgr_t *m = w->data;
  if (nl_x509_pair_parse(m->cert_pem, m->key_pem, &m->new_info, &m->work_err) < 0) {
    nl_err_wrap(&m->work_err, "the issued certificate");
    return;
  }
  if (nl_cert_store_update(m->dir, m->prefix, m->cert_pem, m->key_pem, time(NULL), &m->path,
                           &m->work_err) < 0)
    return;
  m->pair_pem = nl_xasprintf("%s%s%s", m->cert_pem,
                             m->cert_pem[strlen(m->cert_pem) - 1] == '\n' ? "" : "\n", m->key_pem);
  if (m->kubeconfig) {
    char *current = nl_cert_store_current_path(m->dir, m->prefix);
    if (nl_cert_store_write_kubeconfig(m->kubeconfig, &m->boot, current, &m->work_err) < 0)
      nl_err_wrap(&m->work_err, "write kubeconfig");
    free(current);
  }
}

static void store_done(uv_work_t *w, int status) {
  nl_certmgr_t *m = w->data;
  if (m->state == NL_CERTMGR_STOPPING) {
    put(m);
    return;
  }
  m->live--;
  assert(m->state == NL_CERTMGR_STORING && status == 0);
  if (m->work_err && !m->path) {
    nl_err_t *err = m->work_err;
    m->work_err = NULL;
    fail(m, "Unable to store the new cert/key pair", err);
    nl_err_free(&err);
    return;
  }
  if (m->work_err) { /* the pair is stored; only the kubeconfig is missing */
    nl_error("%s: %s", m->signer, nl_err_msg(m->work_err));
  } else if (m->kubeconfig) {
    nl_info("%s: wrote kubeconfig %s", m->signer, m->kubeconfig);
    free(m->kubeconfig);
    m->kubeconfig = NULL; /* it points at -current.pem: once is enough */
  }
  nl_x509_info_free(&m->info);
  m->info = m->new_info;
  memset(&m->new_info, 0, sizeof m->new_info);
  m->have_cert = true;
  nl_backoff_reset(&m->backoff);
  char until[32];
  nl_info("%s: new certificate %s, valid until %s", m->signer, m->path,
          utc(m->info.not_after, until));
  m->on_cert(m->ctx, m->pair_pem, m->path, &m->info);
  if (m->state == NL_CERTMGR_STOPPING) return; /* the owner stopped us */
  attempt_clear(m);
  set_state(m, NL_CERTMGR_WAITING);
  step(m);
}

/* ---- waiting for the certificate ---------------------------------------- */

static void csr_seen(nl_certmgr_t *m, const char *json, size_t len) {
  nl_kube_csr_t csr;
  nl_err_t *err = NULL;
  if (nl_kube_csr_decode(json, len, &csr, &err) < 0) {
    fail(m, "certificate request was not signed", err);
    nl_err_free(&err);
    return;
  }
  if (!csr.name || strcmp(csr.name, m->csr_name) != 0) {
    nl_kube_csr_free(&csr);
    return;
  }
  switch (csr.phase) {
  case NL_KUBE_CSR_PENDING:
    if (csr.approved)
      nl_vlog(2, "%s: certificate signing request %s is approved, waiting to be issued",
              m->signer, csr.name);
    break;
  case NL_KUBE_CSR_DENIED:
  case NL_KUBE_CSR_FAILED:
    nl_err_set(&err, NL_EINVAL, "certificate signing request %s %s, reason: %s, message: %s",
               csr.name, csr.phase == NL_KUBE_CSR_DENIED ? "is denied" : "failed",
               csr.reason ? csr.reason : "", csr.message ? csr.message : "");
    fail(m, "certificate request was not signed", err);
    nl_err_free(&err);
    break;
  case NL_KUBE_CSR_ISSUED:
    nl_vlog(2, "%s: certificate signing request %s is issued", m->signer, csr.name);
    attempt_end(m);
    m->cert_pem = csr.certificate;
    csr.certificate = NULL;
    set_state(m, NL_CERTMGR_STORING);
    m->live++;
    m->work.data = m;
    uv_queue_work(m->loop, &m->work, store_work, store_done);
    break;
  }
  nl_kube_csr_free(&csr);
}

static void watch_list(void *ctx, const nl_kube_raw_t *items, size_t n, const char *rv) {
  (void)rv;
  nl_certmgr_t *m = ctx;
  for (size_t i = 0; i < n && m->state == NL_CERTMGR_PENDING; i++)
    csr_seen(m, items[i].json, items[i].len);
}

static void watch_event(void *ctx, const nl_kube_watch_event_t *ev) {
  nl_certmgr_t *m = ctx;
  if (m->state != NL_CERTMGR_PENDING) return;
  if (ev->type == NL_KUBE_WATCH_DELETED) {
    nl_err_t *err = NULL;
    nl_err_set(&err, NL_EINVAL, "certificate signing request %s was deleted", m->csr_name);
    fail(m, "certificate request was not signed", err);
    nl_err_free(&err);
    return;
  }
  csr_seen(m, ev->object, ev->object_len);
}

static nl_kube_client_t *csr_client(const nl_certmgr_t *m) {
  return !nl_certmgr_valid(m) && m->bootstrap ? m->bootstrap : m->client;
}

static void watch_start(nl_certmgr_t *m) {
  char *sel = nl_xasprintf("metadata.name=%s", m->csr_name);
  nl_reflector_opts_t o = {.path = NL_KUBE_CSR_PATH, .field_selector = sel};
  nl_reflector_cbs_t cbs = {.on_list = watch_list, .on_event = watch_event};
  nl_err_t *err = NULL;
  int rc = nl_reflector_new(&m->watch, m->loop, csr_client(m), &o, &cbs, m, &err);
  free(sel);
  assert(rc == 0); /* the path is a constant */
  (void)rc;
  m->live++;
  set_state(m, NL_CERTMGR_PENDING);
  timer_in(m, m->wait_timeout_ms);
  nl_reflector_start(m->watch);
}

/* ---- creating the CSR ------------------------------------------------------ */

typedef struct create_ctx {
  nl_certmgr_t *m;
  uint64_t gen;
} create_ctx_t;

static void created(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err) {
  create_ctx_t *c = ctx;
  nl_certmgr_t *m = c->m;
  bool stale = c->gen != m->gen || m->state != NL_CERTMGR_CREATING;
  free(c);
  if (stale) {
    put(m);
    return;
  }
  m->live--;
  m->req = NULL;
  nl_err_t *e = NULL;
  if (!err && (resp->status < 200 || resp->status > 299)) {
    nl_kube_status_err(resp, &e);
    err = e;
  }
  nl_kube_csr_t csr = {0};
  if (!err && nl_kube_csr_decode(resp->body, resp->body_len, &csr, &e) < 0) err = e;
  if (!err && !csr.name) {
    nl_err_set(&e, NL_EINVAL, "the created CertificateSigningRequest has no name");
    err = e;
  }
  if (err) {
    fail(m, "Failed while requesting a signed certificate from the control plane", err);
    nl_err_free(&e);
    nl_kube_csr_free(&csr);
    return;
  }
  m->csr_name = csr.name;
  csr.name = NULL;
  nl_info("%s: created certificate signing request %s", m->signer, m->csr_name);
  nl_kube_csr_free(&csr);
  watch_start(m);
}

static void keygen_work(uv_work_t *w) {
  nl_certmgr_t *m = w->data;
  nl_x509_csr_req_t req = {.cn = m->cn, .org = m->org, .dns = m->dns, .ips = m->ips};
  nl_x509_csr_new(&req, &m->key_pem, &m->csr_pem, &m->work_err);
}

static void keygen_done(uv_work_t *w, int status) {
  nl_certmgr_t *m = w->data;
  if (m->state == NL_CERTMGR_STOPPING) {
    put(m);
    return;
  }
  m->live--;
  assert(m->state == NL_CERTMGR_KEYGEN && status == 0);
  if (m->work_err) {
    nl_err_t *err = m->work_err;
    m->work_err = NULL;
    fail(m, "Unable to generate a certificate signing request", err);
    nl_err_free(&err);
    return;
  }
  char *body = nl_kube_csr_encode(m->csr_pem, m->signer, (const char *const *)m->usages);
  create_ctx_t *c = nl_xcalloc(1, sizeof *c);
  c->m = m;
  c->gen = m->gen;
  set_state(m, NL_CERTMGR_CREATING);
  m->live++;
  nl_kube_client_t *client = csr_client(m);
  if (client == m->bootstrap)
    nl_info("%s: the current certificate is missing or expired: using the bootstrap credentials",
            m->signer);
  m->req = nl_kube_request(client,
                           &(nl_kube_request_opts_t){.method = "POST", .path = NL_KUBE_CSR_PATH,
                                                     .body = body, .body_len = strlen(body),
                                                     .fail_on_dial = true},
                           created, c);
  free(body);
}

/* ---- the machine --------------------------------------------------------- */

static void rotate_now(nl_certmgr_t *m) {
  nl_info("%s: Rotating certificates", m->signer);
  set_state(m, NL_CERTMGR_KEYGEN);
  m->live++;
  m->work.data = m;
  uv_queue_work(m->loop, &m->work, keygen_work, keygen_done);
}

/* Sets m->deadline: now when the certificate is missing or of another name,
 * else client-go's jitteryDuration, 70 % to 90 % into its validity. */
static void rotation_deadline(nl_certmgr_t *m) {
  m->deadline = 0;
  if (!m->have_cert) return;
  if (strcmp(m->info.cn, m->cn) != 0) {
    nl_info("%s: Current certificate CN (%s) does not match requested CN (%s)", m->signer,
            m->info.cn, m->cn);
    return;
  }
  double total = difftime(m->info.not_after, m->info.not_before);
  m->deadline = (double)m->info.not_before + total * (0.7 + 0.2 * nl_backoff_random(&m->backoff));
  char exp[32], dl[32];
  nl_info("%s: Certificate expiration is %s, rotation deadline is %s", m->signer,
          utc(m->info.not_after, exp), utc((time_t)m->deadline, dl));
}

/* Rotates when the deadline has come by the wall clock or by the loop's,
 * else waits for it, at most recheck_ms. say: the deadline is new (the wait
 * said once, as upstream says it once). */
static void rotate_at_deadline(nl_certmgr_t *m, bool say) {
  double wall = m->deadline - (double)time(NULL);
  uint64_t now = uv_now(m->loop);
  if (say) m->due = now + (wall > 0 ? (uint64_t)(wall * 1000) : 0);
  if (wall <= 0 || now >= m->due) {
    rotate_now(m);
    return;
  }
  uint64_t ms = (uint64_t)(wall * 1000);
  if (say) nl_vlog(2, "%s: Waiting %" PRIu64 " ms for next certificate rotation", m->signer, ms);
  if (m->due - now < ms) ms = m->due - now;
  timer_in(m, ms < m->recheck_ms ? ms : m->recheck_ms);
}

static void step(nl_certmgr_t *m) {
  switch (m->state) {
  case NL_CERTMGR_WAITING: {
    if (!m->rotate && nl_certmgr_valid(m)) {
      set_state(m, NL_CERTMGR_DONE);
      return;
    }
    if (m->rotate) rotation_deadline(m);
    else m->deadline = 0;
    rotate_at_deadline(m, true);
    return;
  }
  case NL_CERTMGR_IDLE:
  case NL_CERTMGR_KEYGEN:
  case NL_CERTMGR_CREATING:
  case NL_CERTMGR_PENDING:
  case NL_CERTMGR_STORING:
  case NL_CERTMGR_BACKOFF:
  case NL_CERTMGR_DONE:
  case NL_CERTMGR_STOPPING:
    return;
  }
}

static void on_timer(uv_timer_t *t) {
  nl_certmgr_t *m = container_of(t, nl_certmgr_t, timer);
  switch (m->state) {
  case NL_CERTMGR_PENDING: {
    nl_err_t *err = NULL;
    nl_err_set(&err, NL_ETIMEOUT,
               "timed out after %" PRIu64 " s waiting for certificate signing request %s to be "
               "issued (is it approved, and does a signer for %s run?)",
               m->wait_timeout_ms / 1000, m->csr_name, m->signer);
    fail(m, "certificate request was not signed", err);
    nl_err_free(&err);
    return;
  }
  case NL_CERTMGR_BACKOFF: /* a retry: the last attempt was due already */
    rotate_now(m);
    return;
  case NL_CERTMGR_WAITING:
    rotate_at_deadline(m, false);
    return;
  default:
    return;
  }
}

/* ---- life cycle ------------------------------------------------------------ */

static char *dup0(const char *s) { return s ? nl_xstrdup(s) : NULL; }

int nl_certmgr_new(nl_certmgr_t **out, uv_loop_t *loop, nl_kube_client_t *client,
                   nl_kube_client_t *bootstrap, const nl_certmgr_opts_t *o,
                   nl_certmgr_cert_fn on_cert, void *ctx, nl_err_t **err) {
  *out = NULL;
  nl_x509_info_t info = {0};
  if (o->pem && nl_x509_cert_parse(o->pem, strlen(o->pem), &info, err) < 0)
    return nl_err_wrap(err, "%s: the current certificate", o->signer);
  nl_certmgr_t *m = nl_xcalloc(1, sizeof *m);
  m->loop = loop;
  m->client = client;
  m->bootstrap = bootstrap;
  m->on_cert = on_cert;
  m->ctx = ctx;
  m->signer = nl_xstrdup(o->signer);
  size_t n = 0;
  while (o->usages[n]) n++;
  m->usages = nl_xcalloc(n + 1, sizeof *m->usages);
  for (size_t i = 0; i < n; i++) m->usages[i] = nl_xstrdup(o->usages[i]);
  m->cn = nl_xstrdup(o->subject.cn);
  m->org = nl_xstrdup(o->subject.org);
  m->dns = dup0(o->subject.dns);
  m->ips = dup0(o->subject.ips);
  m->dir = nl_xstrdup(o->cert_dir);
  m->prefix = nl_xstrdup(o->prefix);
  m->kubeconfig = dup0(o->kubeconfig);
  if (o->boot) {
    m->boot.server = dup0(o->boot->server);
    m->boot.ca_file = dup0(o->boot->ca_file);
    m->boot.ca_pem = dup0(o->boot->ca_pem);
    m->boot.tls_server_name = dup0(o->boot->tls_server_name);
    m->boot.insecure = o->boot->insecure;
  }
  m->rotate = o->rotate;
  m->wait_timeout_ms = o->wait_timeout_ms ? o->wait_timeout_ms : WAIT_TIMEOUT_MS;
  m->recheck_ms = o->recheck_ms ? o->recheck_ms : RECHECK_MS;
  nl_backoff_init(&m->backoff, o->backoff_initial_ms ? o->backoff_initial_ms : BACKOFF_INITIAL_MS,
                  o->backoff_max_ms ? o->backoff_max_ms : BACKOFF_MAX_MS, 0.1);
  m->have_cert = o->pem != NULL;
  m->info = info;
  uv_timer_init(loop, &m->timer);
  m->timer.data = m;
  m->live = 1;
  *out = m;
  return 0;
}

void nl_certmgr_start(nl_certmgr_t *m) {
  assert(m->state == NL_CERTMGR_IDLE);
  if (m->rotate) nl_info("%s: Certificate rotation is enabled", m->signer);
  set_state(m, NL_CERTMGR_WAITING);
  step(m);
}

static void timer_closed(uv_handle_t *h) { put(h->data); }

void nl_certmgr_stop(nl_certmgr_t *m, void (*done)(void *ctx), void *ctx) {
  if (m->state == NL_CERTMGR_STOPPING) return;
  bool working = m->state == NL_CERTMGR_KEYGEN || m->state == NL_CERTMGR_STORING;
  attempt_end(m);
  set_state(m, NL_CERTMGR_STOPPING);
  m->done = done;
  m->done_ctx = ctx;
  if (working) uv_cancel((uv_req_t *)&m->work); /* its completion still runs */
  uv_close((uv_handle_t *)&m->timer, timer_closed);
}
