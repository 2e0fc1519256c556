/* emptyDir and hostPath volumes (upstream pkg/volume/emptydir, hostpath), and
 * the directories and tmpfs mounts of the API volumes, whose content
 * volumes_api.c resolves and atomic_writer.c writes. */
#include "managers/volumes.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "managers/atomic_writer.h"
#include "reactor/fs.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define EMPTY_DIR_PLUGIN "kubernetes.io~empty-dir"
#define TMPFS_MAGIC_NR 0x01021994

static const nl_volume_t *find_volume(const nl_pod_t *pod, const char *name) {
  for (size_t i = 0; i < pod->spec.n_volumes; i++)
    if (strcmp(pod->spec.volumes[i].name, name) == 0) return &pod->spec.volumes[i];
  return NULL;
}

static const char *unsupported(const nl_volume_t *v) {
  if (v->unsupported) return v->unsupported;
  if (v->persistent_volume_claim) return "persistentVolumeClaim";
  return "unknown";
}

/* The plugin directory of a volume nanolet serves from the pod directory, and
 * whether it lives on a tmpfs of its own (upstream's wrapped emptyDir medium). */
static const char *plugin_of(const nl_volume_t *v, bool *tmpfs) {
  *tmpfs = v->secret || v->downward_api || v->projected;
  if (v->empty_dir) return EMPTY_DIR_PLUGIN;
  if (v->config_map) return "kubernetes.io~configmap";
  if (v->secret) return "kubernetes.io~secret";
  if (v->downward_api) return "kubernetes.io~downward-api";
  if (v->projected) return "kubernetes.io~projected";
  return NULL;
}

void nl_api_volumes_free(nl_api_volumes_t *a) {
  for (size_t i = 0; i < a->n; i++) {
    free(a->v[i].name);
    nl_aw_files_free(a->v[i].files, a->v[i].n_files);
  }
  free(a->v);
  a->v = NULL;
  a->n = 0;
}

char *nl_volumes_host_path(const char *root_dir, const nl_pod_t *pod, const char *name,
                           bool *read_only, nl_err_t **err) {
  const nl_volume_t *v = find_volume(pod, name);
  if (!v) {
    nl_err_set(err, NL_EINVAL, "cannot find volume \"%s\" to mount", name);
    return NULL;
  }
  if (read_only) *read_only = false;
  if (v->host_path) return nl_xstrdup(v->host_path->path ? v->host_path->path : "");
  bool tmpfs;
  const char *plugin = plugin_of(v, &tmpfs);
  if (plugin) {
    if (read_only) *read_only = !v->empty_dir;
    return nl_xasprintf("%s/pods/%s/volumes/%s/%s", root_dir, pod->metadata.uid, plugin, name);
  }
  if (v->image)
    nl_err_set(err, NL_EINVAL, "image volume \"%s\" was not pulled: it has no host path", name);
  else
    nl_err_set(err, NL_EINVAL, "volume \"%s\": %s volumes are not supported by nanolet", name,
               unsupported(v));
  return NULL;
}

int nl_volumes_check_subpath(const char *sub, nl_err_t **err) {
  if (sub[0] == '/') return nl_err_set(err, NL_EINVAL, "subPath \"%s\" must be relative", sub);
  const char *p = sub;
  while (*p) {
    size_t n = strcspn(p, "/");
    if (n == 2 && p[0] == '.' && p[1] == '.')
      return nl_err_set(err, NL_EINVAL, "subPath \"%s\" must not contain '..'", sub);
    p += n;
    if (*p) p++;
  }
  return 0;
}

static bool is_tmpfs(const char *path) {
  struct statfs fs;
  return statfs(path, &fs) == 0 && (unsigned long)fs.f_type == TMPFS_MAGIC_NR;
}

/* path is a mount point (a tmpfs of a volume): not on its parent's device. */
static bool is_mount(const char *path, const char *parent) {
  struct stat a, b;
  return stat(path, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

/* upstream emptyDir setupDir: 0777 so that any container user can write,
 * whatever the umask; other bits (setgid from an fsGroup) stay unless the
 * permissions differ. On a tmpfs it runs before the mount, whose root is 1777. */
static int setup_dir(const char *dir, nl_err_t **err) {
  struct stat st;
  if (stat(dir, &st) < 0) return nl_err_set(err, errno, "stat %s: %s", dir, strerror(errno));
  if ((st.st_mode & 0777) != 0777 && chmod(dir, 0777) < 0)
    return nl_err_set(err, errno, "chmod %s: %s", dir, strerror(errno));
  return 0;
}

/* SetVolumeOwnership of a writable volume for the pod's fsGroup, once: when
 * the root has the group and setgid already (a later sync, an agent restart)
 * nothing is walked again, as fsGroupChangePolicy OnRootMismatch does. */
static int own_once(const char *dir, const nl_pod_t *pod, nl_err_t **err) {
  const nl_pod_security_context_t *sc = pod->spec.security_context;
  if (!sc || !sc->fs_group.set) return 0;
  struct stat st;
  if (stat(dir, &st) == 0 && st.st_gid == (gid_t)sc->fs_group.v && (st.st_mode & S_ISGID) &&
      (st.st_mode & 0770) == 0770)
    return 0;
  return nl_volume_set_ownership(dir, (unsigned)sc->fs_group.v, false, true, err);
}

static int setup_empty_dir(const char *root, const nl_pod_t *pod, const nl_volume_t *v,
                           nl_err_t **err) {
  char *dir = nl_xasprintf("%s/pods/%s/volumes/" EMPTY_DIR_PLUGIN "/%s", root, pod->metadata.uid,
                           v->name);
  int r = nl_mkdir_p(dir, 0750);
  if (r < 0) {
    nl_err_set(err, -r, "emptyDir %s: mkdir %s: %s", v->name, dir, strerror(-r));
    free(dir);
    return -1;
  }
  bool memory = v->empty_dir->medium && strcmp(v->empty_dir->medium, "Memory") == 0;
  if (!(memory && is_tmpfs(dir)) && setup_dir(dir, err) < 0) {
    nl_err_wrap(err, "emptyDir %s", v->name);
    free(dir);
    return -1;
  }
  if (memory && !is_tmpfs(dir)) {
    char opts[64] = "";
    if (v->empty_dir->has_size_limit && nl_quantity_sign(&v->empty_dir->size_limit) > 0)
      snprintf(opts, sizeof opts, "size=%lld",
               (long long)nl_quantity_value(&v->empty_dir->size_limit));
    if (mount("tmpfs", dir, "tmpfs", 0, opts[0] ? opts : NULL) < 0) {
      nl_err_set(err, errno, "emptyDir %s: mount tmpfs on %s: %s", v->name, dir, strerror(errno));
      free(dir);
      return -1;
    }
  }
  r = own_once(dir, pod, err);
  if (r < 0) nl_err_wrap(err, "emptyDir %s", v->name);
  free(dir);
  return r;
}

static int check_host_path(const nl_volume_t *v, nl_err_t **err) {
  const char *path = v->host_path->path ? v->host_path->path : "";
  const char *type = v->host_path->type ? v->host_path->type : "";
  struct stat st;
  int r = stat(path, &st);
  if (strcmp(type, "") == 0) return 0;
  if (strcmp(type, "DirectoryOrCreate") == 0) {
    if (r == 0 && S_ISDIR(st.st_mode)) return 0;
    if (r < 0) {
      int e = nl_mkdir_p(path, 0755);
      if (e == 0) return 0;
      return nl_err_set(err, -e, "hostPath %s: mkdir %s: %s", v->name, path, strerror(-e));
    }
    return nl_err_set(err, NL_EINVAL, "hostPath type check failed: %s is not a directory", path);
  }
  if (strcmp(type, "FileOrCreate") == 0) {
    if (r == 0 && S_ISREG(st.st_mode)) return 0;
    if (r < 0) {
      int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
      if (fd >= 0) {
        close(fd);
        return 0;
      }
      return nl_err_set(err, errno, "hostPath %s: create %s: %s", v->name, path, strerror(errno));
    }
    return nl_err_set(err, NL_EINVAL, "hostPath type check failed: %s is not a file", path);
  }
  struct { const char *type, *what; mode_t fmt; } checks[] = {
      {"Directory", "directory", S_IFDIR}, {"File", "file", S_IFREG},
      {"Socket", "socket", S_IFSOCK},      {"CharDevice", "character device", S_IFCHR},
      {"BlockDevice", "block device", S_IFBLK}};
  for (size_t i = 0; i < sizeof checks / sizeof *checks; i++) {
    if (strcmp(type, checks[i].type) != 0) continue;
    if (r < 0 || (st.st_mode & S_IFMT) != checks[i].fmt)
      return nl_err_set(err, NL_EINVAL, "hostPath type check failed: %s is not a %s", path,
                        checks[i].what);
    return 0;
  }
  return nl_err_set(err, NL_EINVAL, "hostPath %s: unknown type \"%s\"", v->name, type);
}

static int setup_api(const char *root, const nl_pod_t *pod, const nl_volume_t *v,
                     nl_api_volumes_t *api, nl_err_t **err) {
  nl_api_volume_t *content = NULL;
  for (size_t i = 0; api && i < api->n && !content; i++)
    if (strcmp(api->v[i].name, v->name) == 0) content = &api->v[i];
  if (!content)
    return nl_err_set(err, NL_EINVAL, "volume \"%s\": its content is not known", v->name);
  bool tmpfs;
  const char *plugin = plugin_of(v, &tmpfs);
  char *pdir = nl_xasprintf("%s/pods/%s/volumes/%s", root, pod->metadata.uid, plugin);
  char *dir = nl_xasprintf("%s/%s", pdir, v->name);
  int r = nl_mkdir_p(dir, 0750);
  if (r < 0) {
    nl_err_set(err, -r, "volume %s: mkdir %s: %s", v->name, dir, strerror(-r));
  } else if (!(tmpfs && is_mount(dir, pdir)) && (r = setup_dir(dir, err)) < 0) {
    nl_err_wrap(err, "volume %s", v->name); /* upstream's wrapped emptyDir */
  } else if (tmpfs && !is_mount(dir, pdir) && mount("tmpfs", dir, "tmpfs", 0, NULL) < 0) {
    r = nl_err_set(err, errno, "volume %s: mount tmpfs on %s: %s", v->name, dir, strerror(errno));
  } else {
    char *what = nl_xasprintf("pod %s/%s volume %s", pod->metadata.namespace_,
                              pod->metadata.name, v->name);
    r = nl_atomic_write(dir, content->files, content->n_files, api->fs_group, what, err);
    if (r > 0) api->changed = true;
    free(what);
  }
  free(dir);
  free(pdir);
  return r < 0 ? -1 : 0;
}

int nl__volumes_setup_sync(const char *root, const nl_pod_t *pod, nl_api_volumes_t *api,
                           nl_err_t **err) {
  const char *sub[] = {"volumes", "plugins", "containers"};
  for (size_t i = 0; i < 3; i++) {
    char *d = nl_xasprintf("%s/pods/%s/%s", root, pod->metadata.uid, sub[i]);
    int r = nl_mkdir_p(d, 0750);
    if (r < 0) nl_err_set(err, -r, "mkdir %s: %s", d, strerror(-r));
    free(d);
    if (r < 0) return -1;
  }
  for (size_t i = 0; i < pod->spec.n_volumes; i++) {
    const nl_volume_t *v = &pod->spec.volumes[i];
    int r;
    if (v->empty_dir)
      r = setup_empty_dir(root, pod, v, err);
    else if (v->host_path)
      r = check_host_path(v, err);
    else if (v->config_map || v->secret || v->downward_api || v->projected)
      r = setup_api(root, pod, v, api, err);
    else if (v->image)
      r = 0; /* pulled by the runtime manager, mounted by the runtime */
    else
      r = nl_err_set(err, NL_EINVAL, "volume \"%s\": %s volumes are not supported by nanolet",
                     v->name, unsupported(v));
    if (r < 0) return nl_err_wrap(err, "pod %s/%s", pod->metadata.namespace_, pod->metadata.name);
  }
  return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  int r = flag == FTW_DP ? rmdir(path) : unlink(path);
  return r < 0 && errno != ENOENT ? -1 : 0;
}

int nl__rm_rf(const char *path) {
  /* FTW_MOUNT: never descend into something still mounted. */
  return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

int nl__volumes_teardown_sync(const char *root, const char *uid, nl_err_t **err) {
  /* The uid names a directory we delete recursively: refuse anything odd. */
  if (!uid || !*uid || strchr(uid, '/') || strcmp(uid, ".") == 0 || strcmp(uid, "..") == 0)
    return nl_err_set(err, NL_EINVAL, "refusing to remove pod directory for uid \"%s\"",
                      uid ? uid : "");
  char *vd = nl_xasprintf("%s/pods/%s/volumes", root, uid);
  DIR *plugins = opendir(vd);
  struct dirent *pe;
  while (plugins && (pe = readdir(plugins))) {
    if (pe->d_name[0] == '.') continue;
    char *ed = nl_xasprintf("%s/%s", vd, pe->d_name);
    DIR *d = opendir(ed);
    struct dirent *e;
    while (d && (e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      char *p = nl_xasprintf("%s/%s", ed, e->d_name);
      if (is_mount(p, ed) && umount2(p, MNT_DETACH) < 0)
        nl_warn("unmount volume %s: %s", p, strerror(errno));
      free(p);
    }
    if (d) closedir(d);
    free(ed);
  }
  if (plugins) closedir(plugins);
  free(vd);
  char *pd = nl_xasprintf("%s/pods/%s", root, uid);
  if (nl__rm_rf(pd) < 0 && errno != ENOENT) {
    nl_err_set(err, errno, "remove %s: %s", pd, strerror(errno));
    free(pd);
    return -1;
  }
  free(pd);
  return 0;
}

/* ---- async wrappers ---- */

typedef struct job {
  uv_work_t req;
  char *root;
  nl_pod_t *pod; /* setup: a copy */
  char *uid;     /* teardown */
  bool keep_dir; /* release: the pod directory stays, empty */
  nl_err_t *err;
  nl_volumes_cb cb;
  void *ctx;
} job_t;

static void work(uv_work_t *w) {
  job_t *j = container_of(w, job_t, req);
  if (j->pod)
    nl__volumes_setup_sync(j->root, j->pod, NULL, &j->err);
  else
    nl__volumes_teardown_sync(j->root, j->uid, &j->err);
  if (j->keep_dir) { /* whatever the teardown left, the directory is there */
    char *dir = nl_xasprintf("%s/pods/%s", j->root, j->uid);
    if (nl_mkdir_p(dir, 0750) < 0 && !j->err)
      nl_err_set(&j->err, errno, "mkdir %s: %s", dir, strerror(errno));
    free(dir);
  }
}

static void after(uv_work_t *w, int status) {
  job_t *j = container_of(w, job_t, req);
  if (status < 0 && !j->err) nl_err_set(&j->err, -status, "volumes: %s", uv_strerror(status));
  j->cb(j->err, j->ctx);
  nl_err_free(&j->err);
  if (j->pod) nl_pod_free(j->pod);
  free(j->root);
  free(j->uid);
  free(j);
}

static int queue(uv_loop_t *loop, job_t *j) {
  int r = uv_queue_work(loop, &j->req, work, after);
  if (r < 0) {
    if (j->pod) nl_pod_free(j->pod);
    free(j->root);
    free(j->uid);
    free(j);
  }
  return r;
}

int nl_volumes_setup(uv_loop_t *loop, const char *root_dir, const nl_pod_t *pod,
                     nl_volumes_cb cb, void *ctx) {
  job_t *j = nl_xcalloc(1, sizeof *j);
  j->root = nl_xstrdup(root_dir);
  j->pod = nl_pod_ref(pod);
  j->cb = cb;
  j->ctx = ctx;
  return queue(loop, j);
}

int nl_volumes_release(uv_loop_t *loop, const char *root_dir, const char *uid,
                       nl_volumes_cb cb, void *ctx) {
  job_t *j = nl_xcalloc(1, sizeof *j);
  j->root = nl_xstrdup(root_dir);
  j->uid = nl_xstrdup(uid);
  j->keep_dir = true;
  j->cb = cb;
  j->ctx = ctx;
  return queue(loop, j);
}

int nl_volumes_teardown(uv_loop_t *loop, const char *root_dir, const char *uid,
                        nl_volumes_cb cb, void *ctx) {
  job_t *j = nl_xcalloc(1, sizeof *j);
  j->root = nl_xstrdup(root_dir);
  j->uid = nl_xstrdup(uid);
  j->cb = cb;
  j->ctx = ctx;
  return queue(loop, j);
}
