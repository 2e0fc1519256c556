/* Shared by managers/objects*.c only. */
#ifndef NL_OBJECTS_INTERNAL_H
#define NL_OBJECTS_INTERNAL_H

#include "agent/kube/reflector.h"
#include "managers/objects.h"
#include "reactor/map.h"

/* One referenced object: counted by the pods that name it, and fetched by a
 * reflector (Watch) or by GETs (Get, Cache). */
typedef struct nl__obj_entry {
  nl_objects_t *m;
  nl_object_kind_t kind;
  char *ns, *name;
  unsigned refs;          /* pods, plus one while a changed callback runs */
  nl_object_t *obj;       /* owned; NULL: none (see known) */
  bool known;             /* a fetch answered: obj, or NULL for "not found" */
  bool immutable;         /* no watch needed any more */
  char *error;            /* the last failure while nothing is known, or NULL */
  nl_reflector_t *refl;   /* Watch */
  bool polled;            /* Watch, but over max_watches: fetched as with Cache */
  nl_kube_req_t *req;     /* Get and Cache: the GET in flight */
  uint64_t gen;           /* of req, from the manager's counter */
  uint64_t fetched_ms;    /* Cache: when the copy was fetched */
  bool stale;             /* Cache: a pod registered it again: fetch at the next lookup
                           * (upstream's AddReference drops the cached data) */
} nl__obj_entry_t;

struct nl_objects {
  uv_loop_t *loop;
  nl_kube_client_t *client;
  nl_objects_opts_t opts;
  nl_map_t entries; /* key -> nl__obj_entry_t */
  nl_map_t pods;    /* uid -> pod_refs (objects.c) */
  uv_timer_t timer; /* never started: closed by stop, so that done runs from
                     * its close callback, never from inside nl_objects_stop */
  uint64_t gen;     /* the last GET's generation */
  unsigned n_watches; /* entries with a reflector */
  unsigned pending; /* the timer, reflectors stopping and GETs in flight */
  bool stopping;
  void (*done)(void *ctx);
  void *done_ctx;
};

/* objects_fetch.c: starts fetching a newly referenced object. */
void nl__objects_fetch_start(nl__obj_entry_t *e);
/* Get and Cache: a GET at lookup time when the strategy wants one. */
void nl__objects_fetch_refresh(nl__obj_entry_t *e);
/* Stops the fetching of an entry about to be freed (its completions then
 * find nothing). */
void nl__objects_fetch_stop(nl__obj_entry_t *e);
/* A fetch answered: obj (taken; NULL: not found) replaces the copy, and the
 * changed callback runs when something a pod sees changed. */
void nl__objects_set(nl__obj_entry_t *e, nl_object_t *obj);
#define NL_OBJECTS_CACHE_TTL_MS 60000 /* upstream's defaultTTL (cache_based_manager.go) */

/* Something counted in pending is over: frees the manager when it is
 * stopping and nothing is left. */
void nl__objects_release(nl_objects_t *m);

/* objects_decode.c */
/* The entries' map key: "<c|s>/<namespace>/<name>" (new string). */
char *nl__objects_key(nl_object_kind_t kind, const char *ns, const char *name);
/* "configmap", "secret": for messages. */
const char *nl__object_kind_name(nl_object_kind_t kind);
bool nl__object_equal(const nl_object_t *a, const nl_object_t *b);
/* Calls fn once for each distinct object the pod references. */
void nl__objects_pod_refs(const nl_pod_t *pod,
                          void (*fn)(void *ctx, nl_object_kind_t kind, const char *name),
                          void *ctx);

#endif
