/* Internal to the fake CRI server: the shared struct and the helpers of its
 * three parts (fake_cri_server.c: sockets and HTTP/2; fake_cri_fault.c: fault
 * rules and the control syntax; fake_cri_store.c: the in-memory runtime). */
#ifndef NL_TEST_FAKE_CRI_INT_H
#define NL_TEST_FAKE_CRI_INT_H

#include "reactor/list.h"
#include "reactor/map.h"
#include "test/fakes/fake_cri.h"

typedef struct fake_cri_rule {
  fake_cri_fault_t fault; /* fault.message points to msg */
  char *msg;              /* owned */
} fake_cri_rule_t;

typedef struct fake_cri_store {
  nl_map_t sandboxes;  /* id -> struct sandbox */
  nl_map_t containers; /* id -> struct container */
  nl_map_t images;     /* ref -> struct image */
  uint64_t next_id;
  char *stream_base;   /* "http://127.0.0.1:PORT" for streaming URLs, or NULL */
  char *pull_auth;     /* "username:password" PullImage needs, or NULL */
  char *pull_users;    /* the usernames of the PullImage calls, ","-joined */
  int cgroup_driver;   /* RuntimeConfig's: 1 systemd, 2 cgroupfs; 0 not implemented */
  /* Told of each container event (GetContainerEvents): msg is a packed
   * ContainerEventResponse, borrowed for the call. NULL: nobody listens. */
  void (*on_event)(void *ctx, const uint8_t *msg, size_t len);
  void *event_ctx;
} fake_cri_store_t;

struct fake_cri {
  uv_loop_t *loop;
  char *path;
  uv_pipe_t listener;
  nl_list_t conns;
  nl_list_t event_streams; /* open GetContainerEvents streams (sstream_t.elink) */
  uv_timer_t event_timer;  /* writes their events out of nghttp2's callbacks */
  int open_handles; /* listener + connections (+ stream timers) */
  bool stopping;
  fake_cri_stop_cb done;
  void *done_ctx;

  fake_cri_rule_t *global; /* NULL: none */
  nl_map_t rules;          /* method -> fake_cri_rule_t */
  fake_cri_stats_t stats;
  fake_cri_store_t store;
};

/* If a fault applies to a call of method, consumes one use of it and returns
 * true with *out a copy whose message the caller frees (nl_xstrdup'd). */
bool fake_cri__fault_take(fake_cri_t *f, const char *method, fake_cri_fault_t *out);
void fake_cri__faults_free(fake_cri_t *f);

void fake_cri__store_init(fake_cri_store_t *s);
void fake_cri__store_free(fake_cri_store_t *s);
/* Serves one call. Returns a gRPC code; on 0 *resp (allocated, the packed
 * response message) and *resp_len are set, otherwise *msg (allocated). */
int fake_cri__handle(fake_cri_store_t *s, const char *method, const uint8_t *req, size_t len,
                     uint8_t **resp, size_t *resp_len, char **msg);
void fake_cri__store_add_image(fake_cri_store_t *s, const char *ref);
int fake_cri__store_add_container(fake_cri_store_t *s, const char *pod, const char *name,
                                  const char *image, bool kube, char *id, size_t id_len);
int fake_cri__store_oom_kill(fake_cri_store_t *s, const char *id, uint64_t reason_after_ms);

#endif
