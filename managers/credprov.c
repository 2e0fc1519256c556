/* The credential provider plugins at run time (upstream
 * pkg/credentialprovider/plugin/plugin.go): matching, the cache, and each run
 * of a plugin as a child process of the loop.
 *
 * A run owns five handles (the process, its three pipes and a timer); it ends
 * when the last one is closed, and only then are its answer parsed and its
 * waiting lookups answered. The timer is the minute's limit while the process
 * runs, then a second's grace for the pipes after it exited (a plugin that
 * left a child holding its stdout would keep them open). */
#include "managers/credprov.h"

#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reactor/buf.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

extern char **environ;

#define GLOBAL_KEY "<global>"
#define PIPE_GRACE_MS 1000
#define MAX_STDERR 4096

typedef struct nl_credprov_entry {
  struct nl_credprov_entry *next;
  char *key;
  uint64_t expires_ms;
  nl_credprov_response_t r; /* its auth only */
} entry_t;

typedef struct lookup {
  nl_list_t link; /* cp->lookups */
  size_t waiting;
  nl_keyring_t keyring;
  nl_credprov_cb cb;
  void *ctx;
} lookup_t;

typedef struct nl_credprov_run {
  nl_list_t link; /* cp->runs */
  nl_credprov_t *cp;
  size_t provider;
  char *image;
  uv_process_t proc;
  uv_pipe_t in, out, err;
  uv_timer_t timer;
  uv_write_t wr;
  char *request;
  int open; /* handles not closed yet */
  bool exited, timed_out, overflow, spawn_failed;
  int64_t status;
  int signal;
  char *spawn_error;
  uint64_t start_ms;
  nl_buf_t stdout_buf, stderr_buf;
  lookup_t **waiters;
  size_t n_waiters;
} run_t;

static uint64_t now_ms(const nl_credprov_t *cp) {
  return cp->now_ms ? cp->now_ms(cp->now_ctx) : uv_now(cp->loop);
}

int nl_credprov_init(nl_credprov_t *cp, uv_loop_t *loop, nl_credprov_config_t *config,
                     const char *bin_dir, nl_err_t **err) {
  memset(cp, 0, sizeof *cp);
  if (!bin_dir || !*bin_dir) {
    nl_credprov_config_free(config);
    return nl_err_set(err, NL_EINVAL,
                      "--image-credential-provider-bin-dir must be set with "
                      "--image-credential-provider-config");
  }
  for (size_t i = 0; i < config->n; i++) {
    char *path = nl_xasprintf("%s/%s", bin_dir, config->providers[i].name);
    struct stat st;
    int rc = stat(path, &st);
    free(path);
    if (rc < 0) {
      rc = nl_err_set(err, ENOENT, "plugin binary executable %s/%s did not exist", bin_dir,
                      config->providers[i].name);
      nl_credprov_config_free(config);
      return rc;
    }
  }
  cp->loop = loop;
  cp->config = *config;
  memset(config, 0, sizeof *config);
  cp->bin_dir = nl_xstrdup(bin_dir);
  cp->cache = nl_xcalloc(cp->config.n ? cp->config.n : 1, sizeof *cp->cache);
  nl_list_init(&cp->runs);
  nl_list_init(&cp->lookups);
  return 0;
}

static bool provider_wants(const nl_credprov_provider_t *p, const char *repo) {
  for (size_t i = 0; i < p->n_match; i++)
    if (nl_keyring_urls_match(p->match_images[i], repo)) return true;
  return false;
}

bool nl_credprov_wants(const nl_credprov_t *cp, const char *image) {
  if (!cp || !cp->config.n) return false;
  nl_cleanup_free char *repo = nl_keyring_repo(image);
  for (size_t i = 0; repo && i < cp->config.n; i++)
    if (provider_wants(&cp->config.providers[i], repo)) return true;
  return false;
}

/* ---- the cache -------------------------------------------------------------- */

static void entry_free(entry_t *e) {
  free(e->key);
  nl_credprov_response_free(&e->r);
  free(e);
}

/* The entry of provider i under image, its registry or the global key, the
 * expired ones dropped on the way. */
static const entry_t *cache_get(nl_credprov_t *cp, size_t i, const char *repo) {
  uint64_t now = now_ms(cp);
  for (entry_t **pe = &cp->cache[i]; *pe;) {
    if ((*pe)->expires_ms <= now) {
      entry_t *dead = *pe;
      *pe = dead->next;
      entry_free(dead);
    } else {
      pe = &(*pe)->next;
    }
  }
  nl_cleanup_free char *registry = nl_credprov_registry(repo);
  const char *keys[] = {repo, registry, GLOBAL_KEY};
  for (size_t k = 0; k < 3; k++)
    for (const entry_t *e = cp->cache[i]; e; e = e->next)
      if (!strcmp(e->key, keys[k])) return e;
  return NULL;
}

/* Keeps r's credentials as upstream caches them: for its cacheDuration, else
 * the provider's default; a duration of 0 keeps nothing. Takes r's auth. */
static void cache_put(nl_credprov_t *cp, size_t i, const char *repo, nl_credprov_response_t *r) {
  int64_t ns = r->has_duration ? r->duration_ns : cp->config.providers[i].default_cache_ns;
  if (ns <= 0) return;
  entry_t *e = nl_xcalloc(1, sizeof *e);
  e->key = r->key_type == NL_CREDPROV_KEY_IMAGE      ? nl_xstrdup(repo)
           : r->key_type == NL_CREDPROV_KEY_REGISTRY ? nl_credprov_registry(repo)
                                                      : nl_xstrdup(GLOBAL_KEY);
  e->expires_ms = now_ms(cp) + (uint64_t)(ns / 1000000);
  e->r = *r;
  memset(r, 0, sizeof *r);
  for (entry_t **pe = &cp->cache[i]; *pe; pe = &(*pe)->next)
    if (!strcmp((*pe)->key, e->key)) { /* replaced */
      entry_t *old = *pe;
      e->next = old->next;
      *pe = e;
      entry_free(old);
      return;
    }
  e->next = cp->cache[i];
  cp->cache[i] = e;
}

/* ---- lookups ----------------------------------------------------------------- */

static void add_auth(lookup_t *l, const nl_credprov_response_t *r, const char *provider) {
  for (size_t i = 0; i < r->n_auth; i++)
    if (nl_keyring_add_cred(&l->keyring, r->auth[i].match, r->auth[i].username, r->auth[i].password) < 0)
      nl_warn("credential provider %s: \"%s\" is not a valid registry URL, ignoring it", provider,
              r->auth[i].match);
}

static void lookup_done(lookup_t *l) {
  nl_list_remove(&l->link);
  l->cb(l->keyring.n ? &l->keyring : NULL, l->ctx);
  nl_keyring_free(&l->keyring);
  free(l);
}

/* ---- a run of a plugin ------------------------------------------------------------ */

static void run_free(run_t *r) {
  free(r->image);
  free(r->request);
  free(r->spawn_error);
  nl_buf_free(&r->stdout_buf);
  nl_buf_free(&r->stderr_buf);
  free(r->waiters);
  free(r);
}

static bool run_ok(const run_t *r) {
  return !r->spawn_failed && !r->timed_out && !r->overflow && r->exited && r->status == 0 && !r->signal;
}

/* Every handle is closed: the answer. */
static void run_finish(run_t *r) {
  nl_credprov_t *cp = r->cp;
  const nl_credprov_provider_t *p = &cp->config.providers[r->provider];
  nl_list_remove(&r->link);
  nl_credprov_response_t resp = {0};
  nl_err_t *err = NULL;
  bool failed = true;
  if (cp->closing && !run_ok(r)) {
    nl_vlog(2, "credential provider %s: stopped for image %s", p->name, r->image);
  } else if (r->spawn_failed) {
    nl_warn("credential provider %s: error execing credential provider plugin %s for image %s: %s",
            p->name, p->name, r->image, r->spawn_error);
  } else if (r->timed_out) {
    nl_warn("credential provider %s: error execing credential provider plugin %s for image %s: "
            "context deadline exceeded",
            p->name, p->name, r->image);
  } else if (r->overflow) {
    nl_warn("credential provider %s: its answer for image %s is larger than %d bytes", p->name,
            r->image, NL_CREDPROV_MAX_OUTPUT);
  } else if (!run_ok(r)) {
    nl_buf_append(&r->stderr_buf, "", 1);
    char status[48];
    if (r->signal) snprintf(status, sizeof status, "signal: %d", r->signal);
    else snprintf(status, sizeof status, "exit status %lld", (long long)r->status);
    nl_warn("credential provider %s: error execing credential provider plugin %s for image %s: %s: %s",
            p->name, p->name, r->image, status, r->stderr_buf.data);
  } else if (nl_credprov_response_parse(&resp, p->api_version, r->stdout_buf.data ? r->stdout_buf.data : "",
                                        r->stdout_buf.len, &err) < 0) {
    nl_warn("credential provider %s: image %s: %s", p->name, r->image, nl_err_msg(err));
    nl_err_free(&err);
  } else {
    failed = false;
  }
  if (r->start_ms && cp->observe && !r->spawn_failed)
    cp->observe(cp->observe_ctx, p->name, (double)(uv_now(cp->loop) - r->start_ms) / 1000.0, failed);
  for (size_t i = 0; i < r->n_waiters; i++) {
    lookup_t *l = r->waiters[i];
    if (!failed) add_auth(l, &resp, p->name);
    if (--l->waiting == 0) lookup_done(l);
  }
  if (!failed) cache_put(cp, r->provider, r->image, &resp);
  nl_credprov_response_free(&resp);
  run_free(r);
  if (cp->closing && nl_list_empty(&cp->runs) && cp->closed) {
    void (*closed)(void *) = cp->closed;
    cp->closed = NULL;
    closed(cp->closed_ctx);
  }
}

static void handle_closed(uv_handle_t *h) {
  run_t *r = h->data;
  if (--r->open == 0) run_finish(r);
}

static void close_once(run_t *r, uv_handle_t *h) {
  if (!uv_is_closing(h)) uv_close(h, handle_closed);
}

/* The process is gone and its pipes are closed or given up on. */
static void maybe_close_timer(run_t *r) {
  if (r->exited && uv_is_closing((uv_handle_t *)&r->out) && uv_is_closing((uv_handle_t *)&r->err))
    close_once(r, (uv_handle_t *)&r->timer);
}

static void on_timer(uv_timer_t *t) {
  run_t *r = t->data;
  if (!r->exited) {
    r->timed_out = true;
    uv_process_kill(&r->proc, SIGKILL);
    return; /* on_exit comes next */
  }
  close_once(r, (uv_handle_t *)&r->out);
  close_once(r, (uv_handle_t *)&r->err);
  maybe_close_timer(r);
}

static void on_proc_exit(uv_process_t *p, int64_t status, int signal) {
  run_t *r = p->data;
  r->exited = true;
  r->status = status;
  r->signal = signal;
  close_once(r, (uv_handle_t *)&r->proc);
  uv_timer_start(&r->timer, on_timer, PIPE_GRACE_MS, 0);
  maybe_close_timer(r);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
  (void)h;
  (void)hint;
  static char chunk[16384]; /* the loop's one thread: read into it, copied at once */
  *b = uv_buf_init(chunk, sizeof chunk);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  run_t *r = s->data;
  bool is_out = s == (uv_stream_t *)&r->out;
  if (n < 0) {
    close_once(r, (uv_handle_t *)s);
    maybe_close_timer(r);
    return;
  }
  nl_buf_t *buf = is_out ? &r->stdout_buf : &r->stderr_buf;
  size_t cap = is_out ? NL_CREDPROV_MAX_OUTPUT : MAX_STDERR;
  size_t take = (size_t)n;
  if (buf->len + take > cap) {
    take = cap - buf->len;
    if (is_out && !r->overflow) {
      r->overflow = true;
      if (!r->exited) uv_process_kill(&r->proc, SIGKILL);
    }
  }
  nl_buf_append(buf, b->base, take);
}

static void on_written(uv_write_t *w, int status) {
  (void)status; /* a plugin that does not read its request answers or not: its exit tells */
  run_t *r = w->data;
  close_once(r, (uv_handle_t *)&r->in);
}

/* The environment: the agent's, with the provider's variables over it. */
static char **make_env(const nl_credprov_provider_t *p) {
  size_t n = 0;
  for (char **e = environ; e && *e; e++) n++;
  char **env = nl_xcalloc(n + p->n_env + 1, sizeof *env);
  size_t k = 0;
  for (char **e = environ; e && *e; e++) {
    size_t nl = strcspn(*e, "=");
    bool over = false;
    for (size_t i = 0; i < p->n_env && !over; i++)
      over = !strncmp(p->env[i], *e, nl) && p->env[i][nl] == '=';
    if (!over) env[k++] = *e;
  }
  for (size_t i = 0; i < p->n_env; i++) env[k++] = p->env[i];
  return env;
}

static run_t *run_start(nl_credprov_t *cp, size_t i, const char *repo) {
  const nl_credprov_provider_t *p = &cp->config.providers[i];
  run_t *r = nl_xcalloc(1, sizeof *r);
  r->cp = cp;
  r->provider = i;
  r->image = nl_xstrdup(repo);
  nl_list_insert_tail(&cp->runs, &r->link);
  uv_pipe_init(cp->loop, &r->in, 0);
  uv_pipe_init(cp->loop, &r->out, 0);
  uv_pipe_init(cp->loop, &r->err, 0);
  uv_timer_init(cp->loop, &r->timer);
  r->in.data = r->out.data = r->err.data = r->timer.data = r->proc.data = r->wr.data = r;
  r->open = 4;
  char *path = nl_xasprintf("%s/%s", cp->bin_dir, p->name);
  char **argv = nl_xcalloc(p->n_args + 2, sizeof *argv);
  argv[0] = path;
  for (size_t a = 0; a < p->n_args; a++) argv[a + 1] = p->args[a];
  char **env = make_env(p);
  uv_stdio_container_t stdio[3] = {
      {.flags = UV_CREATE_PIPE | UV_READABLE_PIPE, .data.stream = (uv_stream_t *)&r->in},
      {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&r->out},
      {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&r->err},
  };
  uv_process_options_t o = {
      .exit_cb = on_proc_exit, .file = path, .args = argv, .env = env, .stdio_count = 3, .stdio = stdio};
  cp->runs_started++;
  int rc = uv_spawn(cp->loop, &r->proc, &o);
  free(argv);
  free(env);
  free(path);
  if (rc < 0) {
    r->spawn_failed = true;
    r->exited = true;
    r->spawn_error = nl_xstrdup(uv_strerror(rc));
    /* libuv closes a process handle whose spawn failed only through uv_close */
    r->open++;
    close_once(r, (uv_handle_t *)&r->proc);
    close_once(r, (uv_handle_t *)&r->in);
    close_once(r, (uv_handle_t *)&r->out);
    close_once(r, (uv_handle_t *)&r->err);
    close_once(r, (uv_handle_t *)&r->timer);
    return r;
  }
  r->open++;
  r->start_ms = uv_now(cp->loop);
  uv_timer_start(&r->timer, on_timer, cp->timeout_ms ? cp->timeout_ms : NL_CREDPROV_TIMEOUT_MS, 0);
  uv_read_start((uv_stream_t *)&r->out, on_alloc, on_read);
  uv_read_start((uv_stream_t *)&r->err, on_alloc, on_read);
  r->request = nl_credprov_request_json(p->api_version, repo);
  uv_buf_t b = uv_buf_init(r->request, (unsigned)strlen(r->request));
  if (uv_write(&r->wr, (uv_stream_t *)&r->in, &b, 1, on_written) < 0)
    close_once(r, (uv_handle_t *)&r->in);
  return r;
}

void nl_credprov_lookup(nl_credprov_t *cp, const char *image, nl_credprov_cb cb, void *ctx) {
  nl_cleanup_free char *repo = nl_keyring_repo(image);
  lookup_t *l = nl_xcalloc(1, sizeof *l);
  l->cb = cb;
  l->ctx = ctx;
  l->waiting = 1; /* this call's own, so that no run answers it early */
  nl_list_insert_tail(&cp->lookups, &l->link);
  for (size_t i = 0; repo && !cp->closing && i < cp->config.n; i++) {
    const nl_credprov_provider_t *p = &cp->config.providers[i];
    if (!provider_wants(p, repo)) continue;
    const entry_t *e = cache_get(cp, i, repo);
    if (e) {
      add_auth(l, &e->r, p->name);
      continue;
    }
    run_t *r = NULL;
    nl_list_t *it, *tmp;
    nl_list_foreach_safe(it, tmp, &cp->runs) {
      run_t *x = nl_list_entry(it, run_t, link);
      if (x->provider == i && !strcmp(x->image, repo) && !x->exited) r = x;
    }
    if (!r) r = run_start(cp, i, repo);
    r->waiters = nl_xrealloc(r->waiters, (r->n_waiters + 1) * sizeof *r->waiters);
    r->waiters[r->n_waiters++] = l;
    l->waiting++;
  }
  if (--l->waiting == 0) lookup_done(l);
}

void nl_credprov_close(nl_credprov_t *cp, void (*closed)(void *ctx), void *ctx) {
  if (!cp->loop) { /* never initialised */
    if (closed) closed(ctx);
    return;
  }
  cp->closing = true;
  cp->closed = closed;
  cp->closed_ctx = ctx;
  nl_list_t *it, *tmp;
  nl_list_foreach_safe(it, tmp, &cp->runs) {
    run_t *r = nl_list_entry(it, run_t, link);
    if (!r->exited) uv_process_kill(&r->proc, SIGKILL);
  }
  for (size_t i = 0; i < cp->config.n; i++)
    while (cp->cache[i]) {
      entry_t *e = cp->cache[i];
      cp->cache[i] = e->next;
      entry_free(e);
    }
  if (nl_list_empty(&cp->runs)) {
    cp->closed = NULL;
    if (closed) closed(ctx);
  }
}

void nl_credprov_free(nl_credprov_t *cp) {
  assert(!cp->loop || nl_list_empty(&cp->runs)); /* closed first */
  if (cp->cache) {
    for (size_t i = 0; i < cp->config.n; i++)
      while (cp->cache[i]) {
        entry_t *e = cp->cache[i];
        cp->cache[i] = e->next;
        entry_free(e);
      }
  }
  free(cp->cache);
  free(cp->bin_dir);
  nl_credprov_config_free(&cp->config);
  memset(cp, 0, sizeof *cp);
}
