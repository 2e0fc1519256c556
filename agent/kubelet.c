#include "agent/kubelet.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reactor/log.h"
#include "reactor/xalloc.h"

static void release(nl_kubelet_t *k) {
  if (--k->pending > 0) return;
  k->stopping = 2;
  nl_info("all managers stopped");
  if (k->done_cb) k->done_cb(k);
}

static void on_handle_closed(uv_handle_t *h) { release(h->data); }

static void on_signal(uv_signal_t *s, int signum) {
  nl_kubelet_t *k = s->data;
  if (++k->signals_seen > 1) {
    /* As upstream: a second signal exits at once. */
    static const char msg[] = "nanolet: second signal, exiting now\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
  }
  nl_info("received %s, shutting down (pods keep running)", strsignal(signum));
  nl_kubelet_stop(k, k->done_cb);
}

int nl_kubelet_init(nl_kubelet_t *k, uv_loop_t *loop, const nl_kubelet_config_t *cfg,
                    const char *node_name, nl_err_t **err) {
  memset(k, 0, sizeof *k);
  k->loop = loop;
  k->cfg = cfg;
  k->node_name = nl_xstrdup(node_name);
  k->standalone = !cfg->kubeconfig || !*cfg->kubeconfig;
  uv_signal_init(loop, &k->sigterm);
  uv_signal_init(loop, &k->sigint);
  k->sigterm.data = k->sigint.data = k;
  k->pending = 2;
  return 0;
}

int nl_kubelet_start(nl_kubelet_t *k, nl_err_t **err) {
  int r;
  if ((r = uv_signal_start(&k->sigterm, on_signal, SIGTERM)) < 0 ||
      (r = uv_signal_start(&k->sigint, on_signal, SIGINT)) < 0)
    return nl_err_set(err, -r, "signal handling: %s", uv_strerror(r));
  if (k->standalone) nl_info("no kubeconfig given: running in standalone mode");
  return 0;
}

void nl_kubelet_stop(nl_kubelet_t *k, nl_kubelet_done_cb done_cb) {
  k->done_cb = done_cb;
  if (k->stopping) return;
  k->stopping = 1;
  k->pending++; /* held until every stop below has been issued */
  uv_close((uv_handle_t *)&k->sigterm, on_handle_closed);
  uv_close((uv_handle_t *)&k->sigint, on_handle_closed);
  release(k);
}
