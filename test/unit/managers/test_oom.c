/* The OOM watcher: /dev/kmsg records as the kernel writes them, cadvisor's OOM
 * state machine over real kernel OOM reports (a memory cgroup's limit on 6.x,
 * a system-wide OOM, the pre-4.19 format), and the watcher on a pipe: a
 * system-wide OOM becomes the SystemOOM event on the node, a cgroup's does not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "managers/oom.h"

/* A memory cgroup's limit (cgroup v1, containerd's cgroupfs paths), from a
 * 6.1 kernel, with the records' continuation lines. */
static const char *const memcg_oom[] = {
    "4,1204,9560921000,-;sh invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=1000\n",
    "4,1205,9560921010,-;CPU: 1 PID: 4242 Comm: sh Not tainted 6.1.0-18-amd64 #1  Debian 6.1.76-1\n"
    " SUBSYSTEM=cpu\n",
    "6,1206,9560921300,-;memory: usage 16384kB, limit 16384kB, failcnt 31\n",
    "6,1207,9560921400,-;Tasks state (memory values in pages):\n",
    "6,1208,9560921500,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=3b3c,"
    "mems_allowed=0,oom_memcg=/k8s.io/3b3c9f,task_memcg=/k8s.io/3b3c9f,task=sh,pid=4242,uid=0\n",
    "3,1209,9560921600,-;Memory cgroup out of memory: Killed process 4242 (sh) total-vm:4436kB, "
    "anon-rss:15964kB, file-rss:4kB, shmem-rss:0kB, UID:0 pgtables:48kB oom_score_adj:1000\n",
};

static const char *const system_oom[] = {
    "4,77,812000,-;stress invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0\n",
    "6,78,812100,-;Mem-Info:\n",
    ("6,79,812200,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,3,"
     "global_oom,task_memcg=/user.slice/user-0.slice/session-1.scope,task=stress,pid=912,uid=0\n"),
    "3,80,812300,-;Out of memory: Killed process 912 (stress) total-vm:1052836kB\n",
};

/* 4.14: the summary line did not exist. */
static const char *const legacy_oom[] = {
    "4,10,500,-;python invoked oom-killer: gfp_mask=0x14000c0(GFP_KERNEL), nodemask=(null), order=0, oom_score_adj=999\n",
    "6,11,510,-;Task in /kubepods/burstable/pod1/abc killed as a result of limit of /kubepods/burstable/pod1\n",
    "3,12,520,-;Memory cgroup out of memory: Kill process 77 (python) score 1999 or sacrifice child\n",
    "3,13,530,-;Killed process 77 (python) total-vm:1000kB, anon-rss:900kB, file-rss:0kB\n",
};

static void records(void **state) {
  (void)state;
  nl_kmsg_record_t r;
  const char *rec = memcg_oom[1];
  assert_int_equal(nl_kmsg_parse(rec, strlen(rec), &r), 0);
  assert_int_equal(r.priority, 4);
  assert_int_equal(r.seq, 1205);
  assert_int_equal(r.usec, 9560921010);
  assert_int_equal(r.message_len, strlen("CPU: 1 PID: 4242 Comm: sh Not tainted 6.1.0-18-amd64 #1  Debian 6.1.76-1"));
  assert_memory_equal(r.message, "CPU: 1 PID", 10);
  /* a later kernel's extra fields after the flags */
  const char *more = "6,3,100,-,caller=T1;hello";
  assert_int_equal(nl_kmsg_parse(more, strlen(more), &r), 0);
  assert_int_equal(r.message_len, 5);
  const char *bad[] = {"", "hello", "6,3;x", "a,1,2,-;x", "6,,2,-;x", "6,1,99999999999999999999999,-;x",
                       "6;1,2,-;x", "99999999,1,2,-;x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(nl_kmsg_parse(bad[i], strlen(bad[i]), &r), -1);
}

/* Feeds records; returns how many OOMs completed, the last in *out. */
static int feed(nl_oom_parser_t *p, const char *const *recs, size_t n, nl_oom_instance_t *out) {
  int ooms = 0;
  for (size_t i = 0; i < n; i++) {
    nl_kmsg_record_t r;
    assert_int_equal(nl_kmsg_parse(recs[i], strlen(recs[i]), &r), 0);
    ooms += nl_oom_parser_feed(p, r.message, r.message_len, r.usec, out);
  }
  return ooms;
}

static void memcg_limit(void **state) {
  (void)state;
  nl_oom_parser_t p = {0};
  nl_oom_instance_t o;
  assert_int_equal(feed(&p, memcg_oom, 6, &o), 1);
  assert_int_equal(o.pid, 4242);
  assert_string_equal(o.process_name, "sh");
  assert_string_equal(o.container_name, "/k8s.io/3b3c9f");
  assert_string_equal(o.victim_container, "/k8s.io/3b3c9f");
  assert_string_equal(o.constraint, "CONSTRAINT_MEMCG");
  assert_int_equal(o.usec, 9560921500);
  assert_false(p.in_oom); /* the "Killed process" line after it starts nothing */
}

static void system_wide(void **state) {
  (void)state;
  nl_oom_parser_t p = {0};
  nl_oom_instance_t o;
  /* no oom_memcg= on a global OOM: the summary does not match (as cadvisor's
   * expression); the "Killed process" line ends it, victim "/" */
  assert_int_equal(feed(&p, system_oom, 4, &o), 1);
  assert_int_equal(o.pid, 912);
  assert_string_equal(o.process_name, "stress");
  assert_string_equal(o.victim_container, "/");
  assert_string_equal(o.container_name, "/");
}

static void legacy_kernel(void **state) {
  (void)state;
  nl_oom_parser_t p = {0};
  nl_oom_instance_t o;
  assert_int_equal(feed(&p, legacy_oom, 4, &o), 1);
  assert_int_equal(o.pid, 77);
  assert_string_equal(o.process_name, "python");
  assert_string_equal(o.container_name, "/kubepods/burstable/pod1/abc");
  assert_string_equal(o.victim_container, "/kubepods/burstable/pod1");
}

static void commas_in_fields(void **state) {
  (void)state;
  nl_oom_parser_t p = {0};
  nl_oom_instance_t o;
  const char *start = "invoked oom-killer: x";
  const char *line = "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,3,"
                     "oom_memcg=/,task_memcg=/a,b,task=my,task,pid=5,uid=0";
  assert_false(nl_oom_parser_feed(&p, start, strlen(start), 1, &o));
  assert_true(nl_oom_parser_feed(&p, line, strlen(line), 2, &o));
  assert_string_equal(o.victim_container, "/");
  assert_string_equal(o.container_name, "/a,b");
  assert_string_equal(o.process_name, "my,task");
  assert_int_equal(o.pid, 5);
  /* a bad pid does not end the OOM */
  const char *badpid = "oom-kill:constraint=C,nodemask=n,cpuset=c,mems_allowed=0,oom_memcg=/,"
                       "task_memcg=/,task=t,pid=x,uid=0";
  assert_false(nl_oom_parser_feed(&p, start, strlen(start), 1, &o));
  assert_false(nl_oom_parser_feed(&p, badpid, strlen(badpid), 2, &o));
  assert_true(p.in_oom);
}

/* ---- the watcher on a pipe ---- */

typedef struct seen {
  int events;
  char reason[32], message[160], object[64];
} seen_t;

static void on_event(void *ctx, const nl_event_ref_t *obj, const nl_kvlist_t *annotations,
                     const char *type, const char *reason, const char *message) {
  (void)annotations;
  seen_t *s = ctx;
  s->events++;
  snprintf(s->reason, sizeof s->reason, "%s", reason);
  snprintf(s->message, sizeof s->message, "%s %s", type, message);
  snprintf(s->object, sizeof s->object, "%s/%s", obj->kind, obj->name);
}

static int stopped;
static void on_stopped(nl_oom_watcher_t *w) {
  (void)w;
  stopped++;
}

/* One record per read, as /dev/kmsg gives them: a pipe carries bytes, so each
 * is read before the next is written. */
static void deliver(uv_loop_t *loop, int fd, const char *const *recs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(write(fd, recs[i], strlen(recs[i])), (ssize_t)strlen(recs[i]));
    uv_run(loop, UV_RUN_NOWAIT);
  }
}

static void watcher_records_system_oom(void **state) {
  (void)state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fds[0]);
  seen_t s = {0};
  nl_event_sink_t sink = {on_event, &s};
  nl_oom_watcher_t w;
  nl_oom_watcher_init(&w, &loop, path, "n1", sink);
  assert_int_equal(nl_oom_watcher_start(&w), 0);
  deliver(&loop, fds[1], memcg_oom, 6);
  deliver(&loop, fds[1], system_oom, 4);
  close(fds[1]);
  uv_run(&loop, UV_RUN_NOWAIT);
  assert_int_equal(w.ooms, 2);
  assert_int_equal(s.events, 1); /* the cgroup's limit is not a system OOM */
  assert_string_equal(s.reason, "SystemOOM");
  assert_string_equal(s.message, "Warning System OOM encountered, victim process: stress, pid: 912");
  assert_string_equal(s.object, "Node/n1");
  /* the memcg kill's task cgroup names its container; the system OOM's none */
  assert_true(nl_oom_watcher_killed_in(&w, "3b3c9f"));
  assert_false(nl_oom_watcher_killed_in(&w, "3b3c"));
  assert_false(nl_oom_watcher_killed_in(&w, "session-1"));
  nl_oom_watcher_stop(&w, on_stopped);
  assert_int_equal(stopped, 0); /* not from inside stop */
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(stopped, 1);
  assert_int_equal(w.fd, -1);
  close(fds[0]);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* The container ids a memory cgroup path can end in. */
static void cgroup_names_container(void **state) {
  (void)state;
  const char *id = "9e04978ea725a02e5a330a74e749bf36de9ae3c84ba28a1c833a604945d3ed2a";
  char path[256];
  snprintf(path, sizeof path, "/kubepods/burstable/pod1/%s", id); /* cgroupfs */
  assert_true(nl_oom_cgroup_is_container(path, id));
  snprintf(path, sizeof path, "/kubepods.slice/kubepods-pod1.slice/cri-containerd-%s.scope", id);
  assert_true(nl_oom_cgroup_is_container(path, id)); /* systemd */
  assert_true(nl_oom_cgroup_is_container(id, id));
  assert_false(nl_oom_cgroup_is_container("/kubepods/burstable/pod1", id)); /* the pod's */
  snprintf(path, sizeof path, "/kubepods/burstable/pod1/x%s", id);
  assert_false(nl_oom_cgroup_is_container(path, id));
  snprintf(path, sizeof path, "/kubepods/burstable/pod1/%s/child", id);
  assert_false(nl_oom_cgroup_is_container(path, id));
  assert_false(nl_oom_cgroup_is_container("/a/b", ""));
}

static void watcher_without_kmsg(void **state) {
  (void)state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  nl_oom_watcher_t w;
  nl_oom_watcher_init(&w, &loop, "/nonexistent/kmsg", "n1", (nl_event_sink_t){0});
  assert_int_equal(nl_oom_watcher_start(&w), -1);
  nl_oom_watcher_stop(&w, NULL);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(records),
      cmocka_unit_test(memcg_limit),
      cmocka_unit_test(system_wide),
      cmocka_unit_test(legacy_kernel),
      cmocka_unit_test(commas_in_fields),
      cmocka_unit_test(watcher_records_system_oom),
      cmocka_unit_test(cgroup_names_container),
      cmocka_unit_test(watcher_without_kmsg),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
