/* Memory cgroup threshold notifications (cgroup v1), as upstream's
 * memory_threshold_notifier.go and threshold_notifier_linux.go: for each
 * threshold on memory.usage_in_bytes an eventfd is registered through
 * cgroup.event_control; the kernel signals it when the usage crosses the
 * threshold in either direction, and the owner's callback runs on the loop.
 *
 * The eventfds sit in an epoll set of the notifier's own, which one uv_poll_t
 * watches for the notifier's life: arming again (new thresholds) makes a new
 * eventfd, registers it and adds it to the set on the thread pool, then closes
 * the old one on the loop (the kernel drops a registration when its eventfd
 * closes). A crossing between the owner's last reading and a registration
 * would go unseen (the kernel signals transitions only): the usage is read
 * once registered, and being over a threshold that the previous registration
 * was not over counts as a crossing. cgroup v2 has no such notifications: arming fails, the state says
 * so, and the owner goes on polling. */
#ifndef NL_MEMCG_NOTIFY_H
#define NL_MEMCG_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "reactor/error.h"

#define NL_MEMCG_NOTIFY_MAX 4 /* thresholds armed at once */

typedef void (*nl_memcg_notify_fn)(void *ctx);

typedef enum {
  NL_MEMCG_IDLE,    /* nothing armed yet */
  NL_MEMCG_ARMING,  /* a registration on the thread pool */
  NL_MEMCG_ARMED,
  NL_MEMCG_FAILED,  /* cannot be set up here: the owner polls */
  NL_MEMCG_STOPPED,
} nl_memcg_state_t;

typedef struct nl_memcg_notify {
  uv_loop_t *loop;
  char *dir; /* the memory cgroup (owned) */
  nl_memcg_notify_fn crossed;
  void *ctx;
  nl_memcg_state_t state;
  bool stopping;
  int epfd; /* the set uv_poll watches */
  int efd;  /* the armed eventfd, or -1 */
  uv_poll_t poll;
  uv_work_t work;
  /* the registration on the thread pool: in, then out */
  int64_t job[NL_MEMCG_NOTIFY_MAX];
  size_t n_job;
  int job_efd;
  int64_t job_usage; /* memory.usage_in_bytes once registered; -1 unknown */
  nl_err_t *job_err;
  /* asked for while a registration ran; armed: what is registered */
  int64_t next[NL_MEMCG_NOTIFY_MAX], armed[NL_MEMCG_NOTIFY_MAX];
  size_t n_next, n_armed;
  bool has_next;
  bool above; /* the usage was over a threshold at the last registration */
  uint64_t crossings; /* for tests and the bench */
  nl_memcg_notify_fn done;
  void *done_ctx;
} nl_memcg_notify_t;

/* dir: the memory cgroup (/sys/fs/cgroup/memory). crossed runs on the loop
 * after each crossing. Returns 0, or -1 with *err when the loop cannot watch
 * an epoll set (nothing to stop then). */
int nl_memcg_notify_init(nl_memcg_notify_t *n, uv_loop_t *loop, const char *dir,
                         nl_memcg_notify_fn crossed, void *ctx, nl_err_t **err);
/* Arms the thresholds (bytes of memory.usage_in_bytes, at most
 * NL_MEMCG_NOTIFY_MAX; more are ignored) in place of the armed ones; nothing
 * when they are the armed ones or the notifier failed. */
void nl_memcg_notify_set(nl_memcg_notify_t *n, const int64_t *usage, size_t count);
/* Waits for a registration in flight, closes the eventfds and the handle,
 * then calls done (never from inside this call). */
void nl_memcg_notify_stop(nl_memcg_notify_t *n, nl_memcg_notify_fn done, void *ctx);

#endif
