/* The node Lease (upstream's component-helpers lease controller as the kubelet
 * runs it): ensure it exists, then renew it every quarter of its duration. */
#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "managers/node.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define UPDATE_TRIES 5 /* upstream maxUpdateRetries */

static void lstep(nl_node_lease_t *l);

static const char *const state_names[] = {"WaitNode", "Get", "Create", "Update",
                                          "Backoff", "Idle", "Stopped"};

const char *nl_node_lease_state_name(nl_node_lease_state_t s) { return state_names[s]; }

static void set_state(nl_node_lease_t *l, nl_node_lease_state_t s) {
  nl_vlog(4, "node lease %s: %s -> %s", l->node->opts.conf.name, state_names[l->state],
          state_names[s]);
  l->state = s;
}

/* A quarter of the duration (upstream's renewIntervalFraction), jittered
 * from the end of the last renewal as upstream's lease controller runs its
 * sync. */
static uint64_t renew_ms(nl_node_lease_t *l) {
  return nl_node__jittered(&l->backoff, (uint64_t)l->node->opts.lease_duration_s * 1000 / 4);
}

static void on_timer(uv_timer_t *t) {
  nl_node_lease_t *l = container_of(t, nl_node_lease_t, timer);
  assert(l->state == NL_LEASE_BACKOFF || l->state == NL_LEASE_IDLE);
  l->update_tries = 0;
  set_state(l, l->state == NL_LEASE_IDLE && l->base ? NL_LEASE_UPDATE : NL_LEASE_GET);
  lstep(l);
}

static void wait_in(nl_node_lease_t *l, nl_node_lease_state_t s, uint64_t ms) {
  set_state(l, s);
  uv_timer_start(&l->timer, on_timer, ms, 0);
}

static void keep(nl_node_lease_t *l, const nl_kube_response_t *resp) {
  json_t *sent = l->sent;
  l->sent = NULL;
  if (sent && resp->body_len == 0 && l->state == NL_LEASE_UPDATE) {
    /* A renewal answered with its status: the Lease is what was sent. */
    json_decref(l->base);
    l->base = sent;
    return;
  }
  json_t *lease = nl_node__object(resp);
  if (lease && sent && nl_node__partial(lease)) {
    /* A renewal answered with the metadata: the Lease is what was sent
     * (the patch applied to base, on base's resourceVersion) with it. */
    json_object_set(sent, "metadata", json_object_get(lease, "metadata"));
    json_decref(lease);
    lease = json_incref(sent);
  }
  json_decref(sent);
  if (!lease) return;
  json_decref(l->base);
  l->base = lease;
}

/* The Lease as read is someone else's (a holder or duration nanolet did not
 * write): said once, as the next renewal takes it back. */
static void said_holder(const nl_node_lease_t *l) {
  const nl_node_t *n = l->node;
  const json_t *spec = json_object_get(l->base, "spec");
  const char *holder = json_string_value(json_object_get(spec, "holderIdentity"));
  json_int_t duration = json_integer_value(json_object_get(spec, "leaseDurationSeconds"));
  if (holder && strcmp(holder, n->opts.conf.name) == 0 && duration == n->opts.lease_duration_s)
    return;
  nl_info("node lease %s: held by \"%s\" for %" JSON_INTEGER_FORMAT " s; renewing it as \"%s\" "
          "for %" PRId32 " s",
          n->opts.conf.name, holder ? holder : "", duration, n->opts.conf.name,
          n->opts.lease_duration_s);
}

static void on_response(void *ctx, const nl_kube_response_t *resp, const nl_err_t *err) {
  nl_node_lease_t *l = ctx;
  nl_node_t *n = l->node;
  l->req = NULL;
  if (l->state == NL_LEASE_STOPPED) {
    nl_node__closed(n);
    return;
  }
  int code = err ? 0 : resp->status;
  nl_cleanup_err nl_err_t *e = NULL;
  if (code < 200 || code > 299) nl_node__req_err(resp, err, &e);
  uint64_t now = uv_now(n->loop);
  switch (l->state) {
  case NL_LEASE_GET:
    if (code == 404) {
      set_state(l, NL_LEASE_CREATE);
      break;
    }
    if (e) {
      nl_node__fail(&l->log, now, "failed to ensure lease exists, will retry: %s", nl_err_msg(e));
      wait_in(l, NL_LEASE_BACKOFF, nl_backoff_next(&l->backoff));
      return;
    }
    keep(l, resp);
    said_holder(l);
    set_state(l, NL_LEASE_UPDATE);
    break;
  case NL_LEASE_CREATE:
    if (e) {
      nl_node__fail(&l->log, now, "failed to create lease: %s", nl_err_msg(e));
      wait_in(l, NL_LEASE_BACKOFF, nl_backoff_next(&l->backoff));
      return;
    }
    keep(l, resp);
    nl_backoff_reset(&l->backoff);
    nl_node__ok(&l->log);
    nl_vlog(2, "node lease %s: created", n->opts.conf.name);
    wait_in(l, NL_LEASE_IDLE, renew_ms(l));
    return;
  case NL_LEASE_UPDATE:
    if (!e) {
      keep(l, resp);
      nl_backoff_reset(&l->backoff);
      if (l->log.failures) nl_node__link_back(n);
      nl_node__ok(&l->log);
      wait_in(l, NL_LEASE_IDLE, renew_ms(l));
      return;
    }
    if (code == 422 && l->tested) {
      /* A test failed: someone else changed the holder or the duration (or
       * dropped renewTime). Not a failure of the link: read the Lease and
       * write nanolet's own back, as upstream after its PUT's conflict. */
      nl_warn("node lease %s: changed by someone else, reading it again: %s", n->opts.conf.name,
              nl_err_msg(e));
      if (++l->update_tries >= UPDATE_TRIES) {
        wait_in(l, NL_LEASE_BACKOFF, nl_backoff_next(&l->backoff));
        return;
      }
      set_state(l, NL_LEASE_GET);
      break;
    }
    nl_node__fail(&l->log, now, "failed to update lease: %s", nl_err_msg(e));
    if (code == 404) { /* gone (the Node was deleted): create it again */
      set_state(l, NL_LEASE_GET);
    } else if (++l->update_tries >= UPDATE_TRIES) {
      /* Fall back to ensuring the Lease, with back-off, as upstream. */
      wait_in(l, NL_LEASE_BACKOFF, nl_backoff_next(&l->backoff));
      return;
    } else if (code == 409) { /* the newer Lease is needed to proceed */
      set_state(l, NL_LEASE_GET);
    }
    break;
  default:
    assert(0 && "lease response in a state without a request");
  }
  lstep(l);
}

static void request(nl_node_lease_t *l, const char *method, const char *path, const char *ctype,
                    json_t *body, nl_node_answer_t answer) {
  assert(!l->req);
  l->req = nl_node__request(l->node, method, path, "Lease", ctype, body, answer, on_response, l);
}

/* A renewal that only moves renewTime (the Lease holds what nanolet would
 * write otherwise) goes without the resourceVersion and is answered with its
 * status alone: the answer's body would echo the Lease, and it is half of a
 * renewal's bytes (docs/DIFFERENCES.md). It is a JSON patch that tests the
 * holder and the duration first, so that a Lease someone else took is
 * refused (422) and read again, as upstream's PUT conflicts. Anything else
 * goes on the resourceVersion as a merge patch, answered with the metadata,
 * the next one's condition. */
static void renew(nl_node_lease_t *l, const char *path) {
  nl_node_t *n = l->node;
  const char *name = n->opts.conf.name;
  int32_t duration = n->opts.lease_duration_s;
  int64_t now = nl_node__now_ns(n);
  json_decref(l->sent);
  l->sent = nl_node_lease(name, nl_node_uid(n), duration, now, l->base);
  json_t *patch = nl_node_lease_renewal(name, nl_node_uid(n), duration, now, l->base);
  json_t *meta = json_object_get(patch, "metadata"), *spec = json_object_get(patch, "spec");
  l->tested = json_object_size(spec) == 1 && json_object_get(spec, "renewTime") &&
              json_object_size(meta) == (json_object_get(meta, "resourceVersion") ? 1 : 0);
  if (l->tested) {
    json_decref(patch);
    request(l, "PATCH", path, "application/json-patch+json",
            nl_node_lease_renewal_tested(name, duration, now), NL_NODE_ANSWER_STATUS);
    return;
  }
  request(l, "PATCH", path, "application/merge-patch+json", patch, NL_NODE_ANSWER_META);
}

static void lstep(nl_node_lease_t *l) {
  nl_node_t *n = l->node;
  const char *name = n->opts.conf.name;
  static const char ns[] = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
  char *path = NULL;
  switch (l->state) {
  case NL_LEASE_GET:
    path = nl_xasprintf("%s/%s", ns, name);
    request(l, "GET", path, NULL, NULL, NL_NODE_ANSWER_OBJECT);
    break;
  case NL_LEASE_CREATE:
    request(l, "POST", ns, NULL,
            nl_node_lease(name, nl_node_uid(n), n->opts.lease_duration_s, nl_node__now_ns(n), NULL),
            NL_NODE_ANSWER_OBJECT);
    break;
  case NL_LEASE_UPDATE:
    path = nl_xasprintf("%s/%s", ns, name);
    renew(l, path);
    break;
  default:
    assert(0 && "lease step in a waiting state");
  }
  free(path);
}

void nl_node__lease_kick(nl_node_lease_t *l) {
  if (l->state != NL_LEASE_WAIT_NODE) return;
  set_state(l, NL_LEASE_GET);
  lstep(l);
}

void nl_node__lease_stop(nl_node_lease_t *l) {
  set_state(l, NL_LEASE_STOPPED);
  if (l->req) {
    l->node->pending++;
    nl_kube_req_cancel(l->req);
  }
}
