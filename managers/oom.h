/* The OOM watcher (upstream pkg/kubelet/oom with cadvisor's utils/oomparser):
 * kernel OOM kills read from /dev/kmsg on the loop.
 *
 * The parser does no I/O: nl_kmsg_parse() splits one /dev/kmsg record
 * ("<prio>,<seq>,<usec>,<flags>[,...];<message>\n" then " KEY=value" lines),
 * and nl_oom_parser_feed() follows cadvisor's state machine over the messages:
 * an OOM starts at a line with "invoked oom-killer:" and ends at the kernel's
 * summary "oom-kill:constraint=...,oom_memcg=...,task_memcg=...,task=...,
 * pid=...,uid=..." (kernels >= 4.19) or, on older kernels, at "Killed process
 * <pid> (<name>)" after "Task in <memcg> killed as a result of limit of
 * <memcg>". The container is the killed task's memory cgroup; the victim
 * container is the cgroup whose limit was hit ("/" for a system-wide OOM).
 *
 * The watcher opens /dev/kmsg non-blocking, skips the records already there (an
 * OOM from before the agent started is not news), and reads each record as it
 * comes. Every system-wide OOM (victim container "/") becomes upstream's
 * Warning event SystemOOM on the node ("System OOM encountered, victim
 * process: <name>, pid: <pid>"); every OOM kill is logged. When /dev/kmsg
 * cannot be read (a container, no permission) the watcher says so once and the
 * agent goes on without it.
 *
 * Ownership: nl_oom_watcher_t is embedded by its owner, which must keep the
 * event sink's context alive until the stop callback. */
#ifndef NL_MANAGERS_OOM_H
#define NL_MANAGERS_OOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "managers/events.h"

/* One /dev/kmsg record; message points into the caller's buffer (not
 * NUL-terminated: message_len). */
typedef struct nl_kmsg_record {
  int priority; /* syslog facility * 8 + level */
  uint64_t seq;
  uint64_t usec; /* since boot */
  const char *message;
  size_t message_len;
} nl_kmsg_record_t;

/* Parses one record of len bytes. Returns 0, or -1 when it is not a record. */
int nl_kmsg_parse(const char *buf, size_t len, nl_kmsg_record_t *out);

/* One OOM kill, as cadvisor's OomInstance. */
typedef struct nl_oom_instance {
  int pid;                    /* 0 when the kernel did not say */
  char process_name[64];
  char container_name[256];   /* the killed task's memory cgroup */
  char victim_container[256]; /* the cgroup whose limit was hit; "/" system-wide */
  char constraint[32];        /* CONSTRAINT_NONE, CONSTRAINT_MEMCG, ... */
  uint64_t usec;              /* the record's time, since boot */
} nl_oom_instance_t;

typedef struct nl_oom_parser {
  bool in_oom; /* after "invoked oom-killer:" */
  nl_oom_instance_t cur;
} nl_oom_parser_t;

/* Feeds one message. Returns true when it completed an OOM, copied to *out. */
bool nl_oom_parser_feed(nl_oom_parser_t *p, const char *msg, size_t len, uint64_t usec,
                        nl_oom_instance_t *out);

#define NL_KMSG_RECORD_MAX 8192 /* the kernel's CONSOLE_EXT_LOG_MAX */
#define NL_OOM_RECENT 16        /* the OOM kills remembered for nl_oom_watcher_killed_in */

/* Whether a memory cgroup path is the container's own: its last element is the
 * container id, alone (cgroupfs) or as "<prefix>-<id>.scope" (systemd). */
bool nl_oom_cgroup_is_container(const char *cgroup, const char *container_id);

typedef struct nl_oom_watcher nl_oom_watcher_t;
typedef void (*nl_oom_done_cb)(nl_oom_watcher_t *w);

struct nl_oom_watcher {
  uv_loop_t *loop;
  const char *path;       /* borrowed */
  const char *node_name;  /* borrowed */
  nl_event_sink_t events;
  int fd;
  bool polling;
  uv_poll_t poll;
  nl_oom_parser_t parser;
  char buf[NL_KMSG_RECORD_MAX];
  uint64_t ooms;          /* OOM kills seen */
  char recent[NL_OOM_RECENT][96]; /* the last kills' task memory cgroups (last element) */
  nl_oom_done_cb done_cb;
};

/* path: /dev/kmsg (tests give a pipe's). */
void nl_oom_watcher_init(nl_oom_watcher_t *w, uv_loop_t *loop, const char *path,
                         const char *node_name, nl_event_sink_t events);
/* Opens path and watches it; when it cannot, logs why once and returns -1
 * (the watcher is then idle; stop still calls back). */
int nl_oom_watcher_start(nl_oom_watcher_t *w);
/* Closes the handle; done_cb (may be NULL) runs once it has closed, or at once
 * (from inside this call) when the watcher never started. */
void nl_oom_watcher_stop(nl_oom_watcher_t *w, nl_oom_done_cb done_cb);
/* Whether one of the last NL_OOM_RECENT OOM kills hit a task of this
 * container (nl_oom_cgroup_is_container). */
bool nl_oom_watcher_killed_in(const nl_oom_watcher_t *w, const char *container_id);

#endif
