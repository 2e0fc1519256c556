#include "agent/startup.h"

#include <ctype.h>
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "reactor/fs.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

int nl_startup_lock(const char *path, nl_err_t **err) {
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return nl_err_set(err, errno, "open lock file %s: %s", path, strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
    if (errno != EWOULDBLOCK) goto fail;
    nl_info("waiting for the lock on %s", path);
    if (flock(fd, LOCK_EX) < 0) goto fail;
  }
  return fd;
fail:
  nl_err_set(err, errno, "lock %s: %s", path, strerror(errno));
  close(fd);
  return -1;
}

char *nl_startup_node_name(const char *hostname_override, nl_err_t **err) {
  char host[256];
  const char *src = hostname_override;
  if (!src || !*src) {
    if (gethostname(host, sizeof host) < 0) {
      nl_err_set(err, errno, "couldn't determine hostname: %s", strerror(errno));
      return NULL;
    }
    host[sizeof host - 1] = '\0';
    src = host;
  }
  /* Upstream trims and lowercases, and refuses an empty result. */
  while (isspace((unsigned char)*src)) src++;
  size_t n = strlen(src);
  while (n && isspace((unsigned char)src[n - 1])) n--;
  if (!n) {
    nl_err_set(err, NL_EINVAL, "empty hostname is invalid");
    return NULL;
  }
  char *name = nl_xstrndup(src, n);
  for (char *p = name; *p; p++) *p = (char)tolower((unsigned char)*p);
  return name;
}

int nl_startup_oom_score_adj(int value, nl_err_t **err) {
  int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return nl_err_set(err, errno, "open /proc/self/oom_score_adj: %s", strerror(errno));
  char buf[16];
  int n = snprintf(buf, sizeof buf, "%d", value);
  ssize_t w = write(fd, buf, (size_t)n);
  int saved = errno;
  close(fd);
  if (w != n)
    return nl_err_set(err, saved, "write oom_score_adj %d: %s", value, strerror(saved));
  return 0;
}

int nl_startup_notify_ready(nl_err_t **err) {
  const char *path = getenv("NOTIFY_SOCKET");
  if (!path || !*path) return 0;
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  size_t len = strlen(path);
  if (len >= sizeof sa.sun_path)
    return nl_err_set(err, NL_EINVAL, "NOTIFY_SOCKET %s: path too long", path);
  memcpy(sa.sun_path, path, len);
  if (sa.sun_path[0] == '@') sa.sun_path[0] = '\0'; /* abstract socket */
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return nl_err_set(err, errno, "socket: %s", strerror(errno));
  static const char msg[] = "READY=1";
  ssize_t w = sendto(fd, msg, sizeof msg - 1, 0, (struct sockaddr *)&sa,
                     (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len));
  int saved = errno;
  close(fd);
  if (w < 0) return nl_err_set(err, saved, "notify %s: %s", path, strerror(saved));
  return 0;
}

int nl_startup_write_pid_file(const char *path, nl_err_t **err) {
  FILE *f = fopen(path, "we");
  if (!f) return nl_err_set(err, errno, "write pid file %s: %s", path, strerror(errno));
  fprintf(f, "%d\n", (int)getpid());
  if (fclose(f) != 0) return nl_err_set(err, errno, "write pid file %s: %s", path, strerror(errno));
  return 0;
}

/* Global unicast: not loopback, link-local, multicast, broadcast or unspecified. */
static bool global_unicast4(uint32_t host_order) {
  uint8_t a = (uint8_t)(host_order >> 24), b = (uint8_t)(host_order >> 16);
  return host_order != 0 && a != 127 && !(a == 169 && b == 254) && a < 224;
}

static char *default_route_ip(const char *route_file) {
  FILE *f = fopen(route_file, "re");
  if (!f) return NULL;
  char line[512], iface[IF_NAMESIZE + 1] = "", best[IF_NAMESIZE + 1] = "";
  unsigned long dest, gw, flags, refcnt, use, metric, mask, best_metric = ~0UL;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "%16s %lx %lx %lx %lu %lu %lu %lx", iface, &dest, &gw, &flags, &refcnt, &use,
               &metric, &mask) != 8)
      continue; /* the header */
    if (dest != 0 || mask != 0 || !(flags & 0x1) || metric >= best_metric) continue;
    best_metric = metric;
    snprintf(best, sizeof best, "%s", iface);
  }
  fclose(f);
  if (!*best) return NULL;
  struct ifaddrs *ifs, *i;
  if (getifaddrs(&ifs) < 0) return NULL;
  char *ip = NULL;
  for (i = ifs; i && !ip; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || strcmp(i->ifa_name, best) != 0)
      continue;
    struct in_addr a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
    if (!global_unicast4(ntohl(a.s_addr))) continue;
    char buf[INET_ADDRSTRLEN];
    if (inet_ntop(AF_INET, &a, buf, sizeof buf)) ip = nl_xstrdup(buf);
  }
  freeifaddrs(ifs);
  return ip;
}

char *nl_startup_node_ip(const char *hostname_override, const char *route_file) {
  unsigned char tmp[sizeof(struct in6_addr)];
  if (hostname_override && (inet_pton(AF_INET, hostname_override, tmp) == 1 ||
                            inet_pton(AF_INET6, hostname_override, tmp) == 1))
    return nl_xstrdup(hostname_override);
  return default_route_ip(route_file);
}

/* One parsed address of --node-ip; an IPv4-mapped IPv6 address counts as IPv4,
 * as Go's net.IP. */
typedef struct node_addr {
  int family;
  unsigned char b[sizeof(struct in6_addr)]; /* 4 or 16 bytes */
} node_addr_t;

static bool parse_node_addr(const char *s, node_addr_t *a) {
  static const unsigned char v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  memset(a, 0, sizeof *a);
  if (inet_pton(AF_INET, s, a->b) == 1) {
    a->family = AF_INET;
  } else if (inet_pton(AF_INET6, s, a->b) == 1) {
    a->family = AF_INET6;
    if (memcmp(a->b, v4mapped, sizeof v4mapped) == 0) {
      memmove(a->b, a->b + 12, 4);
      a->family = AF_INET;
    }
  } else {
    return false;
  }
  return true;
}

static bool unspecified(const node_addr_t *a) {
  static const unsigned char zero[16];
  return memcmp(a->b, zero, a->family == AF_INET ? 4 : 16) == 0;
}

/* Returns 0 when a is an address of one of this host's interfaces, else -1
 * with *err. */
static int on_host(const node_addr_t *a, nl_err_t **err) {
  struct ifaddrs *ifs, *i;
  if (getifaddrs(&ifs) < 0) return nl_err_set(err, errno, "getifaddrs: %s", strerror(errno));
  bool found = false;
  for (i = ifs; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != a->family) continue;
    if (a->family == AF_INET)
      found = memcmp(&((struct sockaddr_in *)i->ifa_addr)->sin_addr, a->b, 4) == 0;
    else
      found = memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, a->b, 16) == 0;
  }
  freeifaddrs(ifs);
  if (found) return 0;
  char str[INET6_ADDRSTRLEN];
  inet_ntop(a->family, a->b, str, sizeof str);
  return nl_err_set(err, NL_EINVAL, "node IP: \"%s\" not found in the host's network interfaces",
                    str);
}

/* Upstream's validateNodeIP (pkg/kubelet/nodestatus/setters.go), in its order;
 * its "all zeros" case never comes here (0.0.0.0 and :: mean "choose one"). */
static int validate_node_addr(const node_addr_t *a, nl_err_t **err) {
  const unsigned char *b = a->b;
  bool v4 = a->family == AF_INET;
  if (v4 ? b[0] == 127 : IN6_IS_ADDR_LOOPBACK((const struct in6_addr *)b))
    return nl_err_set(err, NL_EINVAL, "nodeIP can't be loopback address");
  if (v4 ? b[0] >= 224 && b[0] <= 239 : b[0] == 0xff)
    return nl_err_set(err, NL_EINVAL, "nodeIP can't be a multicast address");
  if (v4 ? b[0] == 169 && b[1] == 254 : b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
    return nl_err_set(err, NL_EINVAL, "nodeIP can't be a link-local unicast address");
  return on_host(a, err);
}

int nl_startup_check_node_ip(const char *node_ip, nl_err_t **err) {
  if (!node_ip || !*node_ip) return 0;
  node_addr_t addrs[2];
  size_t n = 0;
  char *copy = nl_xstrdup(node_ip), *save = NULL;
  int rc = 0;
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    while (isspace((unsigned char)*tok)) tok++;
    char *end = tok + strlen(tok);
    while (end > tok && isspace((unsigned char)end[-1])) *--end = 0;
    if (!*tok) continue;
    node_addr_t a;
    if (!parse_node_addr(tok, &a)) {
      rc = nl_err_set(err, NL_EINVAL, "bad --node-ip \"%s\": could not parse \"%s\"", node_ip, tok);
      goto out;
    }
    if (n < 2) addrs[n] = a;
    n++;
  }
  if (n > 2 || (n == 2 && addrs[0].family == addrs[1].family)) {
    rc = nl_err_set(err, NL_EINVAL,
                    "bad --node-ip \"%s\": must contain either a single IP or a dual-stack pair of IPs",
                    node_ip);
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    if (unspecified(&addrs[i])) continue; /* "choose one", as upstream */
    if (validate_node_addr(&addrs[i], err) < 0) {
      rc = nl_err_wrap(err, i == 0 ? "failed to validate nodeIP" : "failed to validate secondaryNodeIP");
      goto out;
    }
  }
out:
  free(copy);
  return rc;
}

/* A mountinfo field, its octal escapes (\040 for a space) decoded; false
 * when it does not fit. */
static bool unescape_field(const char *s, size_t n, char *out, size_t size) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '\\' && i + 3 < n && s[i + 1] >= '0' && s[i + 1] <= '3' &&
        s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      c = (char)((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    }
    if (o + 1 >= size) return false;
    out[o++] = c;
  }
  out[o] = 0;
  return true;
}

/* path is base or below it (mount.PathWithinBase). */
static bool within(const char *path, const char *base) {
  size_t n = strlen(base);
  if (strcmp(base, "/") == 0) return path[0] == '/';
  return strncmp(path, base, n) == 0 && (path[n] == 0 || path[n] == '/');
}

bool nl_startup_path_shared(const char *mountinfo, const char *path) {
  bool shared = false;
  /* "id parent major:minor root mountpoint options [optional...] - fstype ..." */
  for (const char *line = mountinfo; line && *line;) {
    const char *eol = strchr(line, '\n');
    size_t len = eol ? (size_t)(eol - line) : strlen(line);
    const char *f = line, *end = line + len;
    char mp[4096];
    bool ok = false, sh = false;
    for (int i = 0; f < end; i++) {
      const char *sp = memchr(f, ' ', (size_t)(end - f));
      size_t n = sp ? (size_t)(sp - f) : (size_t)(end - f);
      if (i == 4) ok = unescape_field(f, n, mp, sizeof mp);
      if (i >= 6) {
        if (n == 1 && f[0] == '-') break;
        if (n > 7 && strncmp(f, "shared:", 7) == 0) sh = true;
      }
      f += n + (sp ? 1 : 0);
    }
    if (ok && within(path, mp)) shared = sh; /* the last one holding path wins */
    line = eol ? eol + 1 : NULL;
  }
  return shared;
}

int nl_startup_make_rshared(const char *root_dir, nl_err_t **err) {
  char *path = realpath(root_dir, NULL);
  if (!path) return nl_err_set(err, errno, "error configuring root directory %s: %s", root_dir,
                               strerror(errno));
  int rc = 0;
  FILE *f = fopen("/proc/self/mountinfo", "re");
  char *info = NULL;
  size_t size = 0;
  if (!f || getdelim(&info, &size, 0, f) < 0) {
    int e = errno ? errno : EIO;
    rc = nl_err_set(err, e, "error configuring root directory %s: read /proc/self/mountinfo: %s",
                    path, strerror(e));
  } else if (nl_startup_path_shared(info, path)) {
    nl_vlog(4, "directory %s is already on a shared mount", path);
  } else {
    nl_vlog(2, "bind-mounting %s with shared mount propagation", path);
    if (mount(path, path, NULL, MS_BIND, NULL) < 0)
      rc = nl_err_set(err, errno, "error configuring root directory: failed to bind-mount %s: %s",
                      path, strerror(errno));
    else if (mount(NULL, path, NULL, MS_SHARED | MS_REC, NULL) < 0)
      rc = nl_err_set(err, errno, "error configuring root directory: failed to make %s rshared: %s",
                      path, strerror(errno));
  }
  if (f) fclose(f);
  free(info);
  free(path);
  return rc;
}

int nl_startup_data_dirs(const char *root_dir, nl_err_t **err) {
  char pods[4096];
  snprintf(pods, sizeof pods, "%s/pods", root_dir);
  const char *dirs[] = {root_dir, pods};
  for (size_t i = 0; i < 2; i++) {
    int r = nl_mkdir_p(dirs[i], 0750);
    if (r < 0) return nl_err_set(err, -r, "error creating %s: %s", dirs[i], strerror(-r));
  }
  return 0;
}
