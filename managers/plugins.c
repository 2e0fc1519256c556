/* The plugin manager: the registration directory's scan and one registration
 * state machine per socket (managers/plugins.h). */
#include "managers/plugins.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "reactor/fs.h"
#include "reactor/grid.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define PATH_GET_INFO "/pluginregistration.Registration/GetInfo"
#define PATH_NOTIFY "/pluginregistration.Registration/NotifyRegistrationStatus"
#define BACKOFF_INITIAL_MS 1000

/* One registration socket, from the scan that found it to its close:
 *   INFO        GetInfo asked (the client waits for the socket)
 *   NOTIFY      the outcome is being told to the plugin (registered or not)
 *   REGISTERED  a handler holds the plugin; the client is closed or closing
 *   FAILED      refused: tried again at retry_at if the socket stays
 *   CLOSING     the socket went: waiting for the client's close callback */
typedef enum { PS_INFO, PS_NOTIFY, PS_REGISTERED, PS_FAILED, PS_CLOSING } ps_state_t;

typedef struct nl_plugin_sock {
  nl_list_t link;
  nl_plugins_t *m;
  char *path;
  uint64_t ino;
  int64_t mtime_ns;
  ps_state_t state;
  nl_cri_client_t client;
  bool client_open;     /* stopped in its close callback */
  bool seen;            /* in the last scan */
  bool gone;            /* the socket went while the client was open */
  const nl_plugin_handler_t *h; /* while registered */
  char *name, *endpoint;
  uint64_t retry_at;    /* FAILED: the next try */
  uint64_t backoff_ms;
} sock_t;

typedef struct found {
  char *name;
  uint64_t ino;
  int64_t mtime_ns;
} found_t;

typedef struct nl_plugins_scan {
  uv_work_t w;
  nl_plugins_t *m;
  char *dir;
  found_t *found;
  size_t n;
  int err;
} scan_t;

static void step(sock_t *s);
static void closed_one(nl_plugins_t *m);

/* ---- checks ---- */

const nl_plugin_handler_t *nl_plugins_handler(const nl_plugins_opts_t *opts,
                                              const Pluginregistration__PluginInfo *info,
                                              const char *sock, char **msg) {
  *msg = NULL;
  const char *type = info->type ? info->type : "";
  for (size_t i = 0; i < opts->n_handlers; i++)
    if (strcmp(opts->handlers[i].type, type) == 0) return &opts->handlers[i];
  *msg = nl_xasprintf("RegisterPlugin error -- no handler registered for plugin type: %s at "
                      "socket %s", type, sock);
  return NULL;
}

/* ---- sockets ---- */

static void sock_free(sock_t *s) {
  nl_plugins_t *m = s->m;
  nl_list_remove(&s->link);
  m->n_socks--;
  free(s->path);
  free(s->name);
  free(s->endpoint);
  free(s);
}

static void client_stopped(nl_cri_client_t *c) {
  sock_t *s = container_of(c, sock_t, client);
  nl_plugins_t *m = s->m;
  s->client_open = false;
  if (s->state == PS_CLOSING) sock_free(s);
  closed_one(m);
}

static void close_client(sock_t *s) {
  if (s->client_open && s->client.state == NL_CRI_RUNNING)
    nl_cri_client_stop(&s->client, client_stopped);
}

static void deregister(sock_t *s, const char *why) {
  if (!s->h) return;
  nl_info("plugin %s at %s: %s: deregistered", s->name, s->path, why);
  s->h->deregister(s->h->ctx, s->name, s->endpoint);
  s->h = NULL;
}

/* The socket left the directory (or was made again): its plugin goes. */
static void sock_gone(sock_t *s) {
  deregister(s, "its registration socket is gone");
  s->state = PS_CLOSING;
  step(s);
}

/* The next try of a refused or failed registration. */
static void arm_retry(sock_t *s) {
  nl_plugins_t *m = s->m;
  if (!s->backoff_ms) s->backoff_ms = BACKOFF_INITIAL_MS;
  else if ((s->backoff_ms *= 2) > m->opts.backoff_max_ms) s->backoff_ms = m->opts.backoff_max_ms;
  s->retry_at = uv_now(m->loop) + s->backoff_ms;
}

static void fail(sock_t *s, const char *why) {
  s->m->attempts++;
  arm_retry(s);
  nl_error("plugin registration at %s: %s (tried again in %llu ms)", s->path, why,
           (unsigned long long)s->backoff_ms);
  s->state = PS_FAILED;
  step(s);
}

static void on_notified(const nl_grpc_status_t *st, ProtobufCMessage *resp, void *ctx) {
  (void)resp;
  sock_t *s = ctx;
  if (s->state != PS_NOTIFY) return; /* gone meanwhile */
  if (st->code != NL_GRPC_OK) {
    /* upstream: a plugin that cannot be told is not kept */
    char *e = nl_grpc_status_format(st);
    char *why = nl_xasprintf("NotifyRegistrationStatus: %s", e);
    deregister(s, "it could not be told it is registered");
    fail(s, why);
    free(why);
    free(e);
    return;
  }
  s->m->attempts++;
  if (!s->h) { /* refused, and told so */
    s->state = PS_FAILED;
    step(s);
    return;
  }
  nl_vlog(2, "plugin %s at %s: told it is registered (NotifyRegistrationStatus)", s->name, s->path);
  s->backoff_ms = 0;
  s->state = PS_REGISTERED;
  step(s);
}

static void notify(sock_t *s, bool ok, const char *error) {
  Pluginregistration__RegistrationStatus req = PLUGINREGISTRATION__REGISTRATION_STATUS__INIT;
  req.plugin_registered = ok;
  req.error = (char *)(error ? error : "");
  s->state = PS_NOTIFY;
  nl_cri_client_call(&s->client, PATH_NOTIFY, &req.base,
                     &pluginregistration__registration_status_response__descriptor,
                     s->m->opts.call_timeout_ms, on_notified, s);
}

/* upstream's RegisterPlugin: handler, validation, registration, then the
 * plugin is told. */
static void on_info(const nl_grpc_status_t *st, ProtobufCMessage *resp, void *ctx) {
  sock_t *s = ctx;
  nl_plugins_t *m = s->m;
  if (s->state != PS_INFO) return;
  if (st->code != NL_GRPC_OK) {
    char *e = nl_grpc_status_format(st);
    char *why = nl_xasprintf("RegisterPlugin error -- failed to get plugin info using RPC "
                             "GetInfo at socket %s, err: %s", s->path, e);
    fail(s, why);
    free(why);
    free(e);
    return;
  }
  const Pluginregistration__PluginInfo *info = (const Pluginregistration__PluginInfo *)resp;
  char *msg = NULL;
  const nl_plugin_handler_t *h = nl_plugins_handler(&m->opts, info, s->path, &msg);
  const char *endpoint = info->endpoint && *info->endpoint ? info->endpoint : s->path;
  char *inner = NULL;
  if (h && h->validate(h->ctx, info->name, endpoint, info->supported_versions,
                       info->n_supported_versions, &inner) < 0) {
    msg = nl_xasprintf("RegisterPlugin error -- plugin validation failed with err: %s", inner);
    h = NULL;
  } else if (h && h->register_(h->ctx, info->name, endpoint, info->supported_versions,
                               info->n_supported_versions, &inner) < 0) {
    msg = nl_xasprintf("RegisterPlugin error -- plugin registration failed with err: %s", inner);
    h = NULL;
  }
  free(inner);
  if (h) {
    s->h = h;
    free(s->name);
    free(s->endpoint);
    s->name = nl_xstrdup(info->name);
    s->endpoint = nl_xstrdup(endpoint);
    nl_info("plugin %s (%s) at %s registered, endpoint %s", s->name, h->type, s->path,
            s->endpoint);
    notify(s, true, NULL);
  } else {
    arm_retry(s);
    nl_error("plugin at %s: %s (tried again in %llu ms)", s->path, msg,
             (unsigned long long)s->backoff_ms);
    notify(s, false, msg);
  }
  free(msg);
}

static void start_info(sock_t *s) {
  nl_plugins_t *m = s->m;
  nl_cri_opts_t co = {
      .timeout_ms = m->opts.call_timeout_ms,
      .connect_wait_ms = m->opts.call_timeout_ms,
      .max_recv_msg_size = m->opts.max_msg,
  };
  char *label = nl_xasprintf("plugin registration (%s)", s->path);
  co.label = label;
  nl_err_t *err = NULL;
  int rc = nl_cri_client_init(&s->client, m->loop, s->path, &co, &err);
  free(label);
  assert(rc == 0); /* an absolute path always parses */
  (void)rc;
  s->client_open = true;
  m->open++;
  s->state = PS_INFO;
  Pluginregistration__InfoRequest req = PLUGINREGISTRATION__INFO_REQUEST__INIT;
  nl_cri_client_call(&s->client, PATH_GET_INFO, &req.base,
                     &pluginregistration__plugin_info__descriptor, m->opts.call_timeout_ms,
                     on_info, s);
}

/* The socket's one transition function. */
static void step(sock_t *s) {
  switch (s->state) {
  case PS_INFO:
  case PS_NOTIFY: break; /* the call's answer drives it */
  case PS_REGISTERED:
  case PS_FAILED: close_client(s); break; /* the scan drives it */
  case PS_CLOSING:
    if (s->client_open) close_client(s);
    else sock_free(s);
    break;
  }
}

/* ---- the scan ---- */

static void scan_work(uv_work_t *w) {
  scan_t *sc = container_of(w, scan_t, w);
  DIR *d = opendir(sc->dir);
  if (!d) {
    sc->err = errno;
    return;
  }
  size_t cap = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') continue; /* upstream ignores hidden files */
    char *p = nl_xasprintf("%s/%s", sc->dir, de->d_name);
    struct stat st;
    int r = lstat(p, &st);
    free(p);
    if (r < 0 || !S_ISSOCK(st.st_mode)) continue;
    if (sc->n == cap) {
      cap = cap ? cap * 2 : 8;
      sc->found = nl_xrealloc(sc->found, cap * sizeof *sc->found);
    }
    sc->found[sc->n++] = (found_t){nl_xstrdup(de->d_name), (uint64_t)st.st_ino,
                                   (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec};
  }
  closedir(d);
}

static void scan_free(scan_t *sc) {
  for (size_t i = 0; i < sc->n; i++) free(sc->found[i].name);
  free(sc->found);
  free(sc->dir);
  free(sc);
}

static void scan_start(uv_timer_t *t);

static sock_t *find(nl_plugins_t *m, const char *path) {
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &m->socks) {
    sock_t *s = nl_list_entry(pos, sock_t, link);
    if (s->state != PS_CLOSING && strcmp(s->path, path) == 0) return s;
  }
  return NULL;
}

/* upstream's reconciler: sockets gone (or made again) deregister, new ones
 * register, failed ones are tried again after their back-off. */
static void reconcile(nl_plugins_t *m, const scan_t *sc) {
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &m->socks) nl_list_entry(pos, sock_t, link)->seen = false;
  uint64_t now = uv_now(m->loop);
  for (size_t i = 0; i < sc->n; i++) {
    const found_t *f = &sc->found[i];
    char *path = nl_xasprintf("%s/%s", m->opts.dir, f->name);
    sock_t *s = find(m, path);
    if (s && (s->ino != f->ino || s->mtime_ns != f->mtime_ns)) {
      nl_vlog(2, "plugin registration socket %s was made again", path);
      sock_gone(s);
      s = NULL;
    }
    if (s) {
      s->seen = true;
      if (s->state == PS_FAILED && now >= s->retry_at && !s->client_open) start_info(s);
      free(path);
      continue;
    }
    if (m->n_socks >= m->opts.max_sockets) {
      if (!m->over_logged)
        nl_error("plugin registration: more than %zu sockets in %s: %s and others are left "
                 "alone", m->opts.max_sockets, m->opts.dir, path);
      m->over_logged = true;
      free(path);
      continue;
    }
    s = nl_xcalloc(1, sizeof *s);
    s->m = m;
    s->path = path;
    s->ino = f->ino;
    s->mtime_ns = f->mtime_ns;
    s->seen = true;
    nl_list_insert_tail(&m->socks, &s->link);
    m->n_socks++;
    nl_vlog(2, "plugin registration socket %s found", path);
    start_info(s);
  }
  nl_list_foreach_safe(pos, tmp, &m->socks) {
    sock_t *s = nl_list_entry(pos, sock_t, link);
    if (!s->seen && s->state != PS_CLOSING) sock_gone(s);
  }
}

/* The next scan, on the agent's grid (reactor/grid.h): it shares the wake-up
 * of the relist and the probes of that second. */
static void arm(nl_plugins_t *m) {
  uv_timer_start(&m->timer, scan_start, nl_grid_delay(uv_now(m->loop), m->opts.scan_ms, NL_GRID_MS),
                 0);
}

static void scan_done(uv_work_t *w, int status) {
  scan_t *sc = container_of(w, scan_t, w);
  nl_plugins_t *m = sc->m;
  m->scan = NULL;
  if (!m->stopping && status == 0) {
    if (sc->err && sc->err != ENOENT)
      nl_warn("plugin registration: read %s: %s", m->opts.dir, strerror(sc->err));
    else if (!sc->err || sc->err == ENOENT)
      reconcile(m, sc);
    m->scans++;
    arm(m);
  }
  scan_free(sc);
  closed_one(m);
}

static void scan_start(uv_timer_t *t) {
  nl_plugins_t *m = container_of(t, nl_plugins_t, timer);
  if (m->stopping || m->scan) return;
  scan_t *sc = nl_xcalloc(1, sizeof *sc);
  sc->m = m;
  sc->dir = nl_xstrdup(m->opts.dir);
  m->scan = sc;
  m->open++;
  int r = uv_queue_work(m->loop, &sc->w, scan_work, scan_done);
  if (r < 0) {
    m->scan = NULL;
    m->open--;
    scan_free(sc);
    nl_warn("plugin registration: queue scan: %s", uv_strerror(r));
    arm(m);
  }
}

/* ---- life ---- */

int nl_plugins_start(nl_plugins_t *m, uv_loop_t *loop, const nl_plugins_opts_t *opts,
                     nl_err_t **err) {
  memset(m, 0, sizeof *m);
  if (nl_mkdir_p(opts->dir, 0750) < 0)
    return nl_err_set(err, errno, "create plugin registration directory %s: %s", opts->dir,
                      strerror(errno));
  m->loop = loop;
  m->opts = *opts;
  m->opts.dir = nl_xstrdup(opts->dir);
  if (!m->opts.scan_ms) m->opts.scan_ms = 1000;
  if (!m->opts.call_timeout_ms) m->opts.call_timeout_ms = 10000;
  if (!m->opts.backoff_max_ms) m->opts.backoff_max_ms = 2 * 60 * 1000;
  if (!m->opts.max_sockets) m->opts.max_sockets = 256;
  if (!m->opts.max_msg) m->opts.max_msg = 64 * 1024;
  nl_list_init(&m->socks);
  uv_timer_init(loop, &m->timer);
  m->open = 1;
  uv_timer_start(&m->timer, scan_start, 0, 0);
  return 0;
}

static void closed_one(nl_plugins_t *m) {
  assert(m->open > 0);
  if (--m->open > 0 || !m->stopping) return;
  free((char *)m->opts.dir);
  m->opts.dir = NULL;
  if (m->done) m->done(m, m->done_ctx);
}

static void timer_closed(uv_handle_t *h) {
  closed_one(container_of((uv_timer_t *)h, nl_plugins_t, timer));
}

void nl_plugins_stop(nl_plugins_t *m, nl_plugins_done_fn done, void *ctx) {
  assert(!m->stopping);
  m->stopping = true;
  m->done = done;
  m->done_ctx = ctx;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &m->socks) {
    sock_t *s = nl_list_entry(pos, sock_t, link);
    s->h = NULL; /* the handlers stop on their own */
    s->state = PS_CLOSING;
    step(s);
  }
  if (m->scan) uv_cancel((uv_req_t *)&m->scan->w); /* its done callback still runs */
  uv_close((uv_handle_t *)&m->timer, timer_closed);
}

size_t nl_plugins_registered(const nl_plugins_t *m) {
  size_t n = 0;
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &((nl_plugins_t *)m)->socks)
    n += nl_list_entry(pos, sock_t, link)->h != NULL;
  return n;
}
