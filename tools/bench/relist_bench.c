/* What a relist that finds nothing changed costs PLEG, without the transport:
 * decoding the two list answers and comparing them with the last relist.
 *
 *   relist_bench [PODS=110] [ROUNDS=1000] [full|brief|fingerprint]
 *
 * The answers are those containerd gives for PODS one-container pods made by
 * nanolet (the sandbox's and the container's labels and annotations as
 * managers/runtime_*.c set them, metadata, image), packed once. Each round
 * decodes both into an arena as the CRI client does (with the full
 * cri/api.proto messages, or the brief ones PLEG asks for, cri/brief.c) and,
 * brief, compares them with PLEG's records as a relist does; fingerprint only
 * takes the two answers' fingerprints, what a relist does when nothing changed
 * (cri/runtime.h). Prints the time per round; run it under
 * `valgrind --tool=callgrind` with two ROUNDS counts for instructions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cri/brief.h"
#include "cri/pbarena.h"
#include "managers/pleg_internal.h"
#include "managers/runtime_types.h"


static uint8_t *pack(const ProtobufCMessage *m, size_t *len) {
  uint8_t *b = malloc(protobuf_c_message_get_packed_size(m) + 1);
  *len = protobuf_c_message_pack(m, b);
  return b;
}

#define fmt(f, i) ({ char *s_; if (asprintf(&s_, f, i) < 0) abort(); s_; })

int main(int argc, char **argv) {
  int pods = argc > 1 ? atoi(argv[1]) : 110;
  long rounds = argc > 2 ? atol(argv[2]) : 1000;
  bool brief = !(argc > 3 && strcmp(argv[3], "full") == 0);
  bool fp_only = argc > 3 && strcmp(argv[3], "fingerprint") == 0;
  Runtime__V1__ListPodSandboxResponse sr = RUNTIME__V1__LIST_POD_SANDBOX_RESPONSE__INIT;
  Runtime__V1__ListContainersResponse cr = RUNTIME__V1__LIST_CONTAINERS_RESPONSE__INIT;
  sr.items = calloc(pods, sizeof *sr.items);
  cr.containers = calloc(pods, sizeof *cr.containers);
  sr.n_items = cr.n_containers = pods;
  for (int i = 0; i < pods; i++) {
    char *uid = fmt("6b8f0c1e-3f4a-4c2d-9e1b-%012d", i), *name = fmt("steady-%d", i);
    char *sid = fmt("%064d", i), *cid = fmt("c%063d", i);
    Runtime__V1__PodSandbox *sb = calloc(1, sizeof *sb);
    *sb = (Runtime__V1__PodSandbox)RUNTIME__V1__POD_SANDBOX__INIT;
    Runtime__V1__PodSandboxMetadata *md = calloc(1, sizeof *md);
    *md = (Runtime__V1__PodSandboxMetadata)RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
    md->name = name, md->uid = uid, md->namespace_ = "perf-steady";
    sb->id = sid, sb->metadata = md, sb->created_at = 1700000000000000000 + i;
    sb->state = RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY;
    sb->runtime_handler = "";
    sb->n_labels = 3;
    sb->labels = calloc(3, sizeof *sb->labels);
#define SBL(k, v) ({ Runtime__V1__PodSandbox__LabelsEntry *e = calloc(1, sizeof *e); *e = (Runtime__V1__PodSandbox__LabelsEntry)RUNTIME__V1__POD_SANDBOX__LABELS_ENTRY__INIT; e->key = k; e->value = v; e; })
#define SBA(k, v) ({ Runtime__V1__PodSandbox__AnnotationsEntry *e = calloc(1, sizeof *e); *e = (Runtime__V1__PodSandbox__AnnotationsEntry)RUNTIME__V1__POD_SANDBOX__ANNOTATIONS_ENTRY__INIT; e->key = k; e->value = v; e; })
#define CL(k, v) ({ Runtime__V1__Container__LabelsEntry *e = calloc(1, sizeof *e); *e = (Runtime__V1__Container__LabelsEntry)RUNTIME__V1__CONTAINER__LABELS_ENTRY__INIT; e->key = k; e->value = v; e; })
#define CA(k, v) ({ Runtime__V1__Container__AnnotationsEntry *e = calloc(1, sizeof *e); *e = (Runtime__V1__Container__AnnotationsEntry)RUNTIME__V1__CONTAINER__ANNOTATIONS_ENTRY__INIT; e->key = k; e->value = v; e; })
    sb->labels[0] = SBL(NL_LABEL_POD_NAME, name);
    sb->labels[1] = SBL(NL_LABEL_POD_NAMESPACE, "perf-steady");
    sb->labels[2] = SBL(NL_LABEL_POD_UID, uid);
    sb->n_annotations = 3;
    sb->annotations = calloc(3, sizeof *sb->annotations);
    sb->annotations[0] = SBA("kubernetes.io/config.source", "file");
    sb->annotations[1] = SBA("kubernetes.io/config.seen", "2026-11-24T03:30:00.000000000Z");
    sb->annotations[2] = SBA("kubernetes.io/config.hash", uid);
    sr.items[i] = sb;

    Runtime__V1__Container *c = calloc(1, sizeof *c);
    *c = (Runtime__V1__Container)RUNTIME__V1__CONTAINER__INIT;
    Runtime__V1__ContainerMetadata *cm = calloc(1, sizeof *cm);
    *cm = (Runtime__V1__ContainerMetadata)RUNTIME__V1__CONTAINER_METADATA__INIT;
    cm->name = "main";
    Runtime__V1__ImageSpec *img = calloc(1, sizeof *img);
    *img = (Runtime__V1__ImageSpec)RUNTIME__V1__IMAGE_SPEC__INIT;
    img->image = "sha256:" "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    c->id = cid, c->pod_sandbox_id = sid, c->metadata = cm, c->image = img;
    c->image_ref = img->image, c->image_id = img->image;
    c->state = RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING;
    c->created_at = 1700000000100000000 + i;
    c->n_labels = 4;
    c->labels = calloc(4, sizeof *c->labels);
    c->labels[0] = CL(NL_LABEL_POD_NAME, name);
    c->labels[1] = CL(NL_LABEL_POD_NAMESPACE, "perf-steady");
    c->labels[2] = CL(NL_LABEL_POD_UID, uid);
    c->labels[3] = CL(NL_LABEL_CONTAINER_NAME, "main");
    c->n_annotations = 5;
    c->annotations = calloc(5, sizeof *c->annotations);
    c->annotations[0] = CA(NL_ANN_CONTAINER_HASH, "1a2b3c4d");
    c->annotations[1] = CA(NL_ANN_CONTAINER_RESTART_COUNT, "0");
    c->annotations[2] = CA(NL_ANN_CONTAINER_TERMINATION_MESSAGE_PATH, "/dev/termination-log");
    c->annotations[3] = CA(NL_ANN_CONTAINER_TERMINATION_MESSAGE_POLICY, "File");
    c->annotations[4] = CA(NL_ANN_POD_TERMINATION_GRACE, "1");
    cr.containers[i] = c;
  }
  size_t slen, clen;
  uint8_t *sbuf = pack(&sr.base, &slen), *cbuf = pack(&cr.base, &clen);
  const ProtobufCMessageDescriptor *sd = brief ? &runtime__v1__brief__list_pod_sandbox_response__descriptor
                                               : &runtime__v1__list_pod_sandbox_response__descriptor;
  const ProtobufCMessageDescriptor *cd = brief ? &runtime__v1__brief__list_containers_response__descriptor
                                               : &runtime__v1__list_containers_response__descriptor;
  /* PLEG's records after the first relist: each pod as listed. */
  nl_map_t records;
  nl_map_init(&records);
  if (brief) {
    nl_pb_arena_t *sa = NULL, *ca = NULL;
    ProtobufCMessage *s = nl_pb_arena_unpack(sd, NULL, sbuf, slen, &sa);
    ProtobufCMessage *c = nl_pb_arena_unpack(cd, NULL, cbuf, clen, &ca);
    nl_map_t snap;
    nl_map_init(&snap);
    nl_pleg__add_sandboxes(&snap, (void *)s);
    nl_pleg__add_containers(&snap, (void *)c);
    nl_map_iter_t it;
    const char *uid;
    void *v;
    nl_map_iter_init(&it, &snap);
    while (nl_map_iter_next(&it, &uid, &v)) {
      nl_pleg__record_t *rec = calloc(1, sizeof *rec);
      rec->old = rec->cur = v;
      nl_map_put(&records, uid, rec);
    }
    nl_map_free(&snap, NULL);
    nl_pb_arena_free(sa);
    nl_pb_arena_free(ca);
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  uint64_t fps = 0;
  for (long r = 0; fp_only && r < rounds; r++)
    fps += nl_cri_brief_fingerprint(&runtime__v1__brief__list_pod_sandbox_response__descriptor, sbuf, slen) ^
           nl_cri_brief_fingerprint(&runtime__v1__brief__list_containers_response__descriptor, cbuf, clen);
  for (long r = 0; !fp_only && r < rounds; r++) {
    nl_pb_arena_t *sa = NULL, *ca = NULL;
    ProtobufCMessage *s = nl_pb_arena_unpack(sd, NULL, sbuf, slen, &sa);
    ProtobufCMessage *c = nl_pb_arena_unpack(cd, NULL, cbuf, clen, &ca);
    if (!s || !c) abort();
    if (brief && !(nl_pleg__sandboxes_unchanged(&records, (void *)s, (uint64_t)r + 1) &&
                   nl_pleg__containers_unchanged(&records, (void *)c, (uint64_t)r + 1)))
      abort();
    nl_pb_arena_free(sa);
    nl_pb_arena_free(ca);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
  printf("pods=%d rounds=%ld decode=%s answers=%zu+%zu bytes: %.1f us per relist%s\n", pods, rounds,
         fp_only ? "fingerprint" : brief ? "brief" : "full", slen, clen, ns / rounds / 1000,
         fps == 1 ? " " : ""); /* fps read: the loop is not optimised away */
  return 0;
}
