/* Start-up choice of the client credentials, as upstream's
 * pkg/kubelet/certificate/bootstrap (LoadClientConfig, isClientConfigStillValid). */
#include "agent/kubelet_certs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/cert_store.h"
#include "agent/cert_x509.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define CLIENT_PREFIX "kubelet-client"
#define SERVER_PREFIX "kubelet-server"

void nl_kubelet_creds_free(nl_kubelet_creds_t *cr) {
  nl_kubeconfig_free(&cr->kc);
  nl_kubeconfig_free(&cr->bootstrap);
  free(cr->client_pem);
  free(cr->server_pem);
  free(cr->server_path);
  memset(cr, 0, sizeof *cr);
}

/* A certificate (and key, when the text holds one) that parses and has not
 * expired. Returns 0, or -1 with *err saying why not. */
static int still_valid(const char *pem, bool pair, nl_err_t **err) {
  nl_x509_info_t info;
  if ((pair ? nl_x509_pair_parse(pem, pem, &info, err) : nl_x509_cert_parse(pem, strlen(pem), &info, err)) < 0)
    return -1;
  time_t exp = info.not_after;
  nl_x509_info_free(&info);
  if (time(NULL) >= exp) return nl_err_set(err, NL_EINVAL, "the certificate has expired");
  return 0;
}

/* The kubeconfig's client certificate as PEM text, or NULL when it has none. */
static int kc_cert(const nl_kubeconfig_t *kc, char **pem, nl_err_t **err) {
  *pem = NULL;
  if (kc->cert_pem) *pem = nl_xstrdup(kc->cert_pem);
  else if (kc->cert_file && nl_cert_store_read(kc->cert_file, pem, err) < 0) return -1;
  return 0;
}

/* The stored pair <dir>/<prefix>-current.pem when it is valid. */
static char *stored_pair(const char *dir, const char *prefix) {
  char *path = nl_cert_store_current_path(dir, prefix), *pem = NULL;
  nl_err_t *err = NULL;
  if (nl_cert_store_read(path, &pem, &err) == 0 && still_valid(pem, true, &err) < 0) {
    nl_info("%s: not used: %s", path, nl_err_msg(err));
    free(pem);
    pem = NULL;
  }
  nl_err_free(&err);
  free(path);
  return pem;
}

/* kc's user becomes the stored pair at <dir>/<prefix>-current.pem. */
static void use_pair(nl_kubeconfig_t *kc, const char *dir) {
  char **f[] = {&kc->cert_file, &kc->cert_pem, &kc->key_file, &kc->key_pem, &kc->token,
                &kc->token_file};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    free(*f[i]);
    *f[i] = NULL;
  }
  kc->cert_file = nl_cert_store_current_path(dir, CLIENT_PREFIX);
  kc->key_file = nl_xstrdup(kc->cert_file);
}

/* The bootstrap kubeconfig's cluster, with the stored pair or no user yet. */
static void from_bootstrap(nl_kubelet_creds_t *cr, const nl_kubelet_config_t *cfg) {
  const nl_kubeconfig_t *b = &cr->bootstrap;
  nl_kubeconfig_t *kc = &cr->kc;
  kc->path = nl_xstrdup(cfg->kubeconfig);
  kc->server = nl_xstrdup(b->server);
  kc->insecure = b->insecure;
  kc->ca_file = b->ca_file ? nl_xstrdup(b->ca_file) : NULL;
  kc->ca_pem = b->ca_pem ? nl_xstrdup(b->ca_pem) : NULL;
  kc->tls_server_name = b->tls_server_name ? nl_xstrdup(b->tls_server_name) : NULL;
  cr->write_kubeconfig = true;
  cr->client_pem = stored_pair(cfg->cert_dir, CLIENT_PREFIX);
  if (!cr->client_pem) return;
  use_pair(kc, cfg->cert_dir);
  nl_err_t *err = NULL;
  if (nl_cert_store_write_kubeconfig(cfg->kubeconfig, b, kc->cert_file, &err) < 0) {
    nl_warn("%s", nl_err_msg(err));
    nl_err_free(&err);
    return; /* the client certificate manager tries again after its next pair */
  }
  cr->write_kubeconfig = false;
}

int nl_kubelet_creds_load(nl_kubelet_creds_t *cr, const nl_kubelet_config_t *cfg, nl_err_t **err) {
  memset(cr, 0, sizeof *cr);
  bool boot = cfg->bootstrap_kubeconfig && *cfg->bootstrap_kubeconfig;
  int rc = nl_kubeconfig_load(&cr->kc, cfg->kubeconfig, err);
  if (rc == 0) rc = kc_cert(&cr->kc, &cr->client_pem, err);
  if (rc == 0 && boot && cr->client_pem && still_valid(cr->client_pem, false, err) < 0) {
    nl_err_wrap(err, "Part of the existing bootstrap client certificate in %s is expired",
                cfg->kubeconfig);
    rc = -1;
  }
  if (rc == 0 && boot && !cr->client_pem) /* a token user: nothing to bootstrap */
    boot = false;
  if (rc < 0 && !boot) return -1;
  if (rc < 0) {
    nl_info("Unable to read existing bootstrap client config from %s: %s", cfg->kubeconfig,
            nl_err_msg(*err));
    nl_err_free(err);
    nl_kubeconfig_free(&cr->kc);
    free(cr->client_pem);
    cr->client_pem = NULL;
    if (nl_kubeconfig_load(&cr->bootstrap, cfg->bootstrap_kubeconfig, err) < 0) {
      nl_err_wrap(err, "--bootstrap-kubeconfig");
      nl_kubelet_creds_free(cr);
      return -1;
    }
    from_bootstrap(cr, cfg);
    if (!cr->client_pem)
      nl_info("Using bootstrap kubeconfig to generate TLS client cert, key and kubeconfig file");
  } else if (boot) {
    /* Valid now; kept for when the certificate expires while offline. */
    if (nl_kubeconfig_load(&cr->bootstrap, cfg->bootstrap_kubeconfig, err) < 0) {
      nl_warn("--bootstrap-kubeconfig: %s: an expired certificate cannot be recovered",
              nl_err_msg(*err));
      nl_err_free(err);
    }
  }
  if (cfg->rotate_certificates && !cr->write_kubeconfig) {
    char *pair = stored_pair(cfg->cert_dir, CLIENT_PREFIX);
    if (pair) {
      free(cr->client_pem);
      cr->client_pem = pair;
      use_pair(&cr->kc, cfg->cert_dir);
    }
  }
  if (cfg->server_tls_bootstrap) {
    cr->server_pem = stored_pair(cfg->cert_dir, SERVER_PREFIX);
    if (cr->server_pem) cr->server_path = nl_cert_store_current_path(cfg->cert_dir, SERVER_PREFIX);
  }
  return 0;
}
