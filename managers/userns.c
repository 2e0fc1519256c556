/* Pod user namespaces: the range, its slots, the pod directory's file
 * (upstream pkg/kubelet/userns/userns_manager.go, kubelet_pods.go
 * getKubeletMappings and parseGetSubIdsOutput). */
#include "managers/userns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reactor/log.h"
#include "reactor/xalloc.h"

void nl_userns_default_range(uint32_t ids_per_pod, uint32_t *first, uint32_t *len) {
  *first = ids_per_pod;
  *len = (uint32_t)((UINT64_C(1) << 32) - ids_per_pod);
}

/* ---- getsubids ---- */

static bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* Go's strconv.ParseUint(s, 10, 32): digits only, no sign, at most 2^32-1. */
static bool parse_u32(const char *s, size_t n, uint32_t *out) {
  if (n == 0) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (uint64_t)(s[i] - '0');
    if (v > UINT32_MAX) return false;
  }
  *out = (uint32_t)v;
  return true;
}

int nl_userns_parse_getsubids(const char *out, size_t n, uint32_t *first, uint32_t *count,
                              nl_err_t **err) {
  /* strings.Trim(input, "\n"), then exactly one line of four fields */
  const char *b = out, *e = out + n;
  while (b < e && *b == '\n') b++;
  while (e > b && e[-1] == '\n') e--;
  int shown = n > 200 ? 200 : (int)n;
  if (memchr(b, '\n', (size_t)(e - b)))
    return nl_err_set(err, NL_EINVAL, "error parsing line \"%.*s\": it must contain only one line",
                      shown, out);
  const char *f[5];
  size_t fl[5], nf = 0;
  for (const char *p = b; p < e;) {
    while (p < e && is_space(*p)) p++;
    if (p >= e) break;
    const char *s = p;
    while (p < e && !is_space(*p)) p++;
    if (nf == 5) break;
    f[nf] = s;
    fl[nf++] = (size_t)(p - s);
  }
  if (nf != 4) return nl_err_set(err, NL_EINVAL, "invalid line \"%.*s\"", shown, out);
  if (!parse_u32(f[2], fl[2], first) || !parse_u32(f[3], fl[3], count))
    return nl_err_set(err, NL_EINVAL, "error parsing line \"%.*s\": not an unsigned 32-bit number",
                      shown, out);
  return 0;
}

/* ---- the allocator ---- */

int nl_userns_init(nl_userns_t *m, uint32_t first, uint32_t count, uint32_t ids_per_pod,
                   int32_t max_pods, nl_err_t **err) {
  memset(m, 0, sizeof *m);
  if (ids_per_pod == 0 || ids_per_pod % NL_USERNS_UNIT != 0)
    return nl_err_set(err, NL_EINVAL, "kubelet user namespace length %u is not a multiple of %u",
                      ids_per_pod, NL_USERNS_UNIT);
  if (first % ids_per_pod != 0)
    return nl_err_set(err, NL_EINVAL, "kubelet user assigned ID %u is not a multiple of %u", first,
                      ids_per_pod);
  if (first < ids_per_pod) /* id 0 is never mapped: that would be the host's root */
    return nl_err_set(err, NL_EINVAL, "kubelet user assigned ID %u must be greater or equal to %u",
                      first, ids_per_pod);
  if (count % ids_per_pod != 0)
    return nl_err_set(err, NL_EINVAL, "kubelet user assigned IDs length %u is not a multiple of %u",
                      count, ids_per_pod);
  if (max_pods > 0 && count / ids_per_pod < (uint32_t)max_pods)
    return nl_err_set(err, NL_EINVAL, "kubelet user assigned IDs are not enough to support %d pods",
                      max_pods);
  m->off = first / ids_per_pod;
  m->len = count / ids_per_pod;
  m->ids_per_pod = ids_per_pod;
  m->used = nl_xcalloc(m->len / 8 + 1, 1);
  nl_map_init(&m->pods);
  if (getrandom(&m->rng, sizeof m->rng, GRND_NONBLOCK) != (ssize_t)sizeof m->rng)
    m->rng = (uint64_t)getpid() * 0x9e3779b97f4a7c15u;
  m->rng |= 1;
  nl_vlog(5, "user namespace manager mapping: offset %u, length %u, idsPerPod %u", m->off, m->len,
          ids_per_pod);
  return 0;
}

void nl_userns_free(nl_userns_t *m) {
  free(m->used);
  m->used = NULL;
  nl_map_free(&m->pods, NULL);
}

static bool has(const nl_userns_t *m, uint32_t i) { return m->used[i / 8] & (1u << (i % 8)); }
static void set(nl_userns_t *m, uint32_t i, bool on) {
  if (on)
    m->used[i / 8] |= (uint8_t)(1u << (i % 8));
  else
    m->used[i / 8] &= (uint8_t) ~(1u << (i % 8));
}

static uint32_t host_id_of(const nl_userns_t *m, uint32_t slot) {
  return (uint32_t)(((uint64_t)slot + m->off) * m->ids_per_pod);
}

bool nl_userns_get(const nl_userns_t *m, const char *uid, uint32_t *host_id) {
  uintptr_t v = (uintptr_t)nl_map_get(&m->pods, uid);
  if (!v) return false;
  *host_id = host_id_of(m, (uint32_t)(v - 1));
  return true;
}

int nl_userns_record(nl_userns_t *m, const char *uid, uint32_t from, uint32_t length,
                     nl_err_t **err) {
  if (length != m->ids_per_pod)
    return nl_err_set(err, NL_EINVAL, "wrong user namespace length %u", length);
  if (from % m->ids_per_pod != 0)
    return nl_err_set(err, NL_EINVAL, "wrong user namespace offset specified %u", from);
  uint32_t prev;
  bool found = nl_userns_get(m, uid, &prev);
  if (found && prev != from)
    return nl_err_set(err, NL_EINVAL, "different user namespace range already used by pod %s", uid);
  if (found) return 0;
  uint32_t idx = from / m->ids_per_pod;
  if (idx < m->off || idx - m->off >= m->len)
    return nl_err_set(err, NL_EINVAL, "id %u is out of range", from);
  idx -= m->off;
  if (has(m, idx))
    return nl_err_set(err, NL_EINVAL, "range picked for pod %s already taken", uid);
  set(m, idx, true);
  nl_map_put(&m->pods, uid, (void *)(uintptr_t)(idx + 1));
  return 0;
}

int nl_userns_allocate(nl_userns_t *m, const char *uid, uint32_t *host_id, bool *fresh,
                       nl_err_t **err) {
  *fresh = false;
  if (nl_userns_get(m, uid, host_id)) return 0;
  /* upstream's AllocationBitmap scans from a random slot */
  m->rng ^= m->rng << 13;
  m->rng ^= m->rng >> 7;
  m->rng ^= m->rng << 17;
  uint32_t start = (uint32_t)(m->rng % m->len);
  for (uint32_t k = 0; k < m->len; k++) {
    uint32_t i = (start + k) % m->len;
    if (has(m, i)) continue;
    set(m, i, true);
    nl_map_put(&m->pods, uid, (void *)(uintptr_t)(i + 1));
    nl_vlog(5, "pod %s: new user namespace allocation %u", uid, host_id_of(m, i));
    *host_id = host_id_of(m, i);
    *fresh = true;
    return 0;
  }
  return nl_err_set(err, NL_ERUNTIME, "could not find an empty slot to allocate a user namespace");
}

bool nl_userns_release(nl_userns_t *m, const char *uid) {
  uintptr_t v = (uintptr_t)nl_map_del(&m->pods, uid);
  if (!v) return false;
  nl_vlog(5, "pod %s: releasing its user namespace allocation", uid);
  set(m, (uint32_t)(v - 1), false);
  return true;
}

/* ---- the pod directory's file ---- */

char *nl_userns_file_format(uint32_t host_id, uint32_t length) {
  return nl_xasprintf("{\"uidMappings\":[{\"hostId\":%u,\"containerId\":0,\"length\":%u}],"
                      "\"gidMappings\":[{\"hostId\":%u,\"containerId\":0,\"length\":%u}]}",
                      host_id, length, host_id, length);
}

/* encoding/json's field matching: the exact name, else any case */
static json_t *field(json_t *obj, const char *name) {
  json_t *v = json_object_get(obj, name);
  if (v) return v;
  const char *k;
  json_object_foreach(obj, k, v) if (strcasecmp(k, name) == 0) return v;
  return NULL;
}

typedef struct {
  uint32_t host, container, length;
} mapping_t;

static int u32_field(json_t *obj, const char *name, uint32_t *out, nl_err_t **err) {
  json_t *v = field(obj, name);
  if (!v || json_is_null(v)) {
    *out = 0;
    return 0;
  }
  if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
    return nl_err_set(err, NL_EINVAL, "invalid user namespace mappings file: %s: not a uint32",
                      name);
  *out = (uint32_t)json_integer_value(v);
  return 0;
}

/* The mappings of one kind: n of them, the first in *first. */
static int mappings(json_t *doc, const char *name, mapping_t *first, size_t *n, nl_err_t **err) {
  json_t *a = field(doc, name);
  *n = 0;
  if (!a || json_is_null(a)) return 0;
  if (!json_is_array(a))
    return nl_err_set(err, NL_EINVAL, "invalid user namespace mappings file: %s: not a list", name);
  for (size_t i = 0; i < json_array_size(a); i++) {
    json_t *e = json_array_get(a, i);
    if (!json_is_object(e))
      return nl_err_set(err, NL_EINVAL, "invalid user namespace mappings file: %s[%zu]: not an object",
                        name, i);
    mapping_t mp;
    if (u32_field(e, "hostId", &mp.host, err) < 0 ||
        u32_field(e, "containerId", &mp.container, err) < 0 ||
        u32_field(e, "length", &mp.length, err) < 0)
      return -1;
    if (i == 0) *first = mp;
  }
  *n = json_array_size(a);
  return 0;
}

int nl_userns_file_parse(const char *data, size_t n, uint32_t *host_id, uint32_t *length,
                         nl_err_t **err) {
  json_error_t je;
  json_t *doc = json_loadb(data, n, JSON_DECODE_ANY, &je);
  if (!doc) return nl_err_set(err, NL_EINVAL, "invalid user namespace mappings file: %s", je.text);
  int r = -1;
  mapping_t u = {0}, g = {0};
  size_t nu, ng;
  if (!json_is_object(doc)) {
    nl_err_set(err, NL_EINVAL, "invalid user namespace mappings file: not an object");
  } else if (mappings(doc, "uidMappings", &u, &nu, err) < 0 ||
             mappings(doc, "gidMappings", &g, &ng, err) < 0) {
  } else if (nu != 1) {
    nl_err_set(err, NL_EINVAL,
               "invalid user namespace configuration: no more than one mapping allowed.");
  } else if (ng != nu) {
    nl_err_set(err, NL_EINVAL,
               "invalid user namespace configuration: GID and UID mappings should be identical.");
  } else if (u.host != g.host || u.container != g.container || u.length != g.length) {
    nl_err_set(err, NL_EINVAL,
               "invalid user namespace configuration: GID and UID mapping should be identical");
  } else if (u.container != 0) { /* root is mapped, as every file this agent writes has it */
    nl_err_set(err, NL_EINVAL, "invalid user namespace configuration: UID 0 must be mapped");
  } else {
    *host_id = u.host;
    *length = u.length;
    r = 0;
  }
  json_decref(doc);
  return r;
}

/* ---- start ---- */

/* The file's content (at most 64 KiB), or NULL with *missing when there is none. */
static char *read_small(const char *path, size_t *n, bool *missing, nl_err_t **err) {
  *missing = false;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) { /* no file, or no pod directory */
      *missing = true;
      return NULL;
    }
    nl_err_set(err, errno, "open %s: %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 65536, len = 0;
  char *buf = nl_xmalloc(cap);
  ssize_t r;
  while (len < cap && (r = read(fd, buf + len, cap - len)) != 0) {
    if (r < 0) {
      if (errno == EINTR) continue;
      nl_err_set(err, errno, "read %s: %s", path, strerror(errno));
      close(fd);
      free(buf);
      return NULL;
    }
    len += (size_t)r;
  }
  close(fd);
  if (len == cap) {
    nl_err_set(err, NL_EINVAL, "%s: larger than %zu bytes", path, cap);
    free(buf);
    return NULL;
  }
  *n = len;
  return buf;
}

int nl_userns_load(nl_userns_t *m, const char *root_dir, nl_err_t **err) {
  char *dir = nl_xasprintf("%s/pods", root_dir);
  DIR *d = opendir(dir);
  if (!d) {
    int e = errno;
    free(dir);
    if (e == ENOENT) return 0;
    return nl_err_set(err, e, "user namespaces: read pods from disk: %s", strerror(e));
  }
  int rc = 0;
  struct dirent *de;
  while (rc == 0 && (de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    char *path = nl_xasprintf("%s/%s/%s", dir, de->d_name, NL_USERNS_FILE);
    size_t n = 0;
    bool missing;
    char *data = read_small(path, &n, &missing, err);
    uint32_t host = 0, len = 0;
    if (!data && !missing) {
      rc = -1;
    } else if (data && n > 0 &&
               (nl_userns_file_parse(data, n, &host, &len, err) < 0 ||
                nl_userns_record(m, de->d_name, host, len, err) < 0)) {
      rc = nl_err_wrap(err, "%s", path);
    }
    if (rc < 0) nl_err_wrap(err, "record pod mappings for existing pod %s", de->d_name);
    free(data);
    free(path);
  }
  closedir(d);
  free(dir);
  return rc;
}
