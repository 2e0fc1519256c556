/* ResourceSlice clean-up (upstream's DRAPluginManager wipeResourceSlices): at
 * start, and wipe_delay_ms after a driver's last plugin went away unless one
 * registers again, the ResourceSlices of this node (of that driver) are
 * deleted with one DELETE of the collection (the node authorizer allows a
 * node its own slices). A failure is tried again with back-off (1 s doubling
 * to 5 min, upstream's); a 404 counts as done. */
#include <stdlib.h>
#include <string.h>

#include "agent/kube/status.h"
#include "managers/dra_internal.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define BACKOFF_INITIAL_MS 1000
#define BACKOFF_MAX_MS (5 * 60 * 1000)

static void arm(nl_dra_t *m);

static nl_dra_driver_t *find(nl_dra_t *m, const char *name) {
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &m->drivers) {
    nl_dra_driver_t *d = nl_list_entry(pos, nl_dra_driver_t, link);
    if (!d->cancelled && strcmp(d->name, name) == 0) return d;
  }
  return NULL;
}

static void driver_free(nl_dra_driver_t *d) {
  nl_list_remove(&d->link);
  free(d->name);
  free(d);
}

void nl__dra_wipe_schedule(nl_dra_t *m, const char *driver, uint64_t delay_ms) {
  if (!m->opts.kube || !m->opts.node_name || find(m, driver)) return; /* the first due stands */
  nl_dra_driver_t *d = nl_xcalloc(1, sizeof *d);
  d->m = m;
  d->name = nl_xstrdup(driver);
  d->due = uv_now(m->loop) + delay_ms;
  nl_list_insert_tail(&m->drivers, &d->link);
  if (*driver)
    nl_info("DRA driver %s has no plugin connected: its ResourceSlices on this node are deleted "
            "in %llu s unless one connects", driver, (unsigned long long)(delay_ms / 1000));
  arm(m);
}

void nl__dra_wipe_cancel(nl_dra_t *m, const char *driver) {
  nl_dra_driver_t *d = find(m, driver);
  if (!d) return;
  if (*driver) nl_info("DRA driver %s: a plugin is connected: its ResourceSlices are kept", driver);
  if (d->req) d->cancelled = true; /* its answer frees it */
  else driver_free(d);
  arm(m);
}

static void on_deleted(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err) {
  nl_dra_driver_t *d = ctx;
  nl_dra_t *m = d->m;
  d->req = NULL;
  const char *what = *d->name ? d->name : "every driver";
  if (d->cancelled || m->state != NL_DRA_RUNNING) {
    driver_free(d);
  } else if (!err && ((resp->status >= 200 && resp->status < 300) || resp->status == 404)) {
    nl_vlog(2, "ResourceSlices of %s on node %s deleted", what, m->opts.node_name);
    m->wipes++;
    driver_free(d);
  } else {
    nl_err_t *e = NULL;
    if (!err) nl_kube_status_err(resp, &e);
    d->backoff_ms = d->backoff_ms ? d->backoff_ms * 2 : BACKOFF_INITIAL_MS;
    if (d->backoff_ms > BACKOFF_MAX_MS) d->backoff_ms = BACKOFF_MAX_MS;
    d->due = uv_now(m->loop) + d->backoff_ms;
    nl_warn("delete the ResourceSlices of %s on node %s: %s (tried again in %llu ms)", what,
            m->opts.node_name, err ? nl_err_msg(err) : nl_err_msg(e),
            (unsigned long long)d->backoff_ms);
    nl_err_free(&e);
  }
  arm(m);
  nl__dra_release(m);
}

static void wipe_start(nl_dra_t *m, nl_dra_driver_t *d) {
  char *path;
  if (*d->name)
    path = nl_xasprintf("/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%%3D"
                        "%s%%2Cspec.driver%%3D%s", m->opts.node_name, d->name);
  else
    path = nl_xasprintf("/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%%3D%s",
                        m->opts.node_name);
  nl_kube_request_opts_t o = {.method = "DELETE", .path = path};
  m->open++;
  d->req = nl_kube_request(m->opts.kube, &o, on_deleted, d);
  free(path);
}

static void on_timer(uv_timer_t *t) {
  nl_dra_t *m = container_of(t, nl_dra_t, wipe_timer);
  uint64_t now = uv_now(m->loop);
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &m->drivers) {
    nl_dra_driver_t *d = nl_list_entry(pos, nl_dra_driver_t, link);
    if (!d->req && !d->cancelled && d->due <= now) wipe_start(m, d);
  }
  arm(m);
}

static void arm(nl_dra_t *m) {
  if (m->state != NL_DRA_RUNNING) return;
  uint64_t next = UINT64_MAX, now = uv_now(m->loop);
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &m->drivers) {
    nl_dra_driver_t *d = nl_list_entry(pos, nl_dra_driver_t, link);
    if (!d->req && !d->cancelled && d->due < next) next = d->due;
  }
  if (next == UINT64_MAX) uv_timer_stop(&m->wipe_timer);
  else uv_timer_start(&m->wipe_timer, on_timer, next > now ? next - now : 0, 0);
}

void nl__dra_wipe_stop(nl_dra_t *m) {
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &m->drivers) {
    nl_dra_driver_t *d = nl_list_entry(pos, nl_dra_driver_t, link);
    if (d->req) {
      d->cancelled = true;
      nl_kube_req_cancel(d->req);
    } else {
      driver_free(d);
    }
  }
  uv_timer_stop(&m->wipe_timer);
}
