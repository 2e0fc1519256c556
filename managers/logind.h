/* systemd-logind's delay inhibitor, as upstream's node shutdown manager takes
 * it (pkg/kubelet/nodeshutdown/systemd), over the system bus's unix socket on
 * the loop: SASL EXTERNAL with fd passing, Hello, a match on logind's
 * PrepareForShutdown signal, InhibitDelayMaxUSec read (a warning when shorter
 * than the grace period: upstream rewrites logind.conf, nanolet does not), then
 * Inhibit("shutdown", "kubelet", "Kubelet needs time for critical node
 * operations.", "delay"), whose file descriptor is the lock.
 *
 * PrepareForShutdown(true) calls back; the owner releases the lock with
 * nl_logind_release() when the pods have stopped, and logind goes on with the
 * shutdown. PrepareForShutdown(false) (cancelled) calls back too and the lock
 * is taken again. A failure at any step (no bus, no logind, an error reply, a
 * malformed message) is logged once and the client goes idle: the shutdown
 * hook still works.
 *
 * Ownership: embedded by its owner; path is borrowed. */
#ifndef NL_MANAGERS_LOGIND_H
#define NL_MANAGERS_LOGIND_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "reactor/buf.h"

#define NL_LOGIND_BUS "/run/dbus/system_bus_socket"

typedef void (*nl_logind_cb)(void *ctx, bool shutting_down);

typedef enum nl_logind_state {
  NL_LOGIND_IDLE,     /* not started, or failed */
  NL_LOGIND_AUTH,     /* SASL */
  NL_LOGIND_HELLO,
  NL_LOGIND_MATCH,    /* AddMatch for PrepareForShutdown */
  NL_LOGIND_DELAY,    /* reading InhibitDelayMaxUSec */
  NL_LOGIND_INHIBIT,  /* taking the lock */
  NL_LOGIND_WATCHING, /* waiting for PrepareForShutdown */
} nl_logind_state_t;

typedef struct nl_logind nl_logind_t;
typedef void (*nl_logind_done_cb)(nl_logind_t *l);

struct nl_logind {
  uv_loop_t *loop;
  const char *path;
  int64_t period_s; /* the grace period InhibitDelayMaxUSec should cover */
  nl_logind_cb cb;
  void *ctx;
  nl_logind_state_t state;
  int fd;
  bool polling;     /* the handle is open */
  bool closing;     /* ... and being closed */
  uv_poll_t poll;
  nl_buf_t in, out;
  int fds[4];       /* descriptors received with the bytes in `in` */
  int n_fds;
  uint32_t serial;  /* of the last call sent */
  int lock_fd;      /* the inhibitor; -1 when none */
  uint64_t delay_max_usec;
  nl_logind_done_cb done_cb;
};

void nl_logind_init(nl_logind_t *l, uv_loop_t *loop, const char *path, int64_t period_s,
                    nl_logind_cb cb, void *ctx);
/* Connects and starts the exchange. Returns -1 (logged at -v=1: no system bus
 * is the usual edge case) when nothing listens on path. */
int nl_logind_start(nl_logind_t *l);
/* Releases the inhibitor lock (logind then proceeds). */
void nl_logind_release(nl_logind_t *l);
/* Closes everything; done_cb runs once the handle has closed, or at once
 * (from inside this call) when none is open. */
void nl_logind_stop(nl_logind_t *l, nl_logind_done_cb done_cb);

#endif
