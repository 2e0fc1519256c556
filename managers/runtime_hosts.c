/* The kubelet-managed /etc/hosts of a pod (upstream kubelet_pods.go
 * makeHostsMount, ensureHostsFile): <root>/pods/<uid>/etc-hosts, mounted at
 * /etc/hosts in every container that does not mount that path itself. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "managers/runtime_internal.h"
#include "reactor/buf.h"
#include "reactor/xalloc.h"

#define HEADER "# Kubernetes-managed hosts file.\n"
#define HEADER_HOST_NETWORK "# Kubernetes-managed hosts file (host network).\n"
#define NODE_HOSTS_MAX (1024 * 1024)

bool nl_runtime_wants_etc_hosts(const nl_container_t *c) {
  for (size_t i = 0; i < c->n_volume_mounts; i++)
    if (c->volume_mounts[i].mount_path && !strcmp(c->volume_mounts[i].mount_path, "/etc/hosts"))
      return false;
  return true;
}

/* hostsEntriesFromHostAliases: one line per alias, its names tab-separated. */
char *nl_runtime_hosts_aliases(const nl_pod_t *pod) {
  if (!pod->spec.n_host_aliases) return nl_xstrdup("");
  nl_buf_t buf = NL_BUF_INIT, *b = &buf;
  nl_buf_puts(b, "\n# Entries added by HostAliases.\n");
  for (size_t i = 0; i < pod->spec.n_host_aliases; i++) {
    const nl_host_alias_t *a = &pod->spec.host_aliases[i];
    nl_buf_puts(b, a->ip ? a->ip : "");
    nl_buf_puts(b, "\t");
    for (size_t j = 0; j < a->hostnames.n; j++) {
      if (j) nl_buf_puts(b, "\t");
      nl_buf_puts(b, a->hostnames.items[j]);
    }
    nl_buf_puts(b, "\n");
  }
  return nl_buf_steal(b);
}

char *nl_runtime_hosts_content(const char *hostname, const char *domain, char *const *ips,
                               size_t n_ips, const char *aliases) {
  nl_buf_t b = NL_BUF_INIT;
  nl_buf_puts(&b, HEADER
              "127.0.0.1\tlocalhost\n"
              "::1\tlocalhost ip6-localhost ip6-loopback\n"
              "fe00::0\tip6-localnet\n"
              "fe00::0\tip6-mcastprefix\n"
              "fe00::1\tip6-allnodes\n"
              "fe00::2\tip6-allrouters\n");
  for (size_t i = 0; i < n_ips; i++) {
    if (domain && *domain)
      nl_buf_printf(&b, "%s\t%s.%s\t%s\n", ips[i], hostname, domain, hostname);
    else
      nl_buf_printf(&b, "%s\t%s\n", ips[i], hostname);
  }
  nl_buf_puts(&b, aliases);
  return nl_buf_steal(&b);
}

char *nl_runtime_node_hosts_content(const char *node_hosts, size_t len, const char *aliases) {
  nl_buf_t b = NL_BUF_INIT;
  nl_buf_puts(&b, HEADER_HOST_NETWORK);
  nl_buf_append(&b, node_hosts, len);
  nl_buf_puts(&b, aliases);
  return nl_buf_steal(&b);
}

/* Read on the thread pool: the node's file may be large or slow. Returns a new
 * buffer, or NULL with errno set. */
static char *read_node_hosts(const char *path, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  nl_buf_t b = NL_BUF_INIT;
  char chunk[4096];
  ssize_t n;
  while ((n = read(fd, chunk, sizeof chunk)) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || b.len + (size_t)n > NODE_HOSTS_MAX) {
      int e = n < 0 ? errno : EFBIG;
      close(fd);
      nl_buf_free(&b);
      errno = e;
      return NULL;
    }
    nl_buf_append(&b, chunk, (size_t)n);
  }
  close(fd);
  *len = b.len;
  return b.data ? nl_buf_steal(&b) : nl_xstrdup("");
}

/* Rewritten in place, not replaced: running containers have the file
 * bind-mounted and see the new content, as with upstream's WriteFile. */
int nl__hosts_write(const char *path, const char *content, const char *node_hosts_path,
                    nl_err_t **err) {
  char *owned = NULL;
  if (node_hosts_path) {
    size_t len = 0;
    char *node = read_node_hosts(node_hosts_path, &len);
    if (!node)
      return nl_err_set(err, errno, "read %s: %s", node_hosts_path, strerror(errno));
    owned = nl_runtime_node_hosts_content(node, len, content);
    free(node);
    content = owned;
  }
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    free(owned);
    return nl_err_set(err, errno, "create %s: %s", path, strerror(errno));
  }
  size_t len = strlen(content), off = 0;
  while (off < len) {
    ssize_t n = write(fd, content + off, len - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      close(fd);
      free(owned);
      return nl_err_set(err, e, "write %s: %s", path, strerror(e));
    }
    off += (size_t)n;
  }
  fchmod(fd, 0644); /* whatever the umask */
  close(fd);
  free(owned);
  return 0;
}
