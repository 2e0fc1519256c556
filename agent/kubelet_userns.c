/* Pod user namespaces in the kubelet (agent/kubelet_userns.h). */
#include "agent/kubelet_userns.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/kubelet_pods.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

extern char **environ;

#define KUBELET_USER "kubelet"
#define GETSUBIDS "getsubids"
#define OUT_MAX 65536

/* Go's exec.LookPath for a bare name: the first executable in $PATH. */
static char *look_path(const char *name) {
  const char *path = getenv("PATH");
  if (!path) return NULL;
  for (const char *p = path;;) {
    size_t len = strcspn(p, ":");
    char *cand = len ? nl_xasprintf("%.*s/%s", (int)len, p, name) : nl_xasprintf("./%s", name);
    if (access(cand, X_OK) == 0) return cand;
    free(cand);
    if (!p[len]) return NULL;
    p += len + 1;
  }
}

/* Reads fd to its end, keeping at most OUT_MAX bytes. */
static char *drain(int fd, size_t *n) {
  char *buf = nl_xmalloc(OUT_MAX + 1);
  size_t len = 0;
  char sink[4096];
  for (;;) {
    ssize_t r = len < OUT_MAX ? read(fd, buf + len, OUT_MAX - len) : read(fd, sink, sizeof sink);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    if (len < OUT_MAX) len += (size_t)r;
  }
  buf[len] = 0;
  *n = len;
  return buf;
}

/* `getsubids [-g] kubelet`: its standard output, or an error with its
 * standard error (exec.Command's Output). At start only: it blocks. */
static char *getsubids(const char *exe, bool groups, size_t *n, nl_err_t **err) {
  int out[2], errp[2];
  if (pipe2(out, O_CLOEXEC) < 0) {
    nl_err_set(err, errno, "pipe: %s", strerror(errno));
    return NULL;
  }
  if (pipe2(errp, O_CLOEXEC) < 0) {
    nl_err_set(err, errno, "pipe: %s", strerror(errno));
    close(out[0]);
    close(out[1]);
    return NULL;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
  char *argv[] = {(char *)GETSUBIDS, groups ? (char *)"-g" : (char *)KUBELET_USER,
                  groups ? (char *)KUBELET_USER : NULL, NULL};
  pid_t pid;
  int rc = posix_spawn(&pid, exe, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  close(errp[1]);
  if (rc != 0) {
    close(out[0]);
    close(errp[0]);
    nl_err_set(err, rc, "run %s: %s", exe, strerror(rc));
    return NULL;
  }
  size_t en;
  char *text = drain(out[0], n);
  char *etext = drain(errp[0], &en);
  close(out[0]);
  close(errp[0]);
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (en && (etext[en - 1] == '\n' || etext[en - 1] == ' ')) etext[--en] = 0;
    if (WIFEXITED(status))
      nl_err_set(err, NL_ERUNTIME, "exit status %d%s%s", WEXITSTATUS(status), en ? ": " : "",
                 etext);
    else
      nl_err_set(err, NL_ERUNTIME, "killed by signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    free(text);
    text = NULL;
  }
  free(etext);
  return text;
}

/* upstream getKubeletMappings: no user `kubelet`, the default range; else
 * getsubids must answer, the same for uids and gids. */
static int kubelet_mappings(uint32_t ids_per_pod, uint32_t *first, uint32_t *count,
                            nl_err_t **err) {
  nl_userns_default_range(ids_per_pod, first, count);
  errno = 0;
  struct passwd *pw = getpwnam(KUBELET_USER);
  if (!pw) {
    if (errno && errno != ENOENT && errno != ESRCH && errno != EBADF && errno != EPERM)
      return nl_err_set(err, errno, "look up user %s: %s", KUBELET_USER, strerror(errno));
    nl_vlog(5, "user namespaces: user %s not found, using default mappings", KUBELET_USER);
    return 0;
  }
  /* upstream's intent is the default here too, but Go's os.IsNotExist does not
   * match exec.ErrNotFound: its start fails, and so does this one */
  char *exe = look_path(GETSUBIDS);
  if (!exe)
    return nl_err_set(err, NL_EINVAL, "exec: \"%s\": executable file not found in $PATH",
                      GETSUBIDS);
  size_t nu = 0, ng = 0;
  nl_err_t *e = NULL;
  char *uids = getsubids(exe, false, &nu, &e);
  if (!uids) {
    nl_err_set(err, e->code, "error retrieving additional uids for user \"%s\": %s", KUBELET_USER,
               e->msg);
    nl_err_free(&e);
    free(exe);
    return -1;
  }
  char *gids = getsubids(exe, true, &ng, &e);
  free(exe);
  int rc;
  if (!gids) {
    rc = nl_err_set(err, e->code, "error retrieving additional gids for user \"%s\": %s",
                    KUBELET_USER, e->msg);
    nl_err_free(&e);
  } else if (nu != ng || memcmp(uids, gids, nu) != 0) {
    rc = nl_err_set(err, NL_EINVAL, "mismatched subuids and subgids for user \"%s\"", KUBELET_USER);
  } else {
    nl_vlog(5, "user namespaces: user %s found, using mappings from getsubids", KUBELET_USER);
    rc = nl_userns_parse_getsubids(uids, nu, first, count, err);
  }
  free(uids);
  free(gids);
  return rc;
}

int nl__kubelet_userns_init(nl_kubelet_t *k, nl_err_t **err) {
  uint32_t ids = (uint32_t)k->cfg->userns_ids_per_pod, first, count;
  if (kubelet_mappings(ids, &first, &count, err) < 0 ||
      nl_userns_init(&k->userns, first, count, ids, k->cfg->max_pods, err) < 0)
    return nl_err_wrap(err, "kubelet mappings");
  k->userns_up = true;
  if (nl_userns_load(&k->userns, k->cfg->root_dir, err) < 0) return -1;
  nl_info("user namespaces: host ids %u-%llu for pods, %u each%s; %zu allocated", first,
          (unsigned long long)first + count - 1, ids,
          count == (uint32_t)((UINT64_C(1) << 32) - ids) && first == ids ? " (default range)" : "",
          nl_userns_count(&k->userns));
  return 0;
}

void nl__kubelet_userns_free(nl_kubelet_t *k) {
  if (!k->userns_up) return;
  nl_userns_free(&k->userns);
  k->userns_up = false;
}

int nl__kubelet_supports_userns(void *ctx, const char *handler) {
  nl_kubelet_t *k = ctx;
  return k->node_up ? nl_node_supports_userns(&k->node, handler) : 0;
}

void nl__kubelet_userns_synced(nl_kubelet_t *k, const nl_pod_t *pod, const nl_sync_result_t *res) {
  if (pod->spec.host_users != 0 || res->cancelled) return;
  bool sandbox = false, failed = res->err != NULL;
  for (size_t i = 0; i < res->n_steps; i++) {
    if (res->steps[i].action == NL_SYNC_CREATE_POD_SANDBOX) sandbox = true;
    if (res->steps[i].reason) failed = true;
  }
  if (sandbox) nl_kmetrics_userns_pod_started(&k->metrics, failed);
}

/* ---- release ---- */

typedef struct unlink_req {
  uv_fs_t req;
  nl_kubelet_t *k;
} unlink_req_t;

static void unlinked(uv_fs_t *req) {
  unlink_req_t *u = container_of(req, unlink_req_t, req);
  if (req->result < 0 && req->result != UV_ENOENT)
    nl_warn("remove %s: %s", req->path, uv_strerror((int)req->result));
  uv_fs_req_cleanup(req);
  nl_kubelet_t *k = u->k;
  free(u);
  nl__kubelet_release(k);
}

void nl__kubelet_userns_release(nl_kubelet_t *k, const char *uid) {
  if (!k->userns_up || !nl_userns_release(&k->userns, uid)) return;
  unlink_req_t *u = nl_xcalloc(1, sizeof *u);
  u->k = k;
  char *path = nl_xasprintf("%s/pods/%s/%s", k->cfg->root_dir, uid, NL_USERNS_FILE);
  if (uv_fs_unlink(k->loop, &u->req, path, unlinked) == 0)
    k->pending++;
  else
    free(u);
  free(path);
}

void nl__kubelet_userns_cleanup(nl_kubelet_t *k, bool (*is_known)(nl_kubelet_t *k, const char *uid)) {
  if (!k->userns_up || !nl_userns_count(&k->userns)) return;
  size_t n = 0;
  char **gone = NULL;
  nl_map_iter_t it;
  const char *uid;
  nl_map_iter_init(&it, &k->userns.pods);
  while (nl_map_iter_next(&it, &uid, NULL)) {
    /* upstream also frees a known pod's slot when its directory is missing;
     * here a new pod's slot is taken on the loop before the thread pool
     * makes its directory, which a scan may not have seen yet */
    if (is_known(k, uid)) continue;
    gone = nl_xrealloc(gone, (n + 1) * sizeof *gone);
    gone[n++] = nl_xstrdup(uid);
  }
  for (size_t i = 0; i < n; i++) {
    nl_vlog(5, "clean up orphaned pod user namespace allocation %s", gone[i]);
    nl__kubelet_userns_release(k, gone[i]);
    free(gone[i]);
  }
  free(gone);
}
