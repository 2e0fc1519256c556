#include "agent/kubelet_shutdown.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/kubelet_pods.h"
#include "managers/logind.h"
#include "managers/shutdown.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define NODE_SHUTDOWN_REASON "Terminated"
#define NODE_SHUTDOWN_MESSAGE "Pod was terminated in response to imminent node shutdown."

struct nl_kshutdown {
  nl_kubelet_t *k;
  nl_shutdown_t engine;
  uv_timer_t timer;      /* the running group's deadline */
  uv_signal_t sigusr1;
  uv_pipe_t listener;    /* <rootDir>/shutdown.sock */
  nl_logind_t logind;    /* its delay inhibitor, where systemd-logind runs */
  bool listening, stopping;
  char *sock_path;
  nl_list_t clients;     /* hooks connected */
  int open;              /* handles not yet closed */
};

/* One connected hook. */
typedef struct client {
  nl_list_t link;
  struct nl_kshutdown *s;
  uv_pipe_t pipe;
  char line[32];
  size_t len;
  bool waiting; /* asked; answered when the shutdown is done */
  bool closing;
} client_t;

typedef struct reply {
  uv_write_t req;
  client_t *c;
  char *text;
  bool last; /* close the connection once written */
} reply_t;

char *nl_kshutdown_socket_path(const char *root_dir) {
  return nl_xasprintf("%s/shutdown.sock", root_dir);
}

/* One of its handles has closed; the last one after stop frees it. */
static void release(struct nl_kshutdown *s) {
  if (--s->open > 0 || !s->stopping) return;
  nl_kubelet_t *k = s->k;
  nl_shutdown_free(&s->engine);
  free(s->sock_path);
  free(s);
  k->shutdown = NULL;
  nl__kubelet_release(k);
}

static void handle_closed(uv_handle_t *h) { release(h->data); }

static void client_closed(uv_handle_t *h) {
  client_t *c = container_of((uv_pipe_t *)h, client_t, pipe);
  struct nl_kshutdown *s = c->s;
  free(c);
  release(s);
}

static void client_close(client_t *c) {
  if (c->closing) return;
  c->closing = true;
  nl_list_remove(&c->link);
  uv_close((uv_handle_t *)&c->pipe, client_closed);
}

static void on_written(uv_write_t *req, int status) {
  reply_t *r = container_of(req, reply_t, req);
  if (r->last || status < 0) client_close(r->c);
  free(r->text);
  free(r);
}

/* Writes text (owned) to the hook; closes it afterwards when last. */
static void reply(client_t *c, char *text, bool last) {
  if (c->closing) {
    free(text);
    return;
  }
  reply_t *r = nl_xcalloc(1, sizeof *r);
  r->c = c;
  r->text = text;
  r->last = last;
  uv_buf_t b = uv_buf_init(text, (unsigned)strlen(text));
  if (uv_write(&r->req, (uv_stream_t *)&c->pipe, &b, 1, on_written) < 0) {
    free(text);
    free(r);
    client_close(c);
  }
}

static char *done_text(const struct nl_kshutdown *s) {
  return nl_xasprintf("done in %llu ms\n",
                      (unsigned long long)(s->engine.ended_ms - s->engine.started_ms));
}

/* After every move of the engine: the timer follows its deadline, and the
 * waiting hooks hear of its end. */
static void after_step(struct nl_kshutdown *s);

static void on_deadline(uv_timer_t *t) {
  struct nl_kshutdown *s = container_of(t, struct nl_kshutdown, timer);
  nl_shutdown_tick(&s->engine, uv_now(s->k->loop));
  after_step(s);
}

static void after_step(struct nl_kshutdown *s) {
  uint64_t deadline = nl_shutdown_deadline(&s->engine), now = uv_now(s->k->loop);
  if (deadline)
    uv_timer_start(&s->timer, on_deadline, deadline > now ? deadline - now : 0, 0);
  else
    uv_timer_stop(&s->timer);
  if (s->engine.state != NL_SHUTDOWN_DONE) return;
  nl_logind_release(&s->logind); /* logind goes on with the shutdown */
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &s->clients) {
    client_t *c = nl_list_entry(pos, client_t, link);
    if (c->waiting) reply(c, done_text(s), true);
  }
}

/* The engine's kill: upstream's TerminatePodAbnormally with the group's grace. */
static void kill_pod(void *ctx, const nl_shutdown_pod_t *sp, int64_t grace_s) {
  struct nl_kshutdown *s = ctx;
  nl_kubelet_t *k = s->k;
  const nl_pod_t *pod = nl_pod_manager_get(&k->pods, sp->uid);
  const nl_pod_worker_t *w = nl_pod_workers_get(&k->workers, sp->uid);
  if (!pod || !w || w->finished) {
    nl_shutdown_pod_done(&s->engine, sp->uid, uv_now(k->loop));
    return;
  }
  nl__kubelet_pods_terminate(k, pod, grace_s, NODE_SHUTDOWN_REASON, NODE_SHUTDOWN_MESSAGE, NULL);
}

bool nl__kubelet_shutting_down(const nl_kubelet_t *k) {
  return k->shutdown && k->shutdown->engine.state != NL_SHUTDOWN_IDLE;
}

void nl__kubelet_shutdown_pod_finished(nl_kubelet_t *k, const char *uid) {
  struct nl_kshutdown *s = k->shutdown;
  if (!s || s->engine.state != NL_SHUTDOWN_KILLING) return;
  nl_shutdown_pod_done(&s->engine, uid, uv_now(k->loop));
  after_step(s);
}

void nl__kubelet_shutdown_begin(nl_kubelet_t *k, const char *why) {
  struct nl_kshutdown *s = k->shutdown;
  if (!s || s->stopping || s->engine.state != NL_SHUTDOWN_IDLE) return;
  if (!nl_shutdown_enabled(&s->engine)) {
    nl_info("%s: graceful node shutdown is off (shutdownGracePeriod is 0)", why);
    return;
  }
  nl_info("%s: the node is shutting down; stopping pods within %llds", why,
          (long long)nl_shutdown_period_s(&s->engine));
  if (k->events_up) {
    nl_event_ref_t ref = nl_event_node_ref(k->node_name);
    nl_events_record(&k->events, &ref, NL_EVENT_NORMAL, "NodeShutdown",
                     "Shutdown manager detected shutdown event");
  }
  /* upstream getPods: the pods admitted whose workers may still run containers */
  size_t n, active = 0;
  const nl_pod_t **pods = nl_pod_manager_list(&k->pods, &n);
  nl_shutdown_pod_t *sp = nl_xcalloc(n + 1, sizeof *sp);
  for (size_t i = 0; i < n; i++) {
    const nl_pod_t *p = pods[i];
    const nl_pod_worker_t *w = nl_pod_workers_get(&k->workers, p->metadata.uid);
    if (!w || w->finished) continue;
    sp[active++] = (nl_shutdown_pod_t){
        p->metadata.uid, p->metadata.namespace_, p->metadata.name, nl_shutdown_pod_priority(p),
        p->spec.termination_grace_period_seconds.set ? p->spec.termination_grace_period_seconds.v
                                                     : -1};
  }
  /* The engine's state is KILLING from here: admission already says no. */
  nl_shutdown_begin(&s->engine, sp, active, uv_now(k->loop));
  free(sp);
  free(pods);
  if (k->node_up) nl_node_set_shutting_down(&k->node);
  after_step(s);
}

/* ---- the hook's socket ---- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  client_t *c = container_of((uv_pipe_t *)h, client_t, pipe);
  (void)suggested;
  *buf = uv_buf_init(c->line + c->len, (unsigned)(sizeof c->line - 1 - c->len));
}

static void on_request(client_t *c) {
  struct nl_kshutdown *s = c->s;
  uv_read_stop((uv_stream_t *)&c->pipe);
  if (strcmp(c->line, "shutdown") != 0) {
    reply(c, nl_xstrdup("error: unknown request (want \"shutdown\")\n"), true);
    return;
  }
  nl__kubelet_shutdown_begin(s->k, "shutdown hook");
  if (!nl_shutdown_enabled(&s->engine)) {
    reply(c, nl_xstrdup("graceful node shutdown is off (shutdownGracePeriod is 0)\n"), true);
    return;
  }
  if (s->engine.state == NL_SHUTDOWN_DONE) {
    reply(c, done_text(s), true);
    return;
  }
  c->waiting = true;
  reply(c, nl_xasprintf("shutting down: stopping %zu pods within %llds\n", s->engine.n_pods,
                        (long long)nl_shutdown_period_s(&s->engine)),
        false);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  client_t *c = container_of((uv_pipe_t *)st, client_t, pipe);
  (void)buf;
  if (nread < 0) {
    client_close(c);
    return;
  }
  c->len += (size_t)nread;
  c->line[c->len] = 0;
  char *nl = strchr(c->line, '\n');
  if (nl) {
    *nl = 0;
    on_request(c);
  } else if (c->len >= sizeof c->line - 1) {
    reply(c, nl_xstrdup("error: request too long\n"), true);
  }
}

static void on_connection(uv_stream_t *l, int status) {
  struct nl_kshutdown *s = container_of((uv_pipe_t *)l, struct nl_kshutdown, listener);
  if (status < 0 || s->stopping) return;
  client_t *c = nl_xcalloc(1, sizeof *c);
  c->s = s;
  uv_pipe_init(s->k->loop, &c->pipe, 0);
  c->pipe.data = s;
  s->open++;
  nl_list_insert_tail(&s->clients, &c->link);
  if (uv_accept(l, (uv_stream_t *)&c->pipe) < 0 ||
      uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read) < 0)
    client_close(c);
}

static void on_logind(void *ctx, bool shutting_down) {
  struct nl_kshutdown *s = ctx;
  if (shutting_down) {
    nl__kubelet_shutdown_begin(s->k, "systemd-logind: PrepareForShutdown");
    return;
  }
  /* upstream forgets the shutdown; pods it stopped stay stopped either way */
  if (s->engine.state != NL_SHUTDOWN_IDLE)
    nl_warn("systemd-logind: the shutdown was cancelled; this agent stays shutting down until it "
            "restarts");
}

static void on_logind_stopped(nl_logind_t *l) { release(container_of(l, struct nl_kshutdown, logind)); }

static void on_sigusr1(uv_signal_t *sig, int signum) {
  (void)signum;
  struct nl_kshutdown *s = sig->data;
  nl__kubelet_shutdown_begin(s->k, "received SIGUSR1");
}

int nl__kubelet_shutdown_init(nl_kubelet_t *k, nl_err_t **err) {
  (void)err;
  struct nl_kshutdown *s = nl_xcalloc(1, sizeof *s);
  s->k = k;
  nl_shutdown_init(&s->engine, k->cfg->shutdown_grace_period,
                   k->cfg->shutdown_grace_period_critical_pods, kill_pod, s);
  nl_list_init(&s->clients);
  uv_timer_init(k->loop, &s->timer);
  uv_signal_init(k->loop, &s->sigusr1);
  uv_pipe_init(k->loop, &s->listener, 0);
  s->timer.data = s->sigusr1.data = s->listener.data = s;
  nl_logind_init(&s->logind, k->loop, NL_LOGIND_BUS, nl_shutdown_period_s(&s->engine), on_logind,
                 s);
  s->open = 4; /* the timer, the signal, the listener and logind */
  s->sock_path = nl_kshutdown_socket_path(k->cfg->root_dir);
  k->shutdown = s;
  k->pending++;
  if (nl_shutdown_enabled(&s->engine)) {
    nl_info("graceful node shutdown: %llds, of which %llds for critical pods",
            (long long)nl_shutdown_period_s(&s->engine),
            (long long)(k->cfg->shutdown_grace_period_critical_pods / 1000000000));
  }
  return 0;
}

int nl__kubelet_shutdown_start(nl_kubelet_t *k, nl_err_t **err) {
  struct nl_kshutdown *s = k->shutdown;
  int r = uv_signal_start(&s->sigusr1, on_sigusr1, SIGUSR1);
  if (r < 0) return nl_err_set(err, -r, "signal handling: %s", uv_strerror(r));
  /* Where systemd-logind runs, its delay inhibitor as upstream; the edge case
   * has no system bus, and the shutdown hook alone starts the shutdown. */
  if (nl_shutdown_enabled(&s->engine) && nl_logind_start(&s->logind) < 0 &&
      access("/run/systemd/system", F_OK) == 0) /* sd_booted() */
    nl_info("graceful node shutdown: no system bus to reach systemd-logind; the shutdown hook "
            "(nanolet shutdown-hook, run by nanolet.service when the system stops) starts it");
  /* A socket left by an agent that died; the lock file keeps two agents apart. */
  unlink(s->sock_path);
  if ((r = uv_pipe_bind(&s->listener, s->sock_path)) < 0 ||
      (r = uv_listen((uv_stream_t *)&s->listener, 4, on_connection)) < 0) {
    /* The hook then finds no agent; the rest of the agent works. */
    nl_warn("shutdown hook socket %s: %s; the shutdown hook cannot reach this agent",
            s->sock_path, uv_strerror(r));
    return 0;
  }
  if (chmod(s->sock_path, 0600) < 0)
    nl_warn("shutdown hook socket %s: chmod: %s", s->sock_path, strerror(errno));
  s->listening = true;
  return 0;
}

void nl__kubelet_shutdown_stop(nl_kubelet_t *k) {
  struct nl_kshutdown *s = k->shutdown;
  if (!s || s->stopping) return;
  s->stopping = true;
  if (s->listening) unlink(s->sock_path);
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &s->clients) client_close(nl_list_entry(pos, client_t, link));
  uv_close((uv_handle_t *)&s->timer, handle_closed);
  uv_close((uv_handle_t *)&s->sigusr1, handle_closed);
  uv_close((uv_handle_t *)&s->listener, handle_closed);
  nl_logind_stop(&s->logind, on_logind_stopped);
}
