/* kubeconfig files in upstream's format (clientcmd v1 Config): clusters, users,
 * contexts and current-context, resolved to the one set of connection settings
 * the current context names. Paths in the file are resolved against the
 * file's directory, as client-go does. Reading the file is synchronous: it is
 * done once at start-up, before the loop runs. */
#ifndef NL_KUBE_KUBECONFIG_H
#define NL_KUBE_KUBECONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "reactor/error.h"

/* Every string owned; NULL when absent. Exactly one of ca_file/ca_pem (or
 * neither: system roots are not used, so verification then fails unless
 * insecure), one of cert_file/cert_pem with key_file/key_pem, or a token. */
typedef struct nl_kubeconfig {
  char *path;            /* the file it came from */
  char *context;         /* the context used */
  char *server;          /* "https://host:port" (path prefix kept, no trailing '/') */
  char *tls_server_name; /* clusters[].cluster.tls-server-name */
  bool insecure;         /* insecure-skip-tls-verify */
  char *ca_file, *ca_pem;
  char *cert_file, *cert_pem;
  char *key_file, *key_pem;
  char *token;           /* user.token, or the content of user.tokenFile */
  char *token_file;
} nl_kubeconfig_t;

/* Loads path, checks that the files it names (CA, client certificate and key) can
 * be read, and reads tokenFile into token (surrounding blanks trimmed) unless a
 * token is given too. Returns 0, or -1 with *err naming the file and field:
 *   "kubeconfig /etc/kubernetes/kubelet.conf: contexts[0].context.cluster: cluster \"x\" not found"
 *   "kubeconfig /x: users[0].user.exec: exec credential plugins are not supported"
 *   "kubeconfig /x: client-key /x/k.pem: No such file or directory"
 * A missing or unreadable file has the errno as code, every other problem NL_EINVAL.
 * Only the current context, its cluster and its user are checked (client-go's
 * ConfirmUsable). On failure *kc holds nothing to free. */
int nl_kubeconfig_load(nl_kubeconfig_t *kc, const char *path, nl_err_t **err);
/* The same from bytes already read (dir resolves relative paths; NULL keeps them
 * as written), without touching the file system: no file check, token_file not
 * read. For tests and fuzzing. */
int nl_kubeconfig_parse(nl_kubeconfig_t *kc, const char *data, size_t len, const char *path,
                        const char *dir, nl_err_t **err);
void nl_kubeconfig_free(nl_kubeconfig_t *kc);

#endif
