/* A fake CRI runtime for tests and benchmarks: an HTTP/2 gRPC server (nghttp2)
 * on a libuv unix-socket listener that answers runtime.v1 RuntimeService and
 * ImageService calls from in-memory sandboxes, containers and images, and that
 * injects faults on command, per method or for all methods.
 *
 * Two ways to use it: in-process (fake_cri_new() on the test's own loop) or as
 * the helper process `nanolet-fake-cri --socket PATH [--control FILE]`
 * (fake_cri_main.c), whose faults are read from the control file on SIGUSR1 in
 * the line syntax of fake_cri_apply_line().
 *
 * What it serves: Version, Status, RunPodSandbox, StopPodSandbox,
 * RemovePodSandbox, PodSandboxStatus, ListPodSandbox, CreateContainer,
 * StartContainer, StopContainer, RemoveContainer, ListContainers,
 * ContainerStatus, ReopenContainerLog (running containers; writes nothing), ExecSync (stdout echoes the command joined by spaces plus a
 * newline, exit code 0), GetContainerEvents (a stream of CREATED, STARTED,
 * STOPPED and DELETED events with the sandbox's id, metadata and state, as
 * containerd >= 1.7 sends them), Exec, Attach and PortForward (a URL under the base
 * set with fake_cri_set_stream_base), ListPodSandboxStats (ready sandboxes
 * and their running containers: 10 ms of CPU per second since creation,
 * 8 MiB working set each), ListImages, ImageStatus, PullImage (adds the image;
 * fails only without the credentials of fake_cri_set_pull_auth), RemoveImage, ImageFsInfo. Anything else is UNIMPLEMENTED.
 * CreateContainer needs the sandbox and the image to exist (NOT_FOUND otherwise),
 * as containerd does. */
#ifndef NL_TEST_FAKE_CRI_H
#define NL_TEST_FAKE_CRI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "reactor/error.h"

typedef enum fake_cri_fault_kind {
  FAKE_CRI_ANSWER = 0,  /* answer normally (after delay_ms): a pure delay */
  FAKE_CRI_STATUS,      /* Trailers-Only response with code and message */
  FAKE_CRI_DROP,        /* close the connection when the request has arrived */
  FAKE_CRI_MALFORMED,   /* write an invalid HTTP/2 frame (DATA on stream 0), then
                         * ignore the connection until the peer closes it */
  FAKE_CRI_BAD_MESSAGE, /* grpc-status 0 with a message that is not protobuf */
  FAKE_CRI_OVERSIZE,    /* a response message of FAKE_CRI_OVERSIZE_LEN bytes */
  FAKE_CRI_STALL,       /* never answer (until the peer cancels or goes away) */
} fake_cri_fault_kind_t;

/* 16 MiB + 1: one byte over the kubelet's (and nanolet's) maxMsgSize. */
#define FAKE_CRI_OVERSIZE_LEN (16u * 1024 * 1024 + 1)

typedef struct fake_cri_fault {
  fake_cri_fault_kind_t kind;
  uint64_t delay_ms;   /* wait this long before acting; 0: act at once */
  int code;            /* STATUS: the gRPC code (1..16) */
  const char *message; /* STATUS: grpc-message (copied; NULL: "") */
  unsigned times;      /* applies to the next `times` calls, then lifts; 0: until cleared */
} fake_cri_fault_t;

typedef struct fake_cri_stats {
  uint64_t calls;        /* requests received (complete, END_STREAM seen) */
  uint64_t answered;     /* responses submitted (any status) */
  uint64_t faults;       /* calls a fault applied to */
  uint64_t connections;  /* connections accepted */
  uint64_t open_conns;   /* connections open now */
  uint64_t open_streams; /* streams open now (stalled ones included) */
  uint64_t cancelled;    /* streams the client reset before an answer */
  uint64_t events;       /* GetContainerEvents messages queued (all streams) */
} fake_cri_stats_t;

typedef struct fake_cri fake_cri_t;
typedef void (*fake_cri_stop_cb)(void *ctx);

/* Listens on the unix socket `path` (an existing file there is unlinked first)
 * on `loop`. Returns the fake, or NULL with *err when the socket cannot be bound. */
fake_cri_t *fake_cri_new(uv_loop_t *loop, const char *path, nl_err_t **err);

/* Closes the listener and every connection (open streams get no answer), then
 * frees the fake and calls done(ctx) (done may be NULL). The socket file is
 * unlinked. */
void fake_cri_stop(fake_cri_t *f, fake_cri_stop_cb done, void *ctx);

/* Sets the fault of one method ("Version", "ListPodSandbox": the last path
 * element), or of every method when method is NULL or "*". A per-method fault
 * wins over the global one. A fault with kind ANSWER and delay_ms 0 clears. */
void fake_cri_set_fault(fake_cri_t *f, const char *method, const fake_cri_fault_t *fault);
void fake_cri_clear_faults(fake_cri_t *f);

/* Applies one control line:
 *   clear
 *   METHOD|* delay MS
 *   METHOD|* status CODE [MESSAGE...]
 *   METHOD|* drop|malformed|bad-message|oversize|stall|ok
 * optionally followed by the options `after=MS` (a delay before acting) and
 * `times=N` placed right after the kind, e.g. "Version stall times=1" or
 * "* status 14 after=50 runtime is down". Blank lines and lines starting with '#'
 * are ignored. Returns 0, or -1 with *err (NL_EINVAL) naming the bad token. */
int fake_cri_apply_line(fake_cri_t *f, const char *line, nl_err_t **err);

/* Clears all faults and applies each line of text (a control file's content).
 * Returns the number of rules applied, or -1 with *err naming the line. */
int fake_cri_apply_text(fake_cri_t *f, const char *text, nl_err_t **err);

/* As fake_cri_add_container, with the kubelet's labels (io.kubernetes.pod.uid,
 * .pod.name = pod, .pod.namespace = default, .container.name = name): PLEG
 * takes it for a pod's. */
int fake_cri_add_kube_container(fake_cri_t *f, const char *pod, const char *name, const char *image,
                                char *id, size_t id_len);

/* RuntimeConfig answers this cgroup driver ("systemd" or "cgroupfs"); until
 * set, RuntimeConfig is not implemented (UNIMPLEMENTED, as containerd 1.6). */
void fake_cri_set_cgroup_driver(fake_cri_t *f, const char *driver);

/* Adds an image ("localhost/busybox:latest") to the store, as if pulled. */
void fake_cri_add_image(fake_cri_t *f, const char *ref);

/* Adds a running container named `name` in a new ready sandbox `pod` (also its
 * UID, namespace "default"), through the same handlers as RunPodSandbox,
 * CreateContainer and StartContainer; the image is added first. Writes the
 * container's id to id (id_len >= 65). Returns 0 or the gRPC code a handler
 * failed with. */
int fake_cri_add_container(fake_cri_t *f, const char *pod, const char *name, const char *image,
                           char *id, size_t id_len);

/* The kernel's OOM killer ends a running container: exit code 137, and its
 * reason is "Error" until reason_after_ms later, then "OOMKilled", as
 * containerd, which may handle the exit before the OOM event. Returns 0, or
 * -1 when no such container runs. */
int fake_cri_oom_kill(fake_cri_t *f, const char *id, uint64_t reason_after_ms);

/* Makes PullImage need these credentials (its AuthConfig's username and
 * password), as a registry with basic authentication does: any others fail
 * with UNKNOWN and containerd's "... 401 Unauthorized". username NULL: none
 * needed (the default). */
void fake_cri_set_pull_auth(fake_cri_t *f, const char *username, const char *password);
/* The usernames of the PullImage calls so far, in order, joined by ","
 * ("-" for a call without credentials; "" before any call). */
const char *fake_cri_pull_users(const fake_cri_t *f);

/* The streaming URLs' base ("http://127.0.0.1:PORT"; copied): Exec answers
 * "<base>/exec/<container id>", Attach "<base>/attach/<id>", PortForward
 * "<base>/portforward/<sandbox id>". */
void fake_cri_set_stream_base(fake_cri_t *f, const char *base);

fake_cri_stats_t fake_cri_stats(const fake_cri_t *f);
size_t fake_cri_sandbox_count(const fake_cri_t *f);
size_t fake_cri_container_count(const fake_cri_t *f);

#endif
