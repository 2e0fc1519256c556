/* List and watch one resource, as client-go's reflector: LIST (resourceVersion
 * "0" first: served from the apiserver's watch cache), hand the caller the whole
 * list, then WATCH from the list's resourceVersion with allowWatchBookmarks and a
 * timeoutSeconds drawn from [300, 600) s. Every event and bookmark advances the
 * resourceVersion; a watch that ends normally is re-opened from it at once. A
 * 410 (HTTP, or an ERROR event with code 410, reason Expired/Gone) means the
 * version is too old: the caller gets a fresh list. Other failures back off
 * (800 ms doubling to 30 s, jittered, reset after 2 min without one) and then
 * list again, or re-watch when no response came at all.
 *
 * With opts.kind the watch may be protobuf (watch_decode.h), as client-go's is
 * with its content type: bookmarks and events are then a third to a half of
 * their JSON size.
 *
 * It talks only through agent/kube/client.h; one request is in flight at a time.
 * Paging (limit/continue) is not used: a node's pods are one page.
 *
 * Ownership: nl_reflector_new() allocates; nl_reflector_stop() cancels the
 * request in flight and frees the reflector once its completion and the timer's
 * close callback have run, then calls done. Callbacks may call
 * nl_reflector_stop() (nothing is freed before they return). */
#ifndef NL_KUBE_REFLECTOR_H
#define NL_KUBE_REFLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "agent/kube/client.h"
#include "agent/kube/watch_decode.h"

typedef struct nl_reflector nl_reflector_t;

typedef struct nl_kube_raw {
  const char *json; /* one object's JSON text, not NUL-terminated */
  size_t len;
} nl_kube_raw_t;

typedef struct nl_reflector_cbs {
  /* A complete list: its items replace everything the caller holds (client-go's
   * Replace). The first call is the "synced" point (upstream's HasSynced: e.g.
   * the pod source's "all sources seen"). Pointers are valid during the call. */
  void (*on_list)(void *ctx, const nl_kube_raw_t *items, size_t n, const char *rv);
  /* An ADDED, MODIFIED or DELETED event (bookmarks and errors stay inside). */
  void (*on_event)(void *ctx, const nl_kube_watch_event_t *ev);
  /* Optional: a list failed (the reflector lists again after its back-off);
   * status is the HTTP status, 0 when no response came (a list fails at once
   * when the server cannot be reached, as client-go's does). */
  void (*on_list_error)(void *ctx, int status, const nl_err_t *err);
} nl_reflector_cbs_t;

typedef struct nl_reflector_opts {
  const char *path;           /* "/api/v1/pods" (no query) */
  const char *field_selector; /* "spec.nodeName=n1", or NULL; escaped here */
  const char *label_selector; /* or NULL */
  /* The items' apiVersion and kind, or NULL: when the client prefers protobuf
   * and agent/kube/pb.c knows the kind, the watch asks for protobuf (the list
   * stays JSON); events reach on_event as JSON text all the same. */
  const char *api_version, *kind;
  /* 0 for upstream's values; tests shorten them */
  uint64_t min_watch_timeout_ms; /* 5 min: timeoutSeconds is this times 1 + rand */
  uint64_t backoff_initial_ms;   /* 800 ms */
  uint64_t backoff_max_ms;       /* 30 s */
  size_t max_event;              /* NL_KUBE_WATCH_MAX_EVENT */
} nl_reflector_opts_t;

typedef enum nl_reflector_state {
  NL_REFLECTOR_IDLE,     /* created, not started */
  NL_REFLECTOR_LISTING,  /* a LIST in flight */
  NL_REFLECTOR_WATCHING, /* a WATCH stream open */
  NL_REFLECTOR_BACKOFF,  /* waiting, then LIST (or WATCH after a transport failure) */
  NL_REFLECTOR_STOPPING,
} nl_reflector_state_t;

/* Copies opts. Returns 0, or -1 with *err when opts->path is not an absolute path. */
int nl_reflector_new(nl_reflector_t **out, uv_loop_t *loop, nl_kube_client_t *client,
                     const nl_reflector_opts_t *opts, const nl_reflector_cbs_t *cbs, void *ctx,
                     nl_err_t **err);
void nl_reflector_start(nl_reflector_t *r);
void nl_reflector_stop(nl_reflector_t *r, void (*done)(void *ctx), void *ctx);

nl_reflector_state_t nl_reflector_state(const nl_reflector_t *r);
const char *nl_reflector_state_name(nl_reflector_state_t s);
/* True once a first list was delivered. */
bool nl_reflector_synced(const nl_reflector_t *r);
/* The last resourceVersion seen; "" before the first list. */
const char *nl_reflector_resource_version(const nl_reflector_t *r);

#endif
