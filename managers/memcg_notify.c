/* Memory cgroup threshold notifications (see memcg_notify.h). */
#include "managers/memcg_notify.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "reactor/log.h"
#include "reactor/xalloc.h"

/* Registers one threshold on efd (thread pool). */
static int register_one(const char *dir, int efd, int64_t usage, nl_err_t **err) {
  char path[4096];
  snprintf(path, sizeof path, "%s/memory.usage_in_bytes", dir);
  int watch = open(path, O_RDONLY | O_CLOEXEC);
  if (watch < 0) return nl_err_set(err, errno, "open %s: %s", path, strerror(errno));
  snprintf(path, sizeof path, "%s/cgroup.event_control", dir);
  int control = open(path, O_WRONLY | O_CLOEXEC);
  int r = -1;
  if (control < 0) {
    nl_err_set(err, errno, "open %s: %s", path, strerror(errno));
  } else {
    char line[96];
    int len = snprintf(line, sizeof line, "%d %d %lld", efd, watch, (long long)usage);
    if (write(control, line, (size_t)len) != len)
      nl_err_set(err, errno, "write %s: %s", path, strerror(errno));
    else
      r = 0;
    close(control);
  }
  close(watch);
  return r;
}

static void arm_work(uv_work_t *w) {
  nl_memcg_notify_t *n = container_of(w, nl_memcg_notify_t, work);
  int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (efd < 0) {
    nl_err_set(&n->job_err, errno, "eventfd: %s", strerror(errno));
    return;
  }
  for (size_t i = 0; i < n->n_job; i++)
    if (register_one(n->dir, efd, n->job[i], &n->job_err) < 0) goto fail;
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = efd};
  if (epoll_ctl(n->epfd, EPOLL_CTL_ADD, efd, &ev) < 0) {
    nl_err_set(&n->job_err, errno, "epoll_ctl: %s", strerror(errno));
    goto fail;
  }
  n->job_efd = efd;
  char path[4096], buf[32] = "";
  snprintf(path, sizeof path, "%s/memory.usage_in_bytes", n->dir);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t r = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0) close(fd);
  n->job_usage = r > 0 ? strtoll(buf, NULL, 10) : -1;
  return;
fail:
  close(efd);
}

static void poll_closed(uv_handle_t *h) {
  nl_memcg_notify_t *n = h->data;
  close(n->epfd);
  n->epfd = -1;
  free(n->dir);
  n->dir = NULL;
  n->state = NL_MEMCG_STOPPED;
  if (n->done) n->done(n->done_ctx);
}

static void finish_stop(nl_memcg_notify_t *n) {
  if (n->efd >= 0) close(n->efd);
  n->efd = -1;
  uv_close((uv_handle_t *)&n->poll, poll_closed);
}

static void arm_done(uv_work_t *w, int status) {
  (void)status;
  nl_memcg_notify_t *n = container_of(w, nl_memcg_notify_t, work);
  assert(n->state == NL_MEMCG_ARMING);
  int efd = n->job_efd;
  n->job_efd = -1;
  if (n->job_err) {
    nl_warn("memory threshold notifications unavailable (%s): memory is polled",
            nl_err_msg(n->job_err));
    nl_err_free(&n->job_err);
    if (efd >= 0) close(efd);
    n->state = NL_MEMCG_FAILED;
    if (n->stopping) finish_stop(n);
    return;
  }
  if (n->efd >= 0) close(n->efd); /* drops the old registrations */
  n->efd = efd;
  memcpy(n->armed, n->job, n->n_job * sizeof *n->job);
  n->n_armed = n->n_job;
  n->state = NL_MEMCG_ARMED;
  bool above = false;
  for (size_t i = 0; i < n->n_armed; i++) above |= n->job_usage >= 0 && n->job_usage >= n->armed[i];
  bool crossed = above && !n->above && !n->stopping;
  n->above = above;
  nl_vlog(3, "memory threshold notifications armed at %zu threshold(s), first %lld bytes", n->n_armed,
          n->n_armed ? (long long)n->armed[0] : 0LL);
  if (n->stopping) {
    finish_stop(n);
    return;
  }
  if (n->has_next) {
    n->has_next = false;
    nl_memcg_notify_set(n, n->next, n->n_next);
  }
  if (crossed) {
    n->crossings++;
    n->crossed(n->ctx); /* last: the owner may stop the notifier */
  }
}

static void arm(nl_memcg_notify_t *n) {
  n->state = NL_MEMCG_ARMING;
  n->job_efd = -1;
  if (uv_queue_work(n->loop, &n->work, arm_work, arm_done) != 0) {
    nl_err_set(&n->job_err, EAGAIN, "cannot queue the registration");
    arm_done(&n->work, -1);
  }
}

/* The epoll set is readable: an eventfd was signalled. */
static void on_poll(uv_poll_t *p, int status, int events) {
  (void)events;
  nl_memcg_notify_t *n = p->data;
  if (status < 0) return;
  struct epoll_event ev[NL_MEMCG_NOTIFY_MAX + 2];
  int got = epoll_wait(n->epfd, ev, (int)(sizeof ev / sizeof *ev), 0);
  bool crossed = false;
  for (int i = 0; i < got; i++) {
    uint64_t count;
    /* eventfds only: the set holds nothing else, and each is open until the
     * loop closes it */
    if (read(ev[i].data.fd, &count, sizeof count) == (ssize_t)sizeof count) crossed = true;
  }
  if (!crossed) return;
  n->crossings++;
  n->crossed(n->ctx);
}

int nl_memcg_notify_init(nl_memcg_notify_t *n, uv_loop_t *loop, const char *dir,
                         nl_memcg_notify_fn crossed, void *ctx, nl_err_t **err) {
  memset(n, 0, sizeof *n);
  n->efd = n->job_efd = -1;
  n->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (n->epfd < 0) return nl_err_set(err, errno, "epoll_create1: %s", strerror(errno));
  int r = uv_poll_init(loop, &n->poll, n->epfd);
  if (r < 0) {
    close(n->epfd);
    return nl_err_set(err, -r, "watch an epoll set: %s", uv_strerror(r));
  }
  n->poll.data = n;
  uv_poll_start(&n->poll, UV_READABLE, on_poll);
  n->loop = loop;
  n->dir = nl_xstrdup(dir);
  n->crossed = crossed;
  n->ctx = ctx;
  n->state = NL_MEMCG_IDLE;
  return 0;
}

void nl_memcg_notify_set(nl_memcg_notify_t *n, const int64_t *usage, size_t count) {
  if (count > NL_MEMCG_NOTIFY_MAX) count = NL_MEMCG_NOTIFY_MAX;
  switch (n->state) {
  case NL_MEMCG_ARMING:
    memcpy(n->next, usage, count * sizeof *usage);
    n->n_next = count;
    n->has_next = true;
    return;
  case NL_MEMCG_ARMED:
    if (count == n->n_armed && !memcmp(usage, n->armed, count * sizeof *usage)) return;
    /* fall through */
  case NL_MEMCG_IDLE:
    if (n->stopping) return;
    memcpy(n->job, usage, count * sizeof *usage);
    n->n_job = count;
    arm(n);
    return;
  case NL_MEMCG_FAILED:
  case NL_MEMCG_STOPPED:
    return;
  }
}

void nl_memcg_notify_stop(nl_memcg_notify_t *n, nl_memcg_notify_fn done, void *ctx) {
  assert(n->state != NL_MEMCG_STOPPED);
  if (n->stopping) return;
  n->stopping = true;
  n->done = done;
  n->done_ctx = ctx;
  if (n->state != NL_MEMCG_ARMING) finish_stop(n); /* else when the registration ends */
}
