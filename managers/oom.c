#include "managers/oom.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reactor/log.h"
#include "reactor/xalloc.h"

/* ---- records ---- */

/* A decimal field of the prefix ending at one of stops; advances *p. */
static int number(const char **p, const char *end, const char *stops, uint64_t *out) {
  const char *s = *p;
  uint64_t v = 0;
  if (s == end || *s < '0' || *s > '9') return -1;
  while (s < end && *s >= '0' && *s <= '9') {
    if (v > (UINT64_MAX - 9) / 10) return -1;
    v = v * 10 + (uint64_t)(*s++ - '0');
  }
  if (s == end || !strchr(stops, *s)) return -1;
  *p = s;
  *out = v;
  return 0;
}

int nl_kmsg_parse(const char *buf, size_t len, nl_kmsg_record_t *out) {
  const char *p = buf, *end = buf + len;
  const char *semi = memchr(buf, ';', len);
  if (!semi) return -1;
  uint64_t prio, seq, usec;
  if (number(&p, semi, ",", &prio) < 0 || prio > 0xffff) return -1;
  p++;
  if (number(&p, semi, ",", &seq) < 0) return -1;
  p++;
  /* the timestamp ends the fields we read; flags and later fields are skipped */
  if (number(&p, semi, ",;", &usec) < 0) return -1;
  const char *msg = semi + 1;
  const char *nl = memchr(msg, '\n', (size_t)(end - msg));
  *out = (nl_kmsg_record_t){(int)prio, seq, usec, msg, (size_t)((nl ? nl : end) - msg)};
  return 0;
}

/* ---- cadvisor's OOM state machine ---- */

static const char *find(const char *s, size_t len, const char *needle) {
  return memmem(s, len, needle, strlen(needle));
}

/* The last occurrence of needle in [s, end). */
static const char *find_last(const char *s, const char *end, const char *needle) {
  size_t n = strlen(needle);
  for (const char *q = end - n; q >= s && end - s >= (ptrdiff_t)n; q--)
    if (memcmp(q, needle, n) == 0) return q;
  return NULL;
}

static void copy(char *dst, size_t cap, const char *s, const char *e) {
  size_t n = (size_t)(e - s);
  if (n >= cap) n = cap - 1;
  memcpy(dst, s, n);
  dst[n] = 0;
}

/* path.Join("/", p): one leading slash, no trailing one. */
static void cgroup_name(char *dst, size_t cap, const char *s, const char *e) {
  while (s < e && *s == '/') s++;
  while (e > s && e[-1] == '/') e--;
  dst[0] = '/';
  copy(dst + 1, cap - 1, s, e);
}

static int parse_pid(const char *s, const char *e) {
  long v = 0;
  if (s == e) return -1;
  for (; s < e; s++) {
    if (*s < '0' || *s > '9' || v > 100000000) return -1;
    v = v * 10 + (*s - '0');
  }
  return (int)v;
}

/* "oom-kill:constraint=C,nodemask=N,cpuset=S,mems_allowed=M,oom_memcg=V,
 * task_memcg=T,task=NAME,pid=P,uid=U". cadvisor's greedy regular expression
 * splits at the last of each separator; so does this. */
static bool summary_line(const char *msg, size_t len, nl_oom_instance_t *o) {
  const char *s = find(msg, len, "oom-kill:constraint=");
  if (!s) return false;
  const char *end = msg + len;
  s += strlen("oom-kill:constraint=");
  const char *uid = find_last(s, end, ",uid=");
  const char *pid = uid ? find_last(s, uid, ",pid=") : NULL;
  const char *task = pid ? find_last(s, pid, ",task=") : NULL;
  const char *tmemcg = task ? find_last(s, task, ",task_memcg=") : NULL;
  const char *omemcg = tmemcg ? find_last(s, tmemcg, ",oom_memcg=") : NULL;
  const char *mems = omemcg ? find_last(s, omemcg, ",mems_allowed=") : NULL;
  const char *cpuset = mems ? find_last(s, mems, ",cpuset=") : NULL;
  const char *nodemask = cpuset ? find_last(s, cpuset, ",nodemask=") : NULL;
  if (!nodemask) return false;
  int p = parse_pid(pid + strlen(",pid="), uid);
  if (p < 0) return false; /* cadvisor: strconv.Atoi failed, not finished */
  copy(o->constraint, sizeof o->constraint, s, nodemask);
  copy(o->victim_container, sizeof o->victim_container, omemcg + strlen(",oom_memcg="), tmemcg);
  copy(o->container_name, sizeof o->container_name, tmemcg + strlen(",task_memcg="), task);
  copy(o->process_name, sizeof o->process_name, task + strlen(",task="), pid);
  o->pid = p;
  return true;
}

/* "Task in A killed as a result of limit of B" (kernels < 4.19): names only. */
static void legacy_line(const char *msg, size_t len, nl_oom_instance_t *o) {
  static const char pre[] = "Task in ", mid[] = " killed as a result of limit of ";
  const char *s = find(msg, len, pre);
  if (!s) return;
  s += sizeof pre - 1;
  const char *end = msg + len;
  const char *m = find_last(s, end, mid);
  if (!m) return;
  cgroup_name(o->container_name, sizeof o->container_name, s, m);
  cgroup_name(o->victim_container, sizeof o->victim_container, m + sizeof mid - 1, end);
}

/* "Killed process P (NAME)". */
static bool killed_line(const char *msg, size_t len, nl_oom_instance_t *o) {
  static const char pre[] = "Killed process ";
  const char *s = find(msg, len, pre);
  if (!s) return false;
  const char *end = msg + len, *d = s + sizeof pre - 1, *q = d;
  while (q < end && *q >= '0' && *q <= '9') q++;
  if (q == d || q + 2 > end || q[0] != ' ' || q[1] != '(') return false;
  const char *close = find_last(q + 2, end, ")");
  if (!close || close == q + 2) return false;
  int p = parse_pid(d, q);
  if (p < 0) return false;
  o->pid = p;
  copy(o->process_name, sizeof o->process_name, q + 2, close);
  return true;
}

bool nl_oom_parser_feed(nl_oom_parser_t *p, const char *msg, size_t len, uint64_t usec,
                        nl_oom_instance_t *out) {
  if (!p->in_oom) {
    if (!find(msg, len, "invoked oom-killer:")) return false;
    p->in_oom = true;
    memset(&p->cur, 0, sizeof p->cur);
    strcpy(p->cur.container_name, "/");
    strcpy(p->cur.victim_container, "/");
    p->cur.usec = usec;
    return false;
  }
  bool done = summary_line(msg, len, &p->cur);
  if (!done) {
    legacy_line(msg, len, &p->cur);
    done = killed_line(msg, len, &p->cur);
  }
  if (!done) return false;
  p->cur.usec = usec;
  p->in_oom = false;
  *out = p->cur;
  return true;
}

/* ---- the watcher ---- */

void nl_oom_watcher_init(nl_oom_watcher_t *w, uv_loop_t *loop, const char *path,
                         const char *node_name, nl_event_sink_t events) {
  memset(w, 0, sizeof *w);
  w->loop = loop;
  w->path = path;
  w->node_name = node_name;
  w->events = events;
  w->fd = -1;
}

static const char *last_element(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

bool nl_oom_cgroup_is_container(const char *cgroup, const char *container_id) {
  const char *leaf = last_element(cgroup);
  size_t n = strlen(leaf), idn = strlen(container_id);
  if (idn == 0) return false;
  if (n > 6 && strcmp(leaf + n - 6, ".scope") == 0) n -= 6;
  if (n < idn || strncmp(leaf + n - idn, container_id, idn) != 0) return false;
  return n == idn || leaf[n - idn - 1] == '-';
}

bool nl_oom_watcher_killed_in(const nl_oom_watcher_t *w, const char *container_id) {
  for (size_t i = 0; i < NL_OOM_RECENT && i < w->ooms; i++)
    if (nl_oom_cgroup_is_container(w->recent[i], container_id)) return true;
  return false;
}

static void on_oom(nl_oom_watcher_t *w, const nl_oom_instance_t *o) {
  /* A longer element is no container's: kept cut, it matches none. */
  char *slot = w->recent[w->ooms % NL_OOM_RECENT];
  size_t n = strnlen(last_element(o->container_name), sizeof w->recent[0] - 1);
  memcpy(slot, last_element(o->container_name), n);
  slot[n] = '\0';
  w->ooms++;
  nl_info("OOM kill: process %s (pid %d) in %s, limit of %s (%s)", o->process_name, o->pid,
          o->container_name, o->victim_container, o->constraint[0] ? o->constraint : "?");
  if (strcmp(o->victim_container, "/") == 0) {
    nl_event_ref_t ref = nl_event_node_ref(w->node_name);
    if (o->process_name[0] && o->pid)
      nl_event_record(&w->events, &ref, NL_EVENT_WARNING, "SystemOOM",
                      "System OOM encountered, victim process: %s, pid: %d", o->process_name,
                      o->pid);
    else
      nl_event_record(&w->events, &ref, NL_EVENT_WARNING, "SystemOOM", "System OOM encountered");
  }
}

static void on_readable(uv_poll_t *h, int status, int events) {
  nl_oom_watcher_t *w = container_of(h, nl_oom_watcher_t, poll);
  (void)events;
  if (status < 0) return;
  /* One record per read; a bounded batch per wake-up keeps the loop fair. */
  for (int i = 0; i < 64; i++) {
    ssize_t n = read(w->fd, w->buf, sizeof w->buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EPIPE) continue; /* records were overwritten: go on */
    if (n <= 0) {
      if (n == 0 && w->polling) { /* a file or pipe has ended: nothing more comes */
        uv_poll_stop(&w->poll);
      }
      return;
    }
    nl_kmsg_record_t rec;
    nl_oom_instance_t oom;
    if (nl_kmsg_parse(w->buf, (size_t)n, &rec) < 0) {
      nl_vlog(4, "kmsg: a record without a prefix (%zd bytes)", n);
      continue;
    }
    if (nl_oom_parser_feed(&w->parser, rec.message, rec.message_len, rec.usec, &oom)) on_oom(w, &oom);
  }
}

int nl_oom_watcher_start(nl_oom_watcher_t *w) {
  int fd = open(w->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    nl_warn("OOM watcher: cannot read %s: %s; kernel OOM kills are not reported", w->path,
            strerror(errno));
    return -1;
  }
  /* /dev/kmsg: from the next record on. A pipe cannot seek, and has no past. */
  if (lseek(fd, 0, SEEK_END) < 0 && errno != ESPIPE)
    nl_vlog(2, "OOM watcher: %s: seek: %s", w->path, strerror(errno));
  int r = uv_poll_init(w->loop, &w->poll, fd);
  if (r < 0) {
    nl_warn("OOM watcher: cannot watch %s: %s; kernel OOM kills are not reported", w->path,
            uv_strerror(r));
    close(fd);
    return -1;
  }
  w->fd = fd;
  w->polling = true;
  uv_poll_start(&w->poll, UV_READABLE, on_readable);
  nl_vlog(2, "OOM watcher: reading %s", w->path);
  return 0;
}

static void on_closed(uv_handle_t *h) {
  nl_oom_watcher_t *w = container_of((uv_poll_t *)h, nl_oom_watcher_t, poll);
  close(w->fd);
  w->fd = -1;
  if (w->done_cb) w->done_cb(w);
}

void nl_oom_watcher_stop(nl_oom_watcher_t *w, nl_oom_done_cb done_cb) {
  w->done_cb = done_cb;
  if (!w->polling) {
    if (done_cb) done_cb(w);
    return;
  }
  w->polling = false;
  uv_close((uv_handle_t *)&w->poll, on_closed);
}
