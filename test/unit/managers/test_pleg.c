/* PLEG's pure parts: grouping CRI lists into pods, upstream's event table,
 * relist diffs, and the CRI -> nl_rt_pod_status_t conversion. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cri/pbarena.h"
#include "managers/pleg_internal.h"
#include "reactor/xalloc.h"

/* ---- builders for CRI messages (static storage is fine in tests) ---- */

typedef Runtime__V1__PodSandbox__LabelsEntry sb_label_t;
typedef Runtime__V1__Container__LabelsEntry c_label_t;

#define MAXL 4
typedef struct {
  Runtime__V1__PodSandbox sb;
  Runtime__V1__PodSandbox__LabelsEntry l[MAXL];
  Runtime__V1__PodSandbox__LabelsEntry *lp[MAXL];
} fake_sb_t;

typedef struct {
  Runtime__V1__Container c;
  Runtime__V1__Container__LabelsEntry l[MAXL];
  Runtime__V1__Container__LabelsEntry *lp[MAXL];
} fake_c_t;

static void mk_sb(fake_sb_t *f, const char *id, const char *uid, const char *name, int ready,
                  int64_t created) {
  Runtime__V1__PodSandbox init = RUNTIME__V1__POD_SANDBOX__INIT;
  f->sb = init;
  f->sb.id = (char *)id;
  f->sb.state = ready ? RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY
                      : RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_NOTREADY;
  f->sb.created_at = created;
  size_t n = 0;
  const char *kv[][2] = {{NL_LABEL_POD_UID, uid}, {NL_LABEL_POD_NAME, name},
                         {NL_LABEL_POD_NAMESPACE, "default"}};
  for (size_t i = 0; i < 3; i++) {
    if (!kv[i][1]) continue;
    Runtime__V1__PodSandbox__LabelsEntry e = RUNTIME__V1__POD_SANDBOX__LABELS_ENTRY__INIT;
    e.key = (char *)kv[i][0];
    e.value = (char *)kv[i][1];
    f->l[n] = e;
    f->lp[n] = &f->l[n];
    n++;
  }
  f->sb.labels = f->lp;
  f->sb.n_labels = n;
}

static void mk_c(fake_c_t *f, const char *id, const char *sb, const char *uid, const char *cname,
                 Runtime__V1__ContainerState st, int64_t created) {
  Runtime__V1__Container init = RUNTIME__V1__CONTAINER__INIT;
  f->c = init;
  f->c.id = (char *)id;
  f->c.pod_sandbox_id = (char *)sb;
  f->c.state = st;
  f->c.created_at = created;
  size_t n = 0;
  const char *kv[][2] = {{NL_LABEL_POD_UID, uid}, {NL_LABEL_CONTAINER_NAME, cname},
                         {NL_LABEL_POD_NAME, "web"}};
  for (size_t i = 0; i < 3; i++) {
    if (!kv[i][1]) continue;
    Runtime__V1__Container__LabelsEntry e = RUNTIME__V1__CONTAINER__LABELS_ENTRY__INIT;
    e.key = (char *)kv[i][0];
    e.value = (char *)kv[i][1];
    f->l[n] = e;
    f->lp[n] = &f->l[n];
    n++;
  }
  f->c.labels = f->lp;
  f->c.n_labels = n;
}

/* One sandbox list and one container list as PLEG reads them: packed whole,
 * decoded brief. Free with lists_free. */
typedef struct lists {
  Runtime__V1__Brief__ListPodSandboxResponse *sb;
  Runtime__V1__Brief__ListContainersResponse *c;
  nl_pb_arena_t *as, *ac;
} lists_t;

static lists_t lists_of(fake_sb_t *sbs, size_t nsb, fake_c_t *cs, size_t nc) {
  Runtime__V1__PodSandbox *sp[8];
  Runtime__V1__Container *cp[8];
  for (size_t i = 0; i < nsb; i++) sp[i] = &sbs[i].sb;
  for (size_t i = 0; i < nc; i++) cp[i] = &cs[i].c;
  Runtime__V1__ListPodSandboxResponse sr = RUNTIME__V1__LIST_POD_SANDBOX_RESPONSE__INIT;
  sr.items = sp;
  sr.n_items = nsb;
  Runtime__V1__ListContainersResponse cr = RUNTIME__V1__LIST_CONTAINERS_RESPONSE__INIT;
  cr.containers = cp;
  cr.n_containers = nc;
  lists_t l = {0};
  uint8_t *buf = malloc(protobuf_c_message_get_packed_size(&sr.base) + 1);
  size_t len = protobuf_c_message_pack(&sr.base, buf);
  l.sb = (void *)nl_pb_arena_unpack(&runtime__v1__brief__list_pod_sandbox_response__descriptor,
                                     NULL, buf, len, &l.as);
  free(buf);
  buf = malloc(protobuf_c_message_get_packed_size(&cr.base) + 1);
  len = protobuf_c_message_pack(&cr.base, buf);
  l.c = (void *)nl_pb_arena_unpack(&runtime__v1__brief__list_containers_response__descriptor, NULL,
                                    buf, len, &l.ac);
  free(buf);
  assert_non_null(l.sb);
  assert_non_null(l.c);
  return l;
}

static void lists_free(lists_t *l) {
  nl_pb_arena_free(l->as);
  nl_pb_arena_free(l->ac);
}

/* A snapshot from one sandbox list and one container list. */
static void snap_of(nl_map_t *snap, fake_sb_t *sbs, size_t nsb, fake_c_t *cs, size_t nc) {
  lists_t l = lists_of(sbs, nsb, cs, nc);
  nl_map_init(snap);
  nl_pleg__add_sandboxes(snap, l.sb);
  nl_pleg__add_containers(snap, l.c);
  lists_free(&l);
}

/* ---- tests ---- */

static void event_table_matches_upstream(void **state) {
  (void)state;
  nl_pleg__event_t ev[2];
  const nl_pleg__cstate_t R = NL_PLEG__RUNNING, E = NL_PLEG__EXITED, U = NL_PLEG__UNKNOWN,
                          N = NL_PLEG__NONEXISTENT;
  nl_pleg__cstate_t all[] = {R, E, U, N};
  for (size_t i = 0; i < 4; i++) assert_int_equal(nl_pleg__generate_events("c", all[i], all[i], ev), 0);
  assert_int_equal(nl_pleg__generate_events("c", N, R, ev), 1);
  assert_int_equal(ev[0].type, NL_PLEG_CONTAINER_STARTED);
  assert_string_equal(ev[0].container_id, "c");
  assert_int_equal(nl_pleg__generate_events("c", R, E, ev), 1);
  assert_int_equal(ev[0].type, NL_PLEG_CONTAINER_DIED);
  assert_int_equal(nl_pleg__generate_events("c", N, E, ev), 1);
  assert_int_equal(ev[0].type, NL_PLEG_CONTAINER_DIED);
  assert_int_equal(nl_pleg__generate_events("c", R, U, ev), 1);
  assert_int_equal(ev[0].type, NL_PLEG_CONTAINER_CHANGED);
  /* exited then gone: its death was already reported */
  assert_int_equal(nl_pleg__generate_events("c", E, N, ev), 1);
  assert_int_equal(ev[0].type, NL_PLEG_CONTAINER_REMOVED);
  /* running (or unknown) then gone: died and removed */
  assert_int_equal(nl_pleg__generate_events("c", R, N, ev), 2);
  assert_int_equal(ev[0].type, NL_PLEG_CONTAINER_DIED);
  assert_int_equal(ev[1].type, NL_PLEG_CONTAINER_REMOVED);
  assert_int_equal(nl_pleg__generate_events("c", U, N, ev), 2);
  /* exited then running again (a restarted id never happens, but the table says) */
  assert_int_equal(nl_pleg__generate_events("c", E, R, ev), 1);
  assert_int_equal(ev[0].type, NL_PLEG_CONTAINER_STARTED);
}

static void grouping_ignores_objects_without_pod_uid(void **state) {
  (void)state;
  fake_sb_t sbs[3];
  fake_c_t cs[3];
  mk_sb(&sbs[0], "sb1", "uid-1", "web", 1, 10);
  mk_sb(&sbs[1], "sb2", "uid-2", "db", 0, 20);
  mk_sb(&sbs[2], "foreign", NULL, "x", 1, 30); /* not a kubelet's */
  mk_c(&cs[0], "c1", "sb1", "uid-1", "nginx", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING, 11);
  mk_c(&cs[1], "c2", "sb1", "uid-1", "side", RUNTIME__V1__CONTAINER_STATE__CONTAINER_CREATED, 12);
  mk_c(&cs[2], "c3", "sbx", NULL, "alien", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING, 13);
  /* What the brief decode skips, set and interleaved on the wire with what it
   * reads: it must not disturb the fields PLEG uses. */
  Runtime__V1__PodSandboxMetadata md = RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
  md.name = "web";
  md.uid = "uid-1";
  md.namespace_ = "default";
  md.attempt = 3;
  Runtime__V1__PodSandbox__AnnotationsEntry sa = RUNTIME__V1__POD_SANDBOX__ANNOTATIONS_ENTRY__INIT;
  sa.key = "kubernetes.io/config.source";
  sa.value = "file";
  Runtime__V1__PodSandbox__AnnotationsEntry *sap[] = {&sa, &sa};
  sbs[0].sb.metadata = &md;
  sbs[0].sb.annotations = sap;
  sbs[0].sb.n_annotations = 2;
  sbs[0].sb.runtime_handler = "runc";
  Runtime__V1__ContainerMetadata cm = RUNTIME__V1__CONTAINER_METADATA__INIT;
  cm.name = "nginx";
  cm.attempt = 7;
  Runtime__V1__ImageSpec img = RUNTIME__V1__IMAGE_SPEC__INIT;
  img.image = "nginx:1";
  Runtime__V1__Container__AnnotationsEntry ca = RUNTIME__V1__CONTAINER__ANNOTATIONS_ENTRY__INIT;
  ca.key = NL_ANN_CONTAINER_HASH;
  ca.value = "abc";
  Runtime__V1__Container__AnnotationsEntry *cap[] = {&ca};
  cs[0].c.metadata = &cm;
  cs[0].c.image = &img;
  cs[0].c.image_ref = "sha256:1";
  cs[0].c.image_id = "sha256:2";
  cs[0].c.annotations = cap;
  cs[0].c.n_annotations = 1;
  nl_map_t snap;
  snap_of(&snap, sbs, 3, cs, 3);
  assert_int_equal(nl_map_size(&snap), 2);
  nl_pleg__pod_t *p1 = nl_map_get(&snap, "uid-1");
  assert_non_null(p1);
  assert_string_equal(p1->name, "web");
  assert_string_equal(p1->namespace_, "default");
  assert_int_equal(p1->n_items, 3);
  assert_true(p1->items[0].sandbox);
  assert_int_equal(p1->items[0].state, NL_PLEG__RUNNING);
  assert_string_equal(p1->items[0].id, "sb1");
  assert_int_equal(p1->items[0].created_at, 10);
  assert_string_equal(p1->items[1].id, "c1");
  assert_int_equal(p1->items[1].created_at, 11);
  assert_string_equal(p1->items[1].name, "nginx");
  assert_string_equal(p1->items[1].sandbox_id, "sb1");
  assert_int_equal(p1->items[1].state, NL_PLEG__RUNNING);
  assert_int_equal(p1->items[2].state, NL_PLEG__UNKNOWN); /* created */
  nl_pleg__pod_t *p2 = nl_map_get(&snap, "uid-2");
  assert_int_equal(p2->n_items, 1);
  assert_int_equal(p2->items[0].state, NL_PLEG__EXITED); /* not-ready sandbox */
  nl_pleg__snapshot_free(&snap);
}

static size_t diff(nl_map_t *old, nl_map_t *cur, const char *uid, nl_pleg__event_t **ev) {
  return nl_pleg__compute_events(old ? nl_map_get(old, uid) : NULL, cur ? nl_map_get(cur, uid) : NULL,
                                 ev);
}

static void relist_diffs_give_lifecycle_events(void **state) {
  (void)state;
  fake_sb_t sb[1];
  fake_c_t c[2];
  nl_map_t s1, s2, s3, s4;
  nl_pleg__event_t *ev;

  /* first relist: a ready sandbox and a running container, as upstream:
   * containers before sandboxes */
  mk_sb(&sb[0], "sb1", "u", "web", 1, 1);
  mk_c(&c[0], "c1", "sb1", "u", "app", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING, 2);
  snap_of(&s1, sb, 1, c, 1);
  size_t n = diff(NULL, &s1, "u", &ev);
  assert_int_equal(n, 2);
  assert_int_equal(ev[0].type, NL_PLEG_CONTAINER_STARTED);
  assert_string_equal(ev[0].container_id, "c1");
  assert_int_equal(ev[1].type, NL_PLEG_CONTAINER_STARTED);
  assert_string_equal(ev[1].container_id, "sb1");
  nl_pleg__events_free(ev, n);

  /* same again: nothing */
  snap_of(&s2, sb, 1, c, 1);
  assert_int_equal(diff(&s1, &s2, "u", &ev), 0);
  assert_null(ev);

  /* the container exited, a new one is created */
  mk_c(&c[0], "c1", "sb1", "u", "app", RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED, 2);
  mk_c(&c[1], "c2", "sb1", "u", "app", RUNTIME__V1__CONTAINER_STATE__CONTAINER_CREATED, 3);
  snap_of(&s3, sb, 1, c, 2);
  n = diff(&s2, &s3, "u", &ev);
  assert_int_equal(n, 2);
  assert_int_equal(ev[0].type, NL_PLEG_CONTAINER_DIED);
  assert_string_equal(ev[0].container_id, "c1");
  assert_int_equal(ev[1].type, NL_PLEG_CONTAINER_CHANGED);
  assert_string_equal(ev[1].container_id, "c2");
  nl_pleg__events_free(ev, n);

  /* everything gone: c1 removed (died before), c2 and the sandbox died+removed */
  snap_of(&s4, NULL, 0, NULL, 0);
  n = diff(&s3, &s4, "u", &ev);
  assert_int_equal(n, 5);
  assert_int_equal(ev[0].type, NL_PLEG_CONTAINER_REMOVED);
  assert_string_equal(ev[0].container_id, "c1");
  assert_int_equal(ev[1].type, NL_PLEG_CONTAINER_DIED);
  assert_string_equal(ev[1].container_id, "c2");
  assert_int_equal(ev[2].type, NL_PLEG_CONTAINER_REMOVED);
  assert_int_equal(ev[3].type, NL_PLEG_CONTAINER_DIED);
  assert_string_equal(ev[3].container_id, "sb1");
  assert_int_equal(ev[4].type, NL_PLEG_CONTAINER_REMOVED);
  nl_pleg__events_free(ev, n);

  nl_pleg__snapshot_free(&s1);
  nl_pleg__snapshot_free(&s2);
  nl_pleg__snapshot_free(&s3);
  nl_pleg__snapshot_free(&s4);
}

static void hash_annotation_is_hex(void **state) {
  (void)state;
  assert_int_equal(nl_pleg__parse_hash("1a2b3c4d"), 0x1a2b3c4d);
  assert_int_equal(nl_pleg__parse_hash("ffffffff"), 0xffffffffu);
  assert_int_equal(nl_pleg__parse_hash(""), 0);
  assert_int_equal(nl_pleg__parse_hash(NULL), 0);
  assert_int_equal(nl_pleg__parse_hash("xyz"), 0);
  assert_int_equal(nl_pleg__parse_hash("-1"), 0);
}

typedef struct {
  Runtime__V1__ContainerStatus s;
  Runtime__V1__ContainerMetadata md;
  Runtime__V1__ImageSpec img;
  Runtime__V1__ContainerStatus__LabelsEntry l[2], *lp[2];
  Runtime__V1__ContainerStatus__AnnotationsEntry a[4], *ap[4];
  Runtime__V1__Mount m[2], *mp[2];
} fake_cs_t;

static void mk_cs(fake_cs_t *f, const char *id, Runtime__V1__ContainerState st) {
  Runtime__V1__ContainerStatus s = RUNTIME__V1__CONTAINER_STATUS__INIT;
  Runtime__V1__ContainerMetadata md = RUNTIME__V1__CONTAINER_METADATA__INIT;
  Runtime__V1__ImageSpec img = RUNTIME__V1__IMAGE_SPEC__INIT;
  f->s = s;
  f->md = md;
  f->img = img;
  f->md.name = "app";
  f->md.attempt = 3;
  f->img.image = "localhost/busybox:latest";
  f->s.id = (char *)id;
  f->s.metadata = &f->md;
  f->s.image = &f->img;
  f->s.image_ref = "sha256:abc";
  f->s.state = st;
  f->s.created_at = 100;
  f->s.started_at = 200;
  f->s.finished_at = 300;
  f->s.exit_code = 137;
  f->s.reason = "OOMKilled";
  f->s.message = "boom";
  f->s.log_path = "/var/log/pods/x/app/3.log";
  Runtime__V1__ContainerStatus__LabelsEntry le = RUNTIME__V1__CONTAINER_STATUS__LABELS_ENTRY__INIT;
  le.key = NL_LABEL_CONTAINER_NAME;
  le.value = "app-label";
  f->l[0] = le;
  f->lp[0] = &f->l[0];
  f->s.labels = f->lp;
  f->s.n_labels = 1;
  const char *kv[][2] = {{NL_ANN_CONTAINER_HASH, "deadbeef"},
                         {NL_ANN_CONTAINER_RESTART_COUNT, "3"},
                         {NL_ANN_CONTAINER_TERMINATION_MESSAGE_PATH, "/dev/termination-log"},
                         {NL_ANN_CONTAINER_TERMINATION_MESSAGE_POLICY, "File"}};
  for (size_t i = 0; i < 4; i++) {
    Runtime__V1__ContainerStatus__AnnotationsEntry ae =
        RUNTIME__V1__CONTAINER_STATUS__ANNOTATIONS_ENTRY__INIT;
    ae.key = (char *)kv[i][0];
    ae.value = (char *)kv[i][1];
    f->a[i] = ae;
    f->ap[i] = &f->a[i];
  }
  f->s.annotations = f->ap;
  f->s.n_annotations = 4;
  const char *mounts[][2] = {{"/data", "/var/lib/kubelet/pods/u/volumes/x"},
                             {"/dev/termination-log", "/var/lib/kubelet/pods/u/containers/app/1a"}};
  for (size_t i = 0; i < 2; i++) {
    Runtime__V1__Mount m = RUNTIME__V1__MOUNT__INIT;
    m.container_path = (char *)mounts[i][0];
    m.host_path = (char *)mounts[i][1];
    f->m[i] = m;
    f->mp[i] = &f->m[i];
  }
  f->s.mounts = f->mp;
  f->s.n_mounts = 2;
}

/* upstream convertToKubeContainerStatus: which file, and whether the log may
 * stand in for it. */
static void termination_message_source(void **state) {
  (void)state;
  fake_cs_t f;
  const char *path;
  bool fallback;
  mk_cs(&f, "c", RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED);
  assert_true(nl_pleg__termmsg_source(&f.s, &path, &fallback));
  assert_string_equal(path, "/var/lib/kubelet/pods/u/containers/app/1a");
  assert_false(fallback); /* policy File */
  f.a[3].value = "FallbackToLogsOnError";
  assert_true(nl_pleg__termmsg_source(&f.s, &path, &fallback));
  assert_true(fallback);
  f.s.exit_code = 0; /* succeeded: the file only */
  assert_true(nl_pleg__termmsg_source(&f.s, &path, &fallback));
  assert_false(fallback);
  f.s.exit_code = 128;
  f.s.reason = "ContainerCannotRun"; /* never ran: no logs */
  assert_true(nl_pleg__termmsg_source(&f.s, &path, &fallback));
  assert_false(fallback);
  f.s.n_mounts = 1; /* no mount at the path: nothing to read without the fallback */
  assert_false(nl_pleg__termmsg_source(&f.s, &path, &fallback));
  assert_null(path);
  f.s.reason = "Error";
  assert_true(nl_pleg__termmsg_source(&f.s, &path, &fallback));
  assert_null(path);
  assert_true(fallback);
  f.s.state = RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING; /* only dead containers */
  assert_false(nl_pleg__termmsg_source(&f.s, &path, &fallback));

  nl_rt_container_t c = {0};
  nl_pleg__add_termmsg(&c, "");
  assert_null(c.message);
  nl_pleg__add_termmsg(&c, "bye\n");
  assert_string_equal(c.message, "bye\n");
  free(c.message);
  c.message = nl_xstrdup("OOMKilled by the runtime");
  nl_pleg__add_termmsg(&c, "bye");
  assert_string_equal(c.message, "OOMKilled by the runtime: bye");
  free(c.message);
}

static void free_containers(nl_rt_container_t *c, size_t n) {
  nl_rt_pod_status_t *tmp = nl_xcalloc(1, sizeof(*tmp));
  tmp->containers = c;
  tmp->n_containers = n;
  nl_rt_pod_status_free(tmp);
}

/* upstream toKubeContainerUser: the runtime's user, when it reports one
 * (containerd 2), is the status' user; none (containerd 1.6) leaves it out. */
static void container_user_conversion(void **state) {
  (void)state;
  fake_cs_t f;
  nl_err_t *err = NULL;
  nl_rt_container_t *c = nl_xcalloc(1, sizeof(*c));
  mk_cs(&f, "cid1", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING);
  assert_int_equal(nl_pleg__convert_container(&f.s, NULL, c, &err), 0);
  assert_false(c->user.present);
  free_containers(c, 1);

  int64_t groups[] = {1000, 50000, 60000};
  Runtime__V1__LinuxContainerUser lu = RUNTIME__V1__LINUX_CONTAINER_USER__INIT;
  lu.uid = 1000;
  lu.gid = 1001;
  lu.supplemental_groups = groups;
  lu.n_supplemental_groups = 3;
  Runtime__V1__ContainerUser u = RUNTIME__V1__CONTAINER_USER__INIT;
  u.linux = &lu;
  f.s.user = &u;
  c = nl_xcalloc(1, sizeof(*c));
  assert_int_equal(nl_pleg__convert_container(&f.s, NULL, c, &err), 0);
  assert_true(c->user.present);
  assert_true(c->user.linux);
  assert_int_equal(c->user.uid, 1000);
  assert_int_equal(c->user.gid, 1001);
  assert_int_equal(c->user.n_groups, 3);
  assert_int_equal(c->user.groups[1], 50000);
  assert_int_equal(c->user.groups[2], 60000);
  /* the copy a status keeps is its own */
  nl_rt_pod_status_t src = {.containers = c, .n_containers = 1};
  nl_rt_pod_status_t *dup = nl_rt_pod_status_dup(&src);
  assert_ptr_not_equal(dup->containers[0].user.groups, c->user.groups);
  assert_int_equal(dup->containers[0].user.groups[2], 60000);
  nl_rt_pod_status_free(dup);
  free_containers(c, 1);

  u.linux = NULL; /* a user without its linux part: an empty one */
  c = nl_xcalloc(1, sizeof(*c));
  assert_int_equal(nl_pleg__convert_container(&f.s, NULL, c, &err), 0);
  assert_true(c->user.present);
  assert_false(c->user.linux);
  assert_int_equal(c->user.n_groups, 0);
  free_containers(c, 1);
}

static void container_status_conversion(void **state) {
  (void)state;
  fake_cs_t f;
  nl_err_t *err = NULL;
  nl_rt_container_t *c = nl_xcalloc(1, sizeof(*c));

  mk_cs(&f, "cid1", RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED);
  assert_int_equal(nl_pleg__convert_container(&f.s, "sb1", c, &err), 0);
  assert_string_equal(c->id, "cid1");
  assert_string_equal(c->name, "app-label");
  assert_int_equal(c->state, NL_RT_CONTAINER_EXITED);
  assert_int_equal(c->hash, 0xdeadbeef);
  assert_int_equal(c->restart_count, 3);
  assert_string_equal(c->image, "localhost/busybox:latest");
  assert_string_equal(c->image_ref, "sha256:abc");
  assert_int_equal(c->created_at, 100);
  assert_int_equal(c->started_at, 200);
  assert_int_equal(c->finished_at, 300);
  assert_int_equal(c->exit_code, 137);
  assert_string_equal(c->reason, "OOMKilled");
  assert_string_equal(c->message, "boom");
  assert_string_equal(c->sandbox_id, "sb1");
  assert_string_equal(c->log_path, "/var/log/pods/x/app/3.log");
  assert_string_equal(c->termination_message_path, "/dev/termination-log");
  free_containers(c, 1);

  /* running: no exit fields; created: not even a start time */
  c = nl_xcalloc(1, sizeof(*c));
  mk_cs(&f, "cid2", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING);
  assert_int_equal(nl_pleg__convert_container(&f.s, NULL, c, &err), 0);
  assert_int_equal(c->state, NL_RT_CONTAINER_RUNNING);
  assert_int_equal(c->started_at, 200);
  assert_int_equal(c->finished_at, 0);
  assert_int_equal(c->exit_code, 0);
  assert_null(c->reason);
  assert_null(c->sandbox_id);
  free_containers(c, 1);

  c = nl_xcalloc(1, sizeof(*c));
  mk_cs(&f, "cid3", RUNTIME__V1__CONTAINER_STATE__CONTAINER_CREATED);
  f.s.n_labels = 0; /* no label: the metadata name */
  f.s.n_annotations = 0;
  assert_int_equal(nl_pleg__convert_container(&f.s, NULL, c, &err), 0);
  assert_int_equal(c->state, NL_RT_CONTAINER_CREATED);
  assert_int_equal(c->started_at, 0);
  assert_string_equal(c->name, "app");
  assert_int_equal(c->hash, 0);
  assert_int_equal(c->restart_count, 0);
  free_containers(c, 1);

  c = nl_xcalloc(1, sizeof(*c));
  mk_cs(&f, "cid4", RUNTIME__V1__CONTAINER_STATE__CONTAINER_UNKNOWN);
  assert_int_equal(nl_pleg__convert_container(&f.s, NULL, c, &err), 0);
  assert_int_equal(c->state, NL_RT_CONTAINER_UNKNOWN);
  free_containers(c, 1);

  c = nl_xcalloc(1, sizeof(*c));
  mk_cs(&f, "cid5", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING);
  f.s.metadata = NULL;
  assert_int_equal(nl_pleg__convert_container(&f.s, NULL, c, &err), -1);
  assert_string_equal(nl_err_msg(err), "container cid5: status has no metadata");
  nl_err_free(&err);
  free_containers(c, 1);
}

typedef struct {
  Runtime__V1__PodSandboxStatus s;
  Runtime__V1__PodSandboxMetadata md;
  Runtime__V1__PodSandboxNetworkStatus net;
  Runtime__V1__PodIP extra, *extrap[1];
  Runtime__V1__LinuxPodSandboxStatus linux_;
  Runtime__V1__Namespace ns;
  Runtime__V1__NamespaceOption opt;
} fake_ss_t;

static void mk_ss(fake_ss_t *f, const char *id, int ready, int64_t created, const char *ip) {
  Runtime__V1__PodSandboxStatus s = RUNTIME__V1__POD_SANDBOX_STATUS__INIT;
  Runtime__V1__PodSandboxMetadata md = RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
  Runtime__V1__PodSandboxNetworkStatus net = RUNTIME__V1__POD_SANDBOX_NETWORK_STATUS__INIT;
  Runtime__V1__PodIP extra = RUNTIME__V1__POD_IP__INIT;
  Runtime__V1__LinuxPodSandboxStatus lx = RUNTIME__V1__LINUX_POD_SANDBOX_STATUS__INIT;
  Runtime__V1__Namespace ns = RUNTIME__V1__NAMESPACE__INIT;
  Runtime__V1__NamespaceOption opt = RUNTIME__V1__NAMESPACE_OPTION__INIT;
  *f = (fake_ss_t){.s = s, .md = md, .net = net, .extra = extra, .linux_ = lx, .ns = ns, .opt = opt};
  f->s.id = (char *)id;
  f->s.state = ready ? RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY
                     : RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_NOTREADY;
  f->s.created_at = created;
  f->md.attempt = 2;
  f->s.metadata = &f->md;
  f->net.ip = (char *)(ip ? ip : "");
  f->s.network = &f->net;
  f->ns.options = &f->opt;
  f->linux_.namespaces = &f->ns;
  f->s.linux = &f->linux_;
}

static void free_sandboxes(nl_rt_sandbox_t *s, size_t n) {
  nl_rt_pod_status_t *tmp = nl_xcalloc(1, sizeof(*tmp));
  tmp->sandboxes = s;
  tmp->n_sandboxes = n;
  nl_rt_pod_status_free(tmp);
}

static void sandbox_status_conversion(void **state) {
  (void)state;
  fake_ss_t f;
  nl_err_t *err = NULL;
  nl_rt_sandbox_t *sb = nl_xcalloc(1, sizeof(*sb));
  mk_ss(&f, "sb1", 1, 5, "10.88.0.7");
  f.extra.ip = "fd00::7";
  f.extrap[0] = &f.extra;
  f.net.additional_ips = f.extrap;
  f.net.n_additional_ips = 1;
  assert_int_equal(nl_pleg__convert_sandbox(&f.s, sb, &err), 0);
  assert_string_equal(sb->id, "sb1");
  assert_int_equal(sb->state, NL_RT_SANDBOX_READY);
  assert_int_equal(sb->attempt, 2);
  assert_int_equal(sb->created_at, 5);
  assert_string_equal(sb->ip, "10.88.0.7");
  assert_int_equal(sb->n_ips, 1);
  assert_string_equal(sb->ips[0], "fd00::7");
  assert_false(sb->host_network);
  free_sandboxes(sb, 1);

  sb = nl_xcalloc(1, sizeof(*sb));
  mk_ss(&f, "sb2", 0, 5, NULL);
  f.opt.network = RUNTIME__V1__NAMESPACE_MODE__NODE;
  assert_int_equal(nl_pleg__convert_sandbox(&f.s, sb, &err), 0);
  assert_int_equal(sb->state, NL_RT_SANDBOX_NOTREADY);
  assert_null(sb->ip);
  assert_true(sb->host_network);
  free_sandboxes(sb, 1);
}

static nl_rt_sandbox_t *sandboxes(fake_ss_t *fs, size_t n) {
  nl_rt_sandbox_t *out = nl_xcalloc(n ? n : 1, sizeof(*out));
  for (size_t i = 0; i < n; i++) assert_int_equal(nl_pleg__convert_sandbox(&fs[i].s, &out[i], NULL), 0);
  return out;
}

static void pod_status_sorts_and_keeps_ips(void **state) {
  (void)state;
  fake_ss_t f[2];
  fake_cs_t cf[2];
  mk_ss(&f[0], "old", 0, 10, NULL);
  mk_ss(&f[1], "new", 1, 20, "10.88.0.9");
  mk_cs(&cf[0], "c-old", RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED);
  cf[0].s.created_at = 1;
  mk_cs(&cf[1], "c-new", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING);
  cf[1].s.created_at = 2;
  nl_rt_container_t *cs = nl_xcalloc(2, sizeof(*cs));
  for (size_t i = 0; i < 2; i++) assert_int_equal(nl_pleg__convert_container(&cf[i].s, "new", &cs[i], NULL), 0);

  nl_rt_pod_status_t *st = nl_pleg__build_status("u", "web", "default", sandboxes(f, 2), 2, cs, 2, NULL, 42);
  assert_string_equal(st->uid, "u");
  assert_string_equal(st->name, "web");
  assert_string_equal(st->namespace_, "default");
  assert_int_equal(st->timestamp, 42);
  assert_string_equal(st->sandboxes[0].id, "new"); /* newest first */
  assert_string_equal(st->containers[0].id, "c-new");
  assert_int_equal(st->n_ips, 1);
  assert_string_equal(st->ips[0], "10.88.0.9");
  assert_ptr_equal(nl_rt_pod_status_find(st, "app-label"), &st->containers[0]);

  /* all sandboxes stopped, no IP any more: the previous IPs stay */
  mk_ss(&f[1], "new", 0, 20, NULL);
  nl_rt_pod_status_t *st2 = nl_pleg__build_status("u", "web", "default", sandboxes(f, 2), 2, NULL, 0, st, 43);
  assert_int_equal(st2->n_ips, 1);
  assert_string_equal(st2->ips[0], "10.88.0.9");
  assert_null(st2->containers);

  /* a ready sandbox without an IP (host network): no IPs, not the old ones */
  mk_ss(&f[1], "new", 1, 20, NULL);
  nl_rt_pod_status_t *st3 = nl_pleg__build_status("u", "web", "default", sandboxes(f, 2), 2, NULL, 0, st, 44);
  assert_int_equal(st3->n_ips, 0);
  assert_null(st3->ips);

  /* no sandbox at all and no previous status */
  nl_rt_pod_status_t *st4 = nl_pleg__build_status("u", NULL, NULL, NULL, 0, NULL, 0, NULL, 45);
  assert_null(st4->sandboxes);
  assert_null(st4->name);
  assert_int_equal(st4->n_ips, 0);

  nl_rt_pod_status_free(st);
  nl_rt_pod_status_free(st2);
  nl_rt_pod_status_free(st3);
  nl_rt_pod_status_free(st4);
}

static void record_free(void *v) {
  nl_pleg__record_t *rec = v;
  nl_pleg__pod_free(rec->cur);
  free(rec);
}

/* Records whose current pods are those of a snapshot (which is emptied). */
static void records_of(nl_map_t *records, nl_map_t *snap) {
  nl_map_init(records);
  nl_map_iter_t it;
  const char *uid;
  void *v;
  nl_map_iter_init(&it, snap);
  while (nl_map_iter_next(&it, &uid, &v)) {
    nl_pleg__record_t *rec = calloc(1, sizeof *rec);
    rec->cur = v;
    nl_map_put(records, uid, rec);
  }
  nl_map_free(snap, NULL);
}

static bool unchanged(nl_map_t *records, fake_sb_t *sbs, size_t nsb, fake_c_t *cs, size_t nc,
                      bool *same_c) {
  static uint64_t gen;
  lists_t l = lists_of(sbs, nsb, cs, nc);
  gen++;
  bool same_sb = nl_pleg__sandboxes_unchanged(records, l.sb, gen);
  *same_c = nl_pleg__containers_unchanged(records, l.c, gen);
  lists_free(&l);
  return same_sb;
}

static void unchanged_lists_are_recognised(void **state) {
  (void)state;
  fake_sb_t sbs[3];
  fake_c_t cs[4];
  mk_sb(&sbs[0], "sb1", "uid-1", "web", 1, 10);
  mk_sb(&sbs[1], "sb2", "uid-2", "db", 1, 20);
  mk_c(&cs[0], "c1", "sb1", "uid-1", "nginx", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING, 11);
  mk_c(&cs[1], "c2", "sb2", "uid-2", "pg", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING, 21);
  nl_map_t snap, records;
  snap_of(&snap, sbs, 2, cs, 2);
  records_of(&records, &snap);
  bool same_c;
  /* the same objects, a foreign one besides: nothing changed, several times */
  mk_sb(&sbs[2], "foreign", NULL, "x", 1, 30);
  mk_c(&cs[2], "alien", "foreign", NULL, "x", RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED, 31);
  for (int i = 0; i < 3; i++) {
    assert_true(unchanged(&records, sbs, 3, cs, 3, &same_c));
    assert_true(same_c);
  }
  /* a container died: its list changed, the sandboxes' did not */
  cs[1].c.state = RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED;
  assert_true(unchanged(&records, sbs, 2, cs, 2, &same_c));
  assert_false(same_c);
  cs[1].c.state = RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING;
  /* one is gone; one is new; one was made again (created later) */
  assert_true(unchanged(&records, sbs, 2, cs, 1, &same_c) && !same_c);
  mk_c(&cs[3], "c3", "sb1", "uid-1", "side", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING, 12);
  fake_c_t more[3] = {cs[0], cs[1], cs[3]};
  for (size_t i = 0; i < 3; i++) more[i].c.labels = more[i].lp; /* the copies' own entries */
  assert_true(unchanged(&records, sbs, 2, more, 3, &same_c) && !same_c);
  sbs[0].sb.created_at = 99;
  assert_false(unchanged(&records, sbs, 2, cs, 2, &same_c));
  sbs[0].sb.created_at = 10;
  /* listed twice in place of another */
  fake_sb_t twice[2] = {sbs[0], sbs[0]};
  for (size_t i = 0; i < 2; i++) twice[i].sb.labels = twice[i].lp;
  assert_false(unchanged(&records, twice, 2, cs, 2, &same_c));
  /* the unchanged half of a snapshot is copied from the records */
  nl_map_t half;
  nl_map_init(&half);
  nl_pleg__copy_current(&half, &records, true);
  nl_pleg__copy_current(&half, &records, false);
  nl_pleg__pod_t *p1 = nl_map_get(&half, "uid-1");
  assert_int_equal(nl_map_size(&half), 2);
  assert_string_equal(p1->name, "web");
  assert_int_equal(p1->n_items, 2);
  nl_pleg__event_t *ev = NULL;
  assert_int_equal(nl_pleg__compute_events(((nl_pleg__record_t *)nl_map_get(&records, "uid-1"))->cur,
                                           p1, &ev), 0);
  nl_pleg__snapshot_free(&half);
  nl_map_free(&records, record_free);
}

/* Which exits may still turn into OOMKilled: a fresh SIGKILL with the
 * runtime's generic reason, not one the agent asked for. */
static void unsettled_exits(void **state) {
  (void)state;
  const int64_t s = 1000000000, now = 1000 * s;
  nl_rt_container_t c[2] = {{.id = "run", .state = NL_RT_CONTAINER_RUNNING},
                            {.id = "k", .state = NL_RT_CONTAINER_EXITED, .exit_code = 137,
                             .reason = "Error", .finished_at = now - s}};
  nl_map_t stopping;
  nl_map_init(&stopping);
  assert_ptr_equal(nl_pleg__unsettled(c, 2, &stopping, now), &c[1]);
  c[1].reason = NULL; /* no reason at all is as generic */
  assert_ptr_equal(nl_pleg__unsettled(c, 2, &stopping, now), &c[1]);
  c[1].reason = "OOMKilled";
  assert_null(nl_pleg__unsettled(c, 2, &stopping, now));
  c[1].reason = "Error";
  c[1].exit_code = 143; /* SIGTERM: not the OOM killer's */
  assert_null(nl_pleg__unsettled(c, 2, &stopping, now));
  c[1].exit_code = 137;
  c[1].finished_at = now - NL_PLEG_OOM_SETTLE_NS; /* settled: the wait is over */
  assert_null(nl_pleg__unsettled(c, 2, &stopping, now));
  c[1].finished_at = now + 3600 * s; /* a clock gone wrong never holds it */
  assert_null(nl_pleg__unsettled(c, 2, &stopping, now));
  c[1].finished_at = 0;
  assert_null(nl_pleg__unsettled(c, 2, &stopping, now));
  c[1].finished_at = now;
  nl_map_put(&stopping, "k", NULL); /* the agent stopped it */
  assert_null(nl_pleg__unsettled(c, 2, &stopping, now));
  nl_map_free(&stopping, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(event_table_matches_upstream),
      cmocka_unit_test(grouping_ignores_objects_without_pod_uid),
      cmocka_unit_test(unchanged_lists_are_recognised),
      cmocka_unit_test(relist_diffs_give_lifecycle_events),
      cmocka_unit_test(hash_annotation_is_hex),
      cmocka_unit_test(container_status_conversion),
      cmocka_unit_test(container_user_conversion),
      cmocka_unit_test(termination_message_source),
      cmocka_unit_test(sandbox_status_conversion),
      cmocka_unit_test(pod_status_sorts_and_keeps_ips),
      cmocka_unit_test(unsettled_exits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
